package fencegatecli

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// The MCP server: fencegate's protocol as tools for coding agents, over
// stdio. Each agent spawns its own server; servers meet only in the
// database, like the CLI's processes.

// maxClaimWait bounds claim's wait, so a tool call cannot hang an agent for
// longer than a person would wait for it.
const maxClaimWait = 5 * time.Minute

// defaultMaxFileBytes is the default of --max-file-bytes.
const defaultMaxFileBytes = 1 << 20

const mcpInstructions = `fencegate: leases with fences, and writes the database refuses once your lease has passed to someone else.
1. claim the files you will change (paths: ["notes.txt", "src/"], relative to the root; a trailing / claims a directory), or a lock by name (resource: "deploy-slot") for SQL, and keep its token.
2. Make every change through write with that token: the change lands only if the lease is still yours, even if you stalled past its ttl. A token writes only the files its claim covers; a lock name's token writes no files.
3. renew before the ttl runs out if the work is long; release when done.
claim answering claimed=false is normal: someone else holds the lock; wait, or claim with wait.
assert (also named check) is advisory: never decide to write on its answer, just call write.`

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
	maxFile := fs.Int64("max-file-bytes", defaultMaxFileBytes, "the largest content, in `bytes`, of one file write")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		if err := checkTTL(*ttl); err != nil {
			return err
		}
		if *maxFile <= 0 {
			return usagef("--max-file-bytes must be positive, got %d", *maxFile)
		}
		cfg := mcpConfig{holder: *holderFlag, root: *root, allowSQL: *allowSQL, ttl: *ttl, maxFileBytes: *maxFile}
		if cfg.holder == "" {
			cfg.holder = processHolder()
		}
		if err := gate.ValidateHolder(cfg.holder); err != nil {
			return usagef("--holder: %s", stripPrefix(err))
		}
		return c.serveMCP(ctx, cfg, &mcp.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopWriteCloser{c.stdout}})
	}
	return cmd
}

// mcpConfig is the server's configuration, from its flags.
type mcpConfig struct {
	holder       string        // who every claim is for
	root         string        // the directory file writes are confined to; "" for none
	allowSQL     bool          // the SQL kind of write is on
	ttl          time.Duration // the default lease term
	maxFileBytes int64         // the largest content a file write takes

	// beforeRename, when set (by tests), runs after a file write's temp
	// file is synced and before it is renamed into place, with the
	// request's context.
	beforeRename func(ctx context.Context)
}

// serveMCP opens the database and serves cfg's tools on t until the client
// hangs up.
func (c *cli) serveMCP(ctx context.Context, cfg mcpConfig, t mcp.Transport) error {
	srv, err := c.newMCPServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	srv.log.Info("serving", "root", cfg.root, "allow_sql", cfg.allowSQL, "ttl", cfg.ttl)
	err = srv.server.Run(ctx, t)
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil // the client hung up
	}
	return err
}

// nopWriteCloser turns stdout into the io.WriteCloser an IOTransport
// wants; stdout stays open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// processHolder names this server process: host-pid plus a random part,
// so that a restarted server, even under a reused pid, is a new holder.
func processHolder() string {
	return ops.HostPID() + "-" + strings.ToLower(crand.Text()[:8])
}

// mcpServer is the MCP server and what its tools use.
type mcpServer struct {
	cfg    mcpConfig
	b      *ops.Backend
	files  *fileArea // nil without --root
	log    *slog.Logger
	server *mcp.Server
}

// newMCPServer opens and migrates the database, opens --root and registers
// the tools.
func (c *cli) newMCPServer(ctx context.Context, cfg mcpConfig) (*mcpServer, error) {
	log := slog.New(slog.NewTextHandler(c.stderr, nil)).With("holder", cfg.holder)
	b, err := c.open(ctx, true)
	if err != nil {
		return nil, err
	}
	s := &mcpServer{cfg: cfg, b: b, log: log}
	if cfg.root != "" {
		if s.files, err = openFileArea(cfg.root, b.DSN, cfg.maxFileBytes); err != nil {
			b.Close()
			return nil, err
		}
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "fencegate", Title: "fencegate: fenced leases and writes", Version: strings.TrimPrefix(ops.Version(), "fencegate ")},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: log})
	s.addTools()
	return s, nil
}

// Close closes the database and the root.
func (s *mcpServer) Close() error {
	var err error
	if s.files != nil {
		err = s.files.Close()
	}
	return errors.Join(err, s.b.Close())
}

// parseTokenArg reads a token argument.
func parseTokenArg(text string) (gate.Token, error) {
	if strings.TrimSpace(text) == "" {
		return gate.Token{}, errors.New("missing token: pass the token claim returned, such as fg1:7:deploy-slot:agent-a")
	}
	token, err := gate.Parse(strings.TrimSpace(text))
	if err != nil {
		return gate.Token{}, fmt.Errorf("bad token %q: %s; pass the token claim returned, unchanged", text, stripPrefix(err))
	}
	return token, nil
}

// ownToken reads a token argument for a tool that acts on the lease:
// only this server's own. Tokens are not secrets (status shows holders and
// fences), so without this an agent could act, by mistake or not, on a
// lease another agent holds.
func (s *mcpServer) ownToken(text string) (gate.Token, error) {
	token, err := parseTokenArg(text)
	if err != nil {
		return gate.Token{}, err
	}
	if token.Holder != s.cfg.holder {
		return gate.Token{}, fmt.Errorf("the token is %q's, and this server is %q: use a token that claim gave you here", token.Holder, s.cfg.holder)
	}
	return token, nil
}

// parseDurationArg reads an optional duration argument: def when empty.
func parseDurationArg(name, text string, def time.Duration) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: want a duration such as 30s, 1m30s or 500ms", name, text)
	}
	return d, nil
}

// dbError describes a database failure for the agent.
func dbError(what string, err error) error {
	if errors.Is(err, lease.ErrBusy) {
		return fmt.Errorf("%s: busy, the lock is in use by another transaction (a write in flight, a concurrent claim); nothing changed: try again, or claim with wait: %w", what, err)
	}
	return fmt.Errorf("%s failed, nothing changed: %w", what, err)
}

// stripPrefix is err's message without fencegate's "fencegate: ".
func stripPrefix(err error) string { return strings.TrimPrefix(err.Error(), "fencegate: ") }

// ms converts a duration to whole milliseconds for outputs.
func ms(d time.Duration) int64 { return d.Milliseconds() }
