package fencegatecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
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

// Run runs the fencegate command with args (the program's name left off),
// its input and output, and env to look variables up in (os.Getenv), and
// returns the exit status. cmd/fencegate's main is os.Exit(Run(…)).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	return run(ctx, args, stdin, stdout, stderr, env)
}

// command is one subcommand: its help, its flags, and exec, which does its
// work. execute is the prologue and epilogue every command shares.
type command struct {
	name     string
	aliases  []string // other names it answers to
	synopsis string   // one line, for the command list
	usage    string   // the usage line after "fencegate "
	help     string   // what it does, shown by --help
	db       bool     // it uses the database, and so takes --dsn
	args     bool     // it takes positional arguments; else any is a usage error
	// dashes: it takes "--" and a command or SQL after it. exec then gets
	// the positional arguments before "--", then "--" and all that follows
	// it verbatim, for splitDashes.
	dashes bool
	flags  *flag.FlagSet // declared by the command's constructor: see flagSet
	// exec does the work once the flags are parsed. The error it returns
	// decides the exit status (exitCode) and is reported (report).
	exec func(ctx context.Context, c *cli, args []string) error
}

// flagSet returns cmd's flag set, made on first use.
func (cmd *command) flagSet() *flag.FlagSet {
	if cmd.flags == nil {
		cmd.flags = flag.NewFlagSet("fencegate "+cmd.name, flag.ContinueOnError)
		cmd.flags.SetOutput(io.Discard)
		cmd.flags.Usage = func() {}
	}
	return cmd.flags
}

// commands lists the subcommands in the order the usage shows them.
func commands() []*command {
	return []*command{
		claimCommand(), checkCommand(), renewCommand(), releaseCommand(),
		runCommand(), gateCommand(), statusCommand(), guardCommand(), fenceCommand(), migrateCommand(), pruneCommand(), demoCommand(), versionCommand(),
		mcpCommand(),
		electCommand(), leaderCommand(),
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
	dsn                      string       // --dsn, global or the subcommand's
	db                       *ops.Backend // the command's database, once opened: see database
	tel                      *telemetry
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
	metricsAddr := fs.String("metrics-addr", "", metricsAddrHelp)
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
		fmt.Fprintln(c.stdout, ops.Version())
		return exitOK
	}
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, "fencegate: missing command\n\n")
		c.mainUsage(c.stderr, fs)
		return exitUsage
	}
	tel, err := c.startTelemetry(ctx, *metricsAddr)
	if err != nil {
		fmt.Fprintf(c.stderr, "fencegate: %v\n", err)
		return exitCode(err)
	}
	c.tel = tel
	defer func() {
		if err := tel.stop(ctx); err != nil {
			fmt.Fprintf(c.stderr, "fencegate: %v\n", err)
		}
	}()
	name, args := args[0], args[1:]
	if name == "help" {
		if len(args) == 0 {
			c.mainUsage(c.stdout, fs)
			return exitOK
		}
		name, args = args[0], []string{"--help"}
	}
	for _, cmd := range commands() {
		if cmd.name == name || slices.Contains(cmd.aliases, name) {
			return c.execute(ctx, cmd, args)
		}
	}
	fmt.Fprintf(c.stderr, "fencegate: unknown command %q", name)
	if guess := suggest(name); guess != "" {
		fmt.Fprintf(c.stderr, "; did you mean %q?", guess)
	}
	fmt.Fprint(c.stderr, "\n\n")
	c.mainUsage(c.stderr, fs)
	return exitUsage
}

