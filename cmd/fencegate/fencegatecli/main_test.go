package fencegatecli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// The test binary doubles as the command that `fencegate run` starts: with
// FGTEST_HELPER set, TestMain runs a helper (helper_test.go) instead of the
// tests.
const (
	envHelper = "FGTEST_HELPER" // the helper to run
	envFile   = "FGTEST_FILE"   // a file the helper writes
	envBin    = "FGTEST_BIN"    // the fencegate binary, for helpers that call it
	envSQL    = "FGTEST_SQL"    // SQL for the helper's fenced write
	envCode   = "FGTEST_CODE"   // the exit status the helper returns
	envSleep  = "FGTEST_SLEEP"  // how long the helper works
)

var (
	binDir  string // holds the fencegate binary; removed by TestMain
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	if h := os.Getenv(envHelper); h != "" {
		os.Exit(helper(h))
	}
	// The helpers are this binary: under -race, each would otherwise sleep
	// a second before exiting (the race runtime's atexit_sleep_ms).
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	dir, err := os.MkdirTemp("", "fencegate-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary builds the fencegate command once per test run and returns its
// path, for tests that need real processes: run, signals, kill -9.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "fencegate")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// testExe is the test binary, to run as a helper.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// result is what one invocation of the command did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// fg runs the command in-process with the environment env (nothing else of
// the test's environment is visible to it, though run's child inherits the
// process's).
func fg(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr, func(k string) string { return env[k] })
	return result{code, stdout.String(), stderr.String()}
}

// want fails t unless r exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
	return r
}

// contains fails t unless stream holds every one of subs.
func contains(t *testing.T, what, stream string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(stream, s) {
			t.Errorf("%s does not contain %q:\n%s", what, s, stream)
		}
	}
}

// sub runs the fencegate binary with args in a clean environment (none of
// the test's FENCEGATE_ variables) plus env, and waits for it.
func sub(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	cmd := subCmd(t, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("fencegate %q: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// subCmd prepares the fencegate binary with args, not started.
func subCmd(t *testing.T, env map[string]string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = cleanEnv(env)
	return cmd
}

// cleanEnv is the process's environment without FENCEGATE_ and FGTEST_
// variables, plus env.
func cleanEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCEGATE_") && !strings.HasPrefix(kv, "FGTEST_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// database is a fresh, unmigrated database for one test.
type database struct {
	dsn string
	// insert is an INSERT of (fence, holder) into the log table.
	insert string
	// q rewrites SQL written with $1 placeholders for the database.
	q func(string) string
}

// databases runs fn on a fresh database of every driver of the one list
// (internal/dbtest.Drivers) that the command opens from a DSN.
func databases(t *testing.T, fn func(t *testing.T, db database)) {
	for _, d := range dbtest.Drivers() {
		if !d.CLI {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			fn(t, database{dsn: d.DSN(t), insert: d.Query(`INSERT INTO log (fence, holder) VALUES ($1, $2)`), q: d.Query})
		})
	}
}

// isPostgres tells a Postgres DSN from a SQLite one.
func isPostgres(dsn string) bool { return strings.HasPrefix(dsn, "postgres") }

// exec runs SQL on db directly, outside fencegate.
func (db database) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	d, err := sqlopen.Open(t.Context(), db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.DB().ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// createLog creates the table the tests' fenced writes go to.
func (db database) createLog(t *testing.T) {
	t.Helper()
	db.exec(t, `CREATE TABLE log (fence BIGINT NOT NULL, holder TEXT NOT NULL)`)
}

// logRows reads the log table's fences in insertion order.
func (db database) logRows(t *testing.T) []int64 {
	t.Helper()
	d, err := sqlopen.Open(t.Context(), db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rows, err := d.DB().QueryContext(t.Context(), `SELECT fence FROM log ORDER BY fence`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseToken parses a token printed by claim.
func parseToken(t *testing.T, s string) fence.Token {
	t.Helper()
	tok, err := fence.Parse(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("claim printed %q: %v", s, err)
	}
	return tok
}

// waitForFile polls for path to exist with content, up to a deadline: for
// observing another process, which has no other way to tell us.
func waitForFile(t *testing.T, path string, done <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return string(b)
		}
		select {
		case <-done:
			t.Fatalf("the process exited before writing %s", path)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeFileAtomic writes data to path so that readers see all or nothing.
func writeFileAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dbtestSQLite is a fresh SQLite file for a test that needs one database.
func dbtestSQLite(t *testing.T) string { return filepath.Join(t.TempDir(), "fencegate.db") }
