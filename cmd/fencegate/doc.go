// Fencegate is fencegate's whole protocol on the command line: leases with
// fences, and fenced writes that the database refuses once a holder's lease
// has passed to someone else. It is for programs that can only shell out
// (scripts, agents' tool loops) and for seeing what the library is for:
//
//	go run ./cmd/fencegate demo
//	go install github.com/fencegate/fencegate/cmd/fencegate@latest
//
// The command is a module of its own (github.com/fencegate/fencegate/cmd/fencegate),
// so the MCP SDK it needs never enters the library module's go.mod. Inside
// the repository go.work joins it to the library; its go.mod has no replace
// directive, so that go install works from a release: each release tags the
// library (vX.Y.Z) and the command (cmd/fencegate/vX.Y.Z), the command's
// go.mod requiring the library's tag.
//
// Usage:
//
//	fencegate [--dsn DSN] COMMAND [flags] [args]
//
// fencegate --version (or fencegate version) prints the module version it
// was built from. Flags may come before or after a command's arguments; for run and gate,
// everything after "--" is the command or the SQL. Every command takes
// --help.
//
// # The database
//
// The database is --dsn (global, or a command's own), else $FENCEGATE_DSN,
// else the SQLite file .fencegate.db in the working directory. A DSN is a
// postgres:// or postgresql:// URL, a mysql://user:password@host:port/db URL
// (MySQL or MariaDB, mysql.Open), a SQLite file path, or a SQLite file:
// URI; SQLite is opened with WAL, synchronous=FULL, a busy timeout and
// immediate write transactions (sqlite.Open). A password in a DSN is
// never printed: help, errors and results show it as xxxxx.
//
// Every command that uses fencegate's tables first applies any pending
// migrations, on every database, so a new database needs no set-up.
// It is idempotent, and cheap once the database is up to date (goose looks
// for pending migrations without taking its lock). Processes that meet on a
// new database retry, and on Postgres may wait for goose's advisory lock,
// which it polls every 5s. Use "fencegate migrate" to set a database up
// ahead, inspect it, or drop fencegate's tables.
//
// "fencegate status" warns when Postgres runs with synchronous_commit off or
// its standbys replicate asynchronously, and when SQLite runs with
// synchronous=NORMAL; after promoting such a standby, run
// "fencegate fence advance --margin N" before letting clients in (see
// lease.Coordinator.AdvanceFences).
//
// # Telemetry
//
// The command's gate and coordinator report the library's OpenTelemetry
// metrics and spans (docs/OBSERVABILITY.md) when asked. The global
// --metrics-addr ADDR serves the metrics for Prometheus at
// http://ADDR/metrics while the command runs (the shape for "fencegate
// mcp" and "fencegate run"). With OTEL_EXPORTER_OTLP_ENDPOINT (or the
// _METRICS_ or _TRACES_ endpoint) set, metrics and spans go to that
// collector over OTLP/HTTP, flushed before the command exits (at most
// 5s); the exporters read the other standard OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, TLS), OTEL_SERVICE_NAME names the service
// (default fencegate), and OTEL_EXPORTER_OTLP_PROTOCOL, if set, must be
// http/protobuf. Asked for neither, the command exports nothing.
//
// # Exit status
//
//	0  success; check: the token is current
//	1  an error: the database, the SQL, a command that could not start
//	2  bad flags or arguments, with the command's usage on stderr
//	3  the lock is held by someone else, or the token is stale or was never issued
//
// claim and run exit 3 too when the lock is busy, in use by another
// transaction such as the previous holder's write: nothing was granted, and
// trying again later is the answer, as for a held lock. renew, release
// and check exit 1 when the coordinator is busy: for them 3 would say the
// token is stale, which it may not be.
//
// run exits with its command's status instead (128+N if signal N killed
// it), except 3 when it could not get the lock or lost it.
//
// Results go to stdout (a token, an expiry, a table), commentary and
// refusals to stderr, so that TOKEN=$(fencegate claim ...) works.
//
// # Holders and tokens
//
// The holder is --holder, else $FENCEGATE_HOLDER, else "host-pid". A token
// is the text form of fence.Token, fg1:<fence>:<lock>:<holder> with lock and
// holder query-escaped, for example "fg1:7:deploy-slot:build-7". A token is
// all renew, release, check and gate need: each invocation is a fresh
// process with no state, and the coordinator, in the database, is
// authoritative. Where a command takes TOKEN it defaults to
// $FENCEGATE_TOKEN, and --lock, if given, must name the token's lock.
//
// # Commands
//
// claim --lock NAME [--ttl 30s] [--holder ID] [--wait D] claims a lock and
// prints its token; --ttl is at least 100ms. claim --path FILE... [--root
// DIR] claims files instead, relative to --root (a trailing / for a
// directory and everything below it; repeated, all or none under one
// fence; each path given one identity first, see docs/PATHS.md). If someone else holds it, claim exits 3 and says who
// and when it is free at the latest; with --wait it waits its turn, in
// arrival order across processes (lease.Coordinator.AcquireWait).
//
// check [--lock NAME] TOKEN exits 0 if the token is current and 3 if it is
// stale or was never issued. Current means: the lock's lease row has exactly
// this holder and fence, is neither expired nor released in the database's
// clock, and the gate's floor is not above the fence. The answer is
// advisory, stale as soon as it is printed: never branch a write on it.
// The fenced write (gate) is what is safe. assert is another name for it,
// the MCP tool's.
//
// renew [--ttl 30s] [--lock NAME] TOKEN extends the lease to --ttl from now
// in the database's clock and prints the new expiry. The fence stays the
// same. A lease that expired, was released or was superseded is never
// renewed: exit 3, and claim again.
//
// release [--lock NAME] TOKEN frees the lock. A stale token changes nothing
// and exits 3: a late release never frees a successor's lease.
//
// run --lock NAME (or --path FILE... [--root DIR]) [--ttl 30s] [--holder ID]
// [--wait D] [--grace 5s] -- CMD [ARGS...] claims the lock, runs CMD while renewing the lease (lease.Hold),
// and releases it when CMD exits, with CMD's exit status. CMD's environment
// has FENCEGATE_TOKEN, FENCEGATE_LOCK, FENCEGATE_FENCE and FENCEGATE_DSN, so
// it can run "fencegate gate" itself. SIGINT, SIGTERM and SIGHUP are
// forwarded to CMD's process group (CMD runs in a group of its own, so it
// should not read from the terminal). If the lease is lost, CMD's group gets
// SIGTERM, then SIGKILL after --grace, and run exits 3. On Linux, CMD gets
// SIGTERM if run itself dies (even by SIGKILL); elsewhere it runs on as a
// stale holder, whose fenced writes the gate refuses once the lock has
// passed on. Outside Unix, signals cannot be forwarded: they kill CMD.
//
// gate [--lock NAME] [--arg VALUE]... [TOKEN] -- SQL [SQL...] makes a fenced
// write: the statements run in one transaction after gate.Commit (with
// VerifyIssued: the fence must have been issued by fencegate on this
// database), so they commit only if the token's fence is admitted, and not
// at all if it is refused: exit 3 with the rejection record on stderr.
// Each SQL argument is exactly one statement; "-" reads one from stdin.
// --arg values are bound to a single statement's parameters ($1 on
// Postgres, $1, ? or ?1 on SQLite), as many values as parameters, never
// formatted into the SQL. The SQL can never end, restart or nest the
// transaction (COMMIT, ROLLBACK, BEGIN, SAVEPOINT, PREPARE TRANSACTION, in
// any spelling, in a DO block or a string of several statements): such a
// statement fails and nothing commits. Exit 0 only when every statement
// committed under the fence; otherwise the message says whether nothing
// was committed or, when the connection broke during COMMIT, that the
// outcome is unknown.
//
// status [--json] [--lock NAME] [--refusals 10] lists every lock with its
// lease state (held, expired, released), holder, fence, expiry and the
// gate's floor, then the most recent refusals from the rejection log.
//
// migrate [up | down --yes | status] applies fencegate's migrations, drops
// its tables (which restarts fences at 1, so only for a database no holder
// uses), or lists them.
//
// mcp [--holder ID] [--root DIR] [--allow-sql] [--ttl 30s]
// [--max-file-bytes 1048576] serves the protocol to coding agents as a
// Model Context Protocol server on stdin and stdout (logs on stderr), with
// the tools claim, assert (also named check, as the command), renew,
// release, write and status. Each agent
// runs its own server; servers meet only in the database. The holder is
// --holder, else host-pid-random, so a restarted server is a new holder;
// the $FENCEGATE_HOLDER of the other commands is not read, since every
// agent's server would share it; renew, release and write take only the
// server's own tokens. claim's answer when the lock is held is a
// normal result saying who holds it; bad input, refusals and failures are
// tool errors (isError) saying what to do. claim takes paths under --root
// as well as a resource; a plain resource's token writes no files. write
// makes a file write under --root of a file its token's claim covers
// (refused before the disk is touched otherwise), confined to the root by
// os.Root (absolute paths, "..", a symlink leading out, special files,
// hard-linked files and the database's own files are refused; a symlink
// inside is its target), while the write's transaction holds the file's
// floor row after gate.Gate.CommitFile admitted the token: temp file, fsync, rename, fsync of the directory,
// then the transaction commits. Fencing orders the writes that go through
// the gate; it does not stop writers that bypass it. With --allow-sql,
// write also takes SQL statements with bound arguments, run as gate runs
// them: in one confined transaction behind gate.Commit that the SQL cannot
// end, restart or nest.
//
// demo plays the two-agent story in a temporary SQLite database that it
// deletes afterwards: A claims a lock, checks its lease, stalls past its
// ttl; B claims the lock and writes; A wakes up and writes. With a naive
// expiry check both writes land; through the gate, A's is refused.
package main