// suggest returns the command name or alias nearest to name, when it is
// near enough to be a typo of it (a third of its letters, one at least),
// and "" otherwise.
func suggest(name string) string {
	best, bestDist := "", 0
	for _, cmd := range commands() {
		for _, n := range append([]string{cmd.name}, cmd.aliases...) {
			d := editDistance(name, n)
			if d <= max(1, len(n)/3) && (best == "" || d < bestDist) {
				best, bestDist = n, d
			}
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// the insertions, deletions, substitutions and swaps of adjacent bytes that
// turn one into the other.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

const dsnHelp = "the database, a `DSN`: a postgres:// or mysql:// URL, Postgres key=value settings, a SQLite file path or file: URI (default $" + envDSN + ", else " + defaultDB + ")"

func (c *cli) mainUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `fencegate: leases whose fences the database itself checks, so a holder that
lost its lock without knowing it cannot write.

usage: fencegate [--dsn DSN] COMMAND [flags] [args]

commands:
`)
	for _, cmd := range commands() {
		synopsis := cmd.synopsis
		if len(cmd.aliases) > 0 {
			synopsis += " (also: " + strings.Join(cmd.aliases, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-8s  %s\n", cmd.name, synopsis)
	}
	fmt.Fprintf(w, `
The database is --dsn, else $%s, else the SQLite file %s
in the working directory. fencegate creates its tables (prefixed
fencegate_) on first use.

--metrics-addr serves the metrics of the gate and the leases for
Prometheus while the command runs; with $OTEL_EXPORTER_OTLP_ENDPOINT set,
metrics and spans go to that collector over OTLP/HTTP.

Exit status: 0 success, 1 error, 2 usage, 3 held or stale.
Run 'fencegate COMMAND --help' for a command's flags; start with 'fencegate demo'.

flags:
`, envDSN, defaultDB)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// execute runs cmd with args, reports how it ended and returns its exit
// status.
func (c *cli) execute(ctx context.Context, cmd *command, args []string) int {
	err := c.exec(ctx, cmd, args)
	c.report(cmd, err)
	return exitCode(err)
}

// exec parses cmd's flags, checks that it got only the arguments it takes,
// runs it and closes the database it opened.
func (c *cli) exec(ctx context.Context, cmd *command, args []string) error {
	fs := cmd.flagSet()
	if cmd.db {
		fs.Var(dsnValue{&c.dsn}, "dsn", dsnHelp) // overrides the global --dsn
	}
	var after []string
	found := false
	if cmd.dashes {
		args, after, found = splitDashes(args)
	}
	args, err := parse(fs, args)
	if err != nil {
		return err
	}
	if !cmd.args && len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if found {
		args = append(append(args, "--"), after...)
	}
	defer func() {
		if c.db != nil {
			c.db.Close()
			c.db = nil
		}
	}()
	return cmd.exec(ctx, c, args)
}

// parse parses args into fs and returns the positional arguments. Flags
// may come before, between and after them; everything after a "--" is
// positional. The error is flag.ErrHelp after --help, else a *usageError.
func parse(fs *flag.FlagSet, args []string) (positional []string, _ error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// usageError is bad flags or arguments, found before anything was done. It
// exits exitUsage, reported with the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a *usageError.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// heldError says that the lock is held by someone else, or that the token
// is stale or was never issued. It exits exitHeld.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }

// heldf returns a *heldError.
func heldf(format string, args ...any) error {
	return &heldError{msg: fmt.Sprintf(format, args...)}
}

// statusError ends a command with its own exit status, and says nothing:
// run's, when it is its child's.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitWith returns the error that ends a command with status code: nil for
// exitOK.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return &statusError{code: code}
}

// exitCode maps how a command ended to its exit status: exitOK for nil and
// after --help; a *statusError's own; exitUsage for a *usageError and for
// input that fencegate refused before doing anything (a bad name, ttl, DSN
// or statement); exitHeld for a *heldError; exitError otherwise.
func exitCode(err error) int {
	if status, ok := errors.AsType[*statusError](err); ok {
		return status.code
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case isType[*usageError](err), errors.Is(err, fence.ErrInvalidInput),
		errors.Is(err, sqlstore.ErrInvalidDSN), errors.Is(err, confined.ErrInvalidStatement):
		return exitUsage
	case isType[*heldError](err):
		return exitHeld
	}
	return exitError
}

// isType reports whether err's chain has an error of type E.
func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// report tells how cmd ended: its usage on stdout after --help; a usage
// error with cmd's usage line and flags on stderr; any other error as a
// line on stderr, but for a *statusError, which says nothing.
func (c *cli) report(cmd *command, err error) {
	switch {
	case err == nil, isType[*statusError](err):
	case errors.Is(err, flag.ErrHelp):
		c.usage(c.stdout, cmd)
	case isType[*usageError](err):
		c.logf(cmd, "%s", err)
		fmt.Fprintf(c.stderr, "usage: fencegate %s\n", cmd.usage)
		c.printFlags(c.stderr, cmd.flagSet())
		fmt.Fprintf(c.stderr, "Run 'fencegate %s --help' for more.\n", cmd.name)
	default:
		c.logf(cmd, "%s", err)
	}
}

// usage prints cmd's full usage: the usage line, its help and its flags.
func (c *cli) usage(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "usage: fencegate %s\n\n%s\n", cmd.usage, strings.TrimSpace(cmd.help))
	c.printFlags(w, cmd.flagSet())
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

// logf writes a line of commentary to stderr; stdout carries only results.
func (c *cli) logf(cmd *command, format string, args ...any) {
	fmt.Fprintf(c.stderr, "fencegate %s: %s\n", cmd.name, message(fmt.Sprintf(format, args...)))
}

// packagePrefix matches the package prefixes that wrapped errors repeat
// ("fencegate: …: lease: …", the guard package's "fencegate guard: …"), at
// the start, after a colon or a parenthesis.
var packagePrefix = regexp.MustCompile(`(^|: |\()(?:fencegate(?: guard)?|lease): `)

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
	return ops.HostPID()
}

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
func (c *cli) open(ctx context.Context, migrate bool) (*ops.Backend, error) {
	dsn, err := c.resolveDSN()
	if err != nil {
		return nil, err
	}
	mp, tp := c.tel.providers()
	return ops.Open(ctx, dsn, migrate, mp, tp)
}

// database opens the database for the command being executed, which
// closes it when the command returns. A command calls it once, after
// checking its arguments, so that a usage error touches no database.
func (c *cli) database(ctx context.Context, migrate bool) (*ops.Backend, error) {
	b, err := c.open(ctx, migrate)
	if err != nil {
		return nil, err
	}
	c.db = b
	return b, nil
}

// readDatabase opens the database for a command that only reads, as
// database does, but for a SQLite file that cannot be written
// (sqlite.ErrReadOnly): that one it opens read-only, and says so.
func (c *cli) readDatabase(ctx context.Context, cmd *command) (*ops.Backend, error) {
	b, err := c.database(ctx, true)
	if !errors.Is(err, sqlite.ErrReadOnly) {
		return b, err
	}
	dsn, _ := c.resolveDSN() // database resolved it
	mp, tp := c.tel.providers()
	b, roErr := ops.OpenReadOnly(ctx, dsn, mp, tp)
	if roErr != nil {
		return nil, errors.Join(err, roErr)
	}
	c.logf(cmd, "%s; opened it read-only", err)
	c.db = b
	return b, nil
}

// tokenArg returns the token in args (at most one positional argument), or
// $FENCEGATE_TOKEN when there is none, checked against --lock when that was
// given. A problem is a *usageError.
func (c *cli) tokenArg(args []string, lock string) (fence.Token, error) {
	var text string
	switch len(args) {
	case 0:
		text = c.env(envToken)
		if text == "" {
			return fence.Token{}, usagef("missing TOKEN (and $%s is not set)", envToken)
		}
	case 1:
		text = args[0]
	default:
		return fence.Token{}, usagef("want one TOKEN, got %d arguments: %q", len(args), args)
	}
	token, err := fence.Parse(strings.TrimSpace(text))
	if err != nil {
		return fence.Token{}, usagef("%s", err)
	}
	if lock != "" && !slices.Contains(token.Members(), lock) {
		return fence.Token{}, usagef("the token is for lock %q, not %q", token.Name(), lock)
	}
	return token, nil
}

// tokenCommand completes cmd, which acts on the lease its TOKEN names: it
// takes --lock, and its exec runs check (if not nil) on the other flags,
// reads TOKEN, opens the database and calls do.
func tokenCommand(cmd *command, check func() error, do func(ctx context.Context, c *cli, b *ops.Backend, token fence.Token) error) *command {
	cmd.db, cmd.args = true, true
	lock := cmd.flagSet().String("lock", "", "the lock the token must be for (default: the token's)")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		token, err := c.tokenArg(args, *lock)
		if err != nil {
			return err
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		return do(ctx, c, b, token)
	}
	return cmd
}

// checkLock checks the value of a required --lock.
func checkLock(lock string) error {
	if lock == "" {
		return usagef("missing --lock NAME")
	}
	if err := fence.ValidateResource(lock); err != nil {
		return usagef("--lock: %s", err)
	}
	return nil
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
