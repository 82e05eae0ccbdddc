package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/confined"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// Exit statuses. run propagates its command's own status instead, except
// that it exits exitHeld when it could not get the lock or lost it.
const (
	exitOK    = 0 // success; check: the token is current
	exitError = 1 // something failed: the database, the SQL, the command could not start
	exitUsage = 2 // bad flags or arguments; nothing was done
	exitHeld  = 3 // the lock is held by someone else, or the token is stale or was never issued
)

// Environment variables the command reads, and sets for run's child.
const (
	envDSN    = "FENCEGATE_DSN"    // the database, when --dsn is not given
	envHolder = "FENCEGATE_HOLDER" // the holder name, when --holder is not given
	envToken  = "FENCEGATE_TOKEN"  // the token, when a command's TOKEN is omitted; set by run
	envLock   = "FENCEGATE_LOCK"   // set by run: the lock its child holds
	envFence  = "FENCEGATE_FENCE"  // set by run: the fence of the child's token
)

// defaultDB is the SQLite file used when neither --dsn nor FENCEGATE_DSN
// names a database, relative to the working directory.
const defaultDB = ".fencegate.db"

// openTimeout bounds connecting to the database and migrating it.
const openTimeout = 30 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // one line, for the command list
	usage    string // the usage line after "fencegate "
	help     string // what it does, shown by --help
	run      func(ctx context.Context, c *cli, cmd *command, args []string) int
}

// commands lists the subcommands in the order the usage shows them.
func commands() []*command {
	return []*command{
		claimCommand(), checkCommand(), renewCommand(), releaseCommand(),
		runCommand(), gateCommand(), statusCommand(), migrateCommand(), demoCommand(), versionCommand(),
		mcpCommand(),
	}
}

// cli is one invocation's streams, environment and global flags.
type cli struct {
	stdin  io.Reader
	stdout io.Writer // with passwords redacted, as stderr
	stderr io.Writer
	// childStdout and childStderr are the streams as given, for run's
	// child: a file stays a file it inherits.
	childStdout, childStderr io.Writer
	env                      func(string) string
	dsn                      string // --dsn, global or the subcommand's
}

// run is the whole command line, callable in-process by tests: it parses
// args (without the program name), runs the subcommand and returns the exit
// status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	// run's child writes to stdout and stderr from exec's copying
	// goroutines unless they are files; serialise those writes with ours.
	var mu sync.Mutex
	stdout, stderr = lockWriter(&mu, stdout), lockWriter(&mu, stderr)
	hide := secrets(args, env) // every password the command could print
	c := &cli{stdin: stdin, stdout: redacting(stdout, hide), stderr: redacting(stderr, hide),
		childStdout: stdout, childStderr: stderr, env: env}
	fs := flag.NewFlagSet("fencegate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(dsnValue{&c.dsn}, "dsn", dsnHelp)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.mainUsage(c.stdout, fs)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "fencegate: %v\n\n", err)
		c.mainUsage(c.stderr, fs)
		return exitUsage
	}
	args = fs.Args()
	if *showVersion {
		fmt.Fprintln(c.stdout, version())
		return exitOK
	}
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, "fencegate: missing command\n\n")
		c.mainUsage(c.stderr, fs)
		return exitUsage
	}
	name, args := args[0], args[1:]
	if name == "help" {
		if len(args) == 0 {
			c.mainUsage(c.stdout, fs)
			return exitOK
		}
		name, args = args[0], []string{"--help"}
	}
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd.run(ctx, c, cmd, args)
		}
	}
	fmt.Fprintf(c.stderr, "fencegate: unknown command %q\n\n", name)
	c.mainUsage(c.stderr, fs)
	return exitUsage
}

const dsnHelp = "the database, a `DSN`: a postgres:// or mysql:// URL, a SQLite file path or file: URI (default $" + envDSN + ", else " + defaultDB + ")"

