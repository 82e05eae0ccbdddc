package fencegatecli

import (
	"context"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/cmd/fencegate/mcpserver"
	"github.com/fencegate/fencegate/fence"
)

func mcpCommand() *command {
	cmd := &command{
		name:     "mcp",
		synopsis: "serve the protocol to coding agents as MCP tools, on stdin/stdout",
		usage:    "mcp [--dsn DSN] [--holder ID] [--root DIR] [--allow-sql] [--ttl 30s] [--max-file-bytes N]",
		help: `Serve fencegate as a Model Context Protocol server on stdin and stdout, for
coding agents (Claude Code, Cursor, Codex, ...). Logs go to stderr. Tools:

  claim    {resource | paths, ttl?, wait?}
                                     a lease and its token, or who holds it
  assert   {token}                   whether a token is current (advisory);
                                     also named check, as on the command line
  renew    {token, ttl?}             a new expiry, same fence; or expired
  release  {token}                   free the lock; a stale token is a no-op
  write    {token, path, content?, mode?}
                                     a fenced file write under --root
           {token, sql: [{query, args?}]}
                                     fenced SQL (with --allow-sql)
  status   {resource?}               leases, floors, recent refusals

There is no daemon: each agent runs its own server, and servers contend
only through the database (as the rest of fencegate: --dsn, else
$` + envDSN + `, else ` + defaultDB + `; migrated on start). Every claim
is for one holder, --holder, else a name unique to this server process
(host-pid-random): a restarted server is a new holder. renew, release and
write take only this server's own tokens.

A file write needs a token whose claim of paths covers the file: paths
are relative to --root, a trailing / claims a directory and everything
below it, and a claim of several paths is all or none under one fence.
Two claims conflict when a path of one equals, contains or is contained in
a path of the other; siblings do not. Each path gets one identity before
it is claimed or written (cleaned; symbolic links inside the root resolved
to their targets, links leading out refused; case folded on a
case-insensitive root; a file with other hard links is not written), and
write refuses a path the token does not cover before touching the disk.
A claim of a plain resource writes no files. Every server sharing a
database must name one tree by the same --root (see docs/PATHS.md).

A file write happens while the write's transaction holds the file's floor
row (and those of the directories above it, shared), after the gate
admitted the token: temp file, fsync, rename, fsync of
the directory, then the transaction commits. So no higher fence can be
granted while the file is written, and a stale token's write never starts;
a server killed mid-write leaves the old file (and perhaps a
.fencegate-*.tmp file beside it). Paths are relative to --root and stay
inside it: absolute paths, "..", symlinks leading out of the root, special
files, files with other hard links and the database's own files are
refused; a symlink inside the root is written through, as its target.
Content is at most --max-file-bytes. Fencing orders the writes that go
through the gate; it does not stop writers that bypass it.

With --allow-sql, write also takes SQL: {token, sql: [{query, args?}]}, the
statements run in order, with args bound to their parameters ($1 on
Postgres, ? or ?1 on SQLite), in one transaction that commits only together
with the gate's admission of the token, through the same confined path as
'fencegate gate': the SQL can never end, restart or nest that transaction.
The answer is the rows affected, or the refusal.

claim's answer when someone else holds the lock is a normal result that
says who and until when; its wait is at most 5m. Bad input, refusals and
failures are tool errors (isError) that say what to do, and bad input is
refused before anything is written.

Client configuration:

  {"mcpServers": {"fencegate": {"command": "fencegate", "args": ["mcp", "--root", "."]}}}`,
		db: true,
	}
	fs := cmd.flagSet()
	holderFlag := fs.String("holder", "", "who this server's claims are for (default: host-pid-random, unique to the process)")
	root := fs.String("root", "", "the `directory` file writes are confined to (default: none, no file writes)")
	allowSQL := fs.Bool("allow-sql", false, "let write run SQL statements in the fenced transaction")
	ttl := durationFlag(fs, "ttl", ops.DefaultTTL, "the lease `duration` claim asks for and renew extends to, unless the call names one")
	maxFile := fs.Int64("max-file-bytes", mcpserver.DefaultMaxFileBytes, "the largest content, in `bytes`, of one file write")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		if err := checkTTL(*ttl); err != nil {
			return err
		}
		if *maxFile <= 0 {
			return usagef("--max-file-bytes must be positive, got %d", *maxFile)
		}
		holder := *holderFlag
		if holder == "" {
			holder = mcpserver.DefaultHolder()
		}
		if err := fence.ValidateHolder(holder); err != nil {
			return usagef("--holder: %s", strings.TrimPrefix(err.Error(), "fencegate: "))
		}
		dsn, err := c.resolveDSN()
		if err != nil {
			return err
		}
		mp, tp := c.tel.providers()
		cfg := mcpserver.Config{
			DSN: dsn, Holder: holder, Root: *root, AllowSQL: *allowSQL, TTL: *ttl, MaxFileBytes: *maxFile,
			Log: c.stderr, MeterProvider: mp, TracerProvider: tp,
		}
		return mcpserver.Run(ctx, cfg, &mcp.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopWriteCloser{c.stdout}})
	}
	return cmd
}

// nopWriteCloser turns stdout into the io.WriteCloser an IOTransport
// wants; stdout stays open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