func (c *cli) mainUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `fencegate: leases whose fences the database itself checks, so a holder that
lost its lock without knowing it cannot write.

usage: fencegate [--dsn DSN] COMMAND [flags] [args]

commands:
`)
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-8s  %s\n", cmd.name, cmd.synopsis)
	}
	fmt.Fprintf(w, `
The database is --dsn, else $%s, else the SQLite file %s
in the working directory. fencegate creates its tables (prefixed
fencegate_) on first use.

Exit status: 0 success, 1 error, 2 usage, 3 held or stale.
Run 'fencegate COMMAND --help' for a command's flags; start with 'fencegate demo'.

flags:
`, envDSN, defaultDB)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// flags returns an empty flag set for cmd. Parse it with parse.
func (c *cli) flags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("fencegate "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// dsnFlag adds --dsn to fs; it overrides the global --dsn.
func (c *cli) dsnFlag(fs *flag.FlagSet) {
	fs.Var(dsnValue{&c.dsn}, "dsn", dsnHelp)
}

// parse parses args into fs and returns the positional arguments. Flags
// may come before, between and after them; everything after a "--" is
// positional. When ok is false the caller returns code: exitOK after --help
// (usage on stdout), exitUsage after a bad flag (the error and the usage on
// stderr).
func (c *cli) parse(cmd *command, fs *flag.FlagSet, args []string) (positional []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.usage(c.stdout, cmd, fs)
				return nil, exitOK, false
			}
			return nil, c.usageError(cmd, fs, "%v", err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, exitOK, true
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), exitOK, true
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// usageError reports a usage error, with cmd's usage line and flags, and
// returns exitUsage.
func (c *cli) usageError(cmd *command, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "fencegate %s: %s\n", cmd.name, message(fmt.Sprintf(format, args...)))
	fmt.Fprintf(c.stderr, "usage: fencegate %s\n", cmd.usage)
	c.printFlags(c.stderr, fs)
	fmt.Fprintf(c.stderr, "Run 'fencegate %s --help' for more.\n", cmd.name)
	return exitUsage
}

// usage prints cmd's full usage: the usage line, its help and its flags.
func (c *cli) usage(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: fencegate %s\n\n%s\n", cmd.usage, strings.TrimSpace(cmd.help))
	c.printFlags(w, fs)
}

func (c *cli) printFlags(w io.Writer, fs *flag.FlagSet) {
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// fail reports err for cmd and returns its exit status: exitUsage for input
// that fencegate refused before doing anything (a bad name, ttl, DSN or
// statement), exitError otherwise.
func (c *cli) fail(cmd *command, err error) int {
	fmt.Fprintf(c.stderr, "fencegate %s: %s\n", cmd.name, message(err.Error()))
	if errors.Is(err, gate.ErrInvalidInput) || errors.Is(err, sqlstore.ErrInvalidDSN) || errors.Is(err, confined.ErrInvalidStatement) {
		return exitUsage
	}
	return exitError
}

// logf writes a line of commentary to stderr; stdout carries only results.
func (c *cli) logf(cmd *command, format string, args ...any) {
	fmt.Fprintf(c.stderr, "fencegate %s: %s\n", cmd.name, message(fmt.Sprintf(format, args...)))
}

// packagePrefix matches the package prefixes that wrapped errors repeat
// ("fencegate: …: lease: …"), at the start, after a colon or a parenthesis.
var packagePrefix = regexp.MustCompile(`(^|: |\()(?:fencegate|lease): `)

// message is an error's text for a line that already says "fencegate CMD:",
// without the package prefixes inside it.
func message(s string) string { return packagePrefix.ReplaceAllString(s, "$1") }

// holder returns the holder name: flagValue, else $FENCEGATE_HOLDER, else
// "host-pid".
func (c *cli) holder(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if h := c.env(envHolder); h != "" {
		return h
	}
	return hostPID()
}

// hostPID names this process: "host-pid".
func hostPID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) // no colon: tokens would escape it
}

// backend is an open, migrated database with fencegate's coordinator and
// gate on it.
type backend struct {
	driver sqlopen.Driver
	dsn    string // the DSN, made absolute for SQLite, to hand to run's child
	coord  *lease.Coordinator
	gate   *gate.Gate[*sql.Tx]
}

func (b *backend) Close() error { return b.driver.Close() }

// resolveDSN returns the DSN to use: --dsn, else $FENCEGATE_DSN, else the
// default SQLite file. A SQLite path is made absolute, so that run's child
// finds the same file from any directory.
func (c *cli) resolveDSN() (string, error) {
	dsn := c.dsn
	if dsn == "" {
		dsn = c.env(envDSN)
	}
	if dsn == "" {
		dsn = defaultDB
	}
	return sqlopen.Resolve(dsn) // a SQLite path made absolute
}

// open connects to the database and, unless migrate is false, applies
// fencegate's migrations, which is idempotent: every command that uses the
// tables migrates first, so a new database needs no set-up.
func (c *cli) open(ctx context.Context, migrate bool) (*backend, error) {
	dsn, err := c.resolveDSN()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := d.Migrate(ctx); err != nil { // idempotent; retries a concurrent first migration
			d.Close()
			return nil, err
		}
	}
	return &backend{
		driver: d,
		dsn:    dsn,
		coord:  lease.NewCoordinator(d, nil),
		gate:   gate.New(d, &gate.Options{VerifyIssued: true}),
	}, nil
}

// tokenArg returns the token in args (at most one positional argument), or
// $FENCEGATE_TOKEN when there is none, checked against --lock when that was
// given. A problem is a usage error, already reported.
func (c *cli) tokenArg(cmd *command, fs *flag.FlagSet, args []string, lock string) (gate.Token, int, bool) {
	var text string
	switch len(args) {
	case 0:
		text = c.env(envToken)
		if text == "" {
			return gate.Token{}, c.usageError(cmd, fs, "missing TOKEN (and $%s is not set)", envToken), false
		}
	case 1:
		text = args[0]
	default:
		return gate.Token{}, c.usageError(cmd, fs, "want one TOKEN, got %d arguments: %q", len(args), args), false
	}
	token, err := gate.Parse(strings.TrimSpace(text))
	if err != nil {
		return gate.Token{}, c.usageError(cmd, fs, "%s", err), false
	}
	if lock != "" && lock != token.Resource {
		return gate.Token{}, c.usageError(cmd, fs, "the token is for lock %q, not %q", token.Resource, lock), false
	}
	return token, exitOK, true
}

// openForToken parses a token command's flags and its TOKEN, and opens the
// database. When ok is false, code is the exit status to return.
func (c *cli) openForToken(ctx context.Context, cmd *command, fs *flag.FlagSet, args []string, lock *string) (token gate.Token, b *backend, code int, ok bool) {
	if args, code, ok = c.parse(cmd, fs, args); !ok {
		return gate.Token{}, nil, code, false
	}
	if token, code, ok = c.tokenArg(cmd, fs, args, *lock); !ok {
		return gate.Token{}, nil, code, false
	}
	b, err := c.open(ctx, true)
	if err != nil {
		return gate.Token{}, nil, c.fail(cmd, err), false
	}
	return token, b, exitOK, true
}

// lockFlag checks the value of a required --lock.
func (c *cli) lockFlag(cmd *command, fs *flag.FlagSet, lock string) (int, bool) {
	if lock == "" {
		return c.usageError(cmd, fs, "missing --lock NAME"), false
	}
	if err := gate.ValidateResource(lock); err != nil {
		return c.usageError(cmd, fs, "--lock: %s", err), false
	}
	return exitOK, true
}

// durationValue is a flag.Value for a duration with a clearer error than
// flag.Duration's "parse error".
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 30s, 1m30s or 500ms")
	}
	*d = durationValue(v)
	return nil
}

// durationFlag defines a duration flag on fs.
func durationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = value
	fs.Var((*durationValue)(p), name, usage)
	return p
}

// splitDashes splits args at the first "--": flags and positional arguments
// before it, a command or SQL after it. found reports whether there was one.
func splitDashes(args []string) (before, after []string, found bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// lockedWriter serialises writes to w with a mutex.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lockWriter returns w itself if it is a file (writes to a file descriptor
// need no lock, and run's child then inherits it), else w behind mu.
func lockWriter(mu *sync.Mutex, w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{mu: mu, w: w}
}

// dur formats a duration for people: to the millisecond below a minute, to
// the second above.
func dur(d time.Duration) string {
	if d >= time.Minute || d <= -time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// stamp formats a database timestamp.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
