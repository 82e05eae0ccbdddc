package fencegatecli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	t.Run("help", func(t *testing.T) {
		for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
			r := fg(t, nil, args...).want(t, exitOK)
			contains(t, "stdout", r.stdout, "usage: fencegate [--dsn DSN] COMMAND", "claim", "demo", "Exit status", "(also: assert)")
		}
		for _, cmd := range commands() {
			for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
				r := fg(t, nil, args...).want(t, exitOK)
				contains(t, "stdout", r.stdout, "usage: fencegate "+cmd.usage)
				if r.stderr != "" {
					t.Errorf("%q wrote to stderr: %s", args, r.stderr)
				}
			}
		}
		// An alias shows its command's help; gate's names every dialect's
		// placeholders.
		contains(t, "assert --help", fg(t, nil, "assert", "--help").want(t, exitOK).stdout, "usage: fencegate check", "the MCP tool's name")
		contains(t, "gate --help", fg(t, nil, "gate", "--help").want(t, exitOK).stdout, "? on MySQL and MariaDB", "version = ? WHERE")
	})

	// Bad flags and arguments exit 2 with a clear message and the
	// command's usage on stderr, and touch no database.
	dsn := filepath.Join(t.TempDir(), "never.db")
	env := map[string]string{envDSN: dsn}
	token := "fg1:1:x:h"
	cases := []struct {
		args []string
		cmd  string // whose usage is shown; "" for the main usage
		msg  string
	}{
		{nil, "", "missing command"},
		{[]string{"bogus"}, "", `unknown command "bogus"` + "\n"}, // and no guess
		{[]string{"stauts"}, "", `unknown command "stauts"; did you mean "status"?`},
		{[]string{"clam", "--lock", "x"}, "", `unknown command "clam"; did you mean "claim"?`},
		{[]string{"asert"}, "", `unknown command "asert"; did you mean "assert"?`},
		{[]string{"--bogus"}, "", "flag provided but not defined: -bogus"},
		{[]string{"claim"}, "claim", "missing --lock NAME"},
		{[]string{"claim", "--lock", "x", "--ttl", "banana"}, "claim", `invalid value "banana" for flag -ttl: want a duration`},
		{[]string{"claim", "--lock", "x", "--ttl", "0s"}, "claim", "--ttl must be at least 100ms"},
		{[]string{"claim", "--lock", "x", "--ttl", "-5s"}, "claim", "--ttl must be at least 100ms"},
		{[]string{"claim", "--lock", "a\x01b"}, "claim", "control character"},
		{[]string{"claim", "--lock", strings.Repeat("x", 300)}, "claim", "longer than the limit"},
		{[]string{"claim", "--lock", "x", "--holder", "bad\nholder"}, "claim", "control character"},
		{[]string{"claim", "--lock", "x", "extra"}, "claim", `unexpected arguments ["extra"]`},
		{[]string{"claim", "--lock", "x", "--wait", "-1s"}, "claim", "--wait must not be negative"},
		{[]string{"claim", "--lock"}, "claim", "flag needs an argument: -lock"},
		{[]string{"check"}, "check", "missing TOKEN (and $FENCEGATE_TOKEN is not set)"},
		{[]string{"check", "not-a-token"}, "check", "want the form fg1:<fence>:<resource>:<holder>"},
		{[]string{"check", "fg1:0:x:h"}, "check", "fence: must be positive"},
		{[]string{"check", "--lock", "other", token}, "check", `the token is for lock "x", not "other"`},
		{[]string{"renew", token, token}, "renew", "want one TOKEN, got 2 arguments"},
		{[]string{"renew", "--ttl", "0s", token}, "renew", "--ttl must be at least 100ms"},
		{[]string{"release"}, "release", "missing TOKEN"},
		{[]string{"run", "--lock", "x"}, "run", "missing -- CMD [ARGS...]"},
		{[]string{"run", "--lock", "x", "--"}, "run", "missing -- CMD [ARGS...]"},
		{[]string{"run", "--lock", "x", "echo", "hi"}, "run", `unexpected ["echo" "hi"] before --`},
		{[]string{"run", "--", "echo"}, "run", "missing --lock NAME"},
		{[]string{"run", "--lock", "x", "--grace", "-1s", "--", "echo"}, "run", "must not be negative"},
		{[]string{"gate", token}, "gate", "missing -- SQL"},
		{[]string{"gate", "--", "SELECT 1"}, "gate", "missing TOKEN"},
		{[]string{"gate", "--arg", "1", token, "--", "SELECT 1", "SELECT 2"}, "gate", "--arg binds the parameters of a single statement"},
		{[]string{"gate", token, "--", "  "}, "gate", "statement 1 is empty"},
		{[]string{"gate", token, "--", "-", "-"}, "gate", `"-" (SQL from stdin) may appear once`},
		{[]string{"status", "--refusals", "-1"}, "status", "--refusals must not be negative"},
		{[]string{"status", "extra"}, "status", "unexpected arguments"},
		{[]string{"status", "--json=maybe"}, "status", `invalid boolean value "maybe" for -json`},
		{[]string{"migrate", "sideways"}, "migrate", `unknown action "sideways"`},
		{[]string{"migrate", "down"}, "migrate", "add --yes to confirm"},
		{[]string{"migrate", "up", "down"}, "migrate", "want one of up, down, status"},
		{[]string{"demo", "now"}, "demo", "unexpected arguments"},
	}
	for _, tc := range cases {
		r := fg(t, env, tc.args...)
		if r.code != exitUsage {
			t.Errorf("%q: want exit %d, got %v", tc.args, exitUsage, r)
			continue
		}
		contains(t, fmt.Sprintf("%q: stderr", tc.args), r.stderr, tc.msg)
		usage := "usage: fencegate [--dsn DSN] COMMAND"
		for _, cmd := range commands() {
			if cmd.name == tc.cmd {
				usage = "usage: fencegate " + cmd.usage + "\n"
			}
		}
		contains(t, fmt.Sprintf("%q: stderr", tc.args), r.stderr, usage)
		if r.stdout != "" {
			t.Errorf("%q: wrote to stdout: %s", tc.args, r.stdout)
		}
	}
	if _, err := os.Stat(dsn); !os.IsNotExist(err) {
		t.Errorf("a usage error created the database %s (%v)", dsn, err)
	}

	// A DSN that cannot work is a usage error too.
	for _, dsn := range []string{"redis://localhost/x", "mysql://localhost", ":memory:", "postgres://localhost:99999/x"} {
		r := fg(t, nil, "--dsn", dsn, "status")
		if r.code != exitUsage {
			t.Errorf("--dsn %s: want exit %d, got %v", dsn, exitUsage, r)
		}
		contains(t, "stderr", r.stderr, "invalid DSN")
	}
	// go-sql-driver/mysql's DSN form is not taken for a SQLite path.
	r := fg(t, nil, "--dsn", "root:hunter2@tcp(127.0.0.1:3306)/db", "status")
	if r.code != exitUsage {
		t.Errorf("--dsn root:…@tcp(127.0.0.1:3306)/db: want exit %d, got %v", exitUsage, r)
	}
	contains(t, "stderr", r.stderr, "did you mean mysql://root:xxxxx@127.0.0.1:3306/db?")
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("the password is in stderr: %s", r.stderr)
	}
}

// The built binary reports bad flags the same way.
func TestBadFlagsBinary(t *testing.T) {
	t.Parallel()
	r := sub(t, nil, "claim", "--lock", "x", "--ttl", "banana").want(t, exitUsage)
	contains(t, "stderr", r.stderr, `fencegate claim: invalid value "banana" for flag -ttl`, "usage: fencegate claim (--lock NAME | --path FILE... [--root DIR])")
	r = sub(t, nil).want(t, exitUsage)
	contains(t, "stderr", r.stderr, "fencegate: missing command", "commands:")
}

func TestLeaseCommands(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		env := map[string]string{envDSN: db.dsn}
		const lock = "deploy/slot 1" // escaped in the token

		// A claims; B and A again are refused while A holds it.
		r := fg(t, env, "claim", "--lock", lock, "--holder", "agent-a").want(t, exitOK)
		a := parseToken(t, r.stdout)
		if a.Resource != lock || a.Holder != "agent-a" || a.Fence < 1 {
			t.Fatalf("claim printed %v", a)
		}
		contains(t, "claim's stderr", r.stderr, fmt.Sprintf("fence %d for agent-a, expires in", a.Fence))
		r = fg(t, env, "claim", "--lock", lock, "--holder", "agent-b").want(t, exitHeld)
		contains(t, "stderr", r.stderr, fmt.Sprintf(`%s is held by "agent-a" (fence %d); retry after`, lock, a.Fence))
		r = fg(t, env, "claim", "--lock", lock, "--holder", "agent-a").want(t, exitHeld)
		contains(t, "stderr", r.stderr, `this holder, "agent-a"`)
		fg(t, map[string]string{envDSN: db.dsn, envHolder: "agent-a"}, "claim", "--lock", lock).want(t, exitHeld)

		// The token is current, by argument or from the environment.
		r = fg(t, env, "check", a.String()).want(t, exitOK)
		contains(t, "stdout", r.stdout, fmt.Sprintf("current: %s fence %d held by agent-a", lock, a.Fence))
		fg(t, map[string]string{envDSN: db.dsn, envToken: a.String()}, "check").want(t, exitOK)
		fg(t, env, "check", a.String(), "--lock", lock).want(t, exitOK) // flags after the token
		// assert, the MCP tool's name, is the same command.
		r = fg(t, env, "assert", a.String()).want(t, exitOK)
		contains(t, "assert's stdout", r.stdout, fmt.Sprintf("current: %s fence %d held by agent-a", lock, a.Fence))

		// Renewal prints the new expiry, in the database's clock.
		r = fg(t, env, "renew", "--ttl", "1h", a.String()).want(t, exitOK)
		expiry, err := time.Parse(time.RFC3339, strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatalf("renew printed %q: %v", r.stdout, err)
		}
		if d := time.Until(expiry); d < 50*time.Minute || d > 70*time.Minute {
			t.Errorf("renewed for 1h, but it expires in %v", d)
		}

		// Fenced writes.
		db.createLog(t)
		insert := func(tok string, fence int64, holder string) result {
			return fg(t, env, "gate", "--arg", strconv.FormatInt(fence, 10), "--arg", holder, tok, "--", db.insert)
		}
		r = insert(a.String(), a.Fence, "agent-a").want(t, exitOK)
		contains(t, "stdout", r.stdout, fmt.Sprintf("committed under %s fence %d: 1 statement, 1 row affected", lock, a.Fence))

		// Release frees the lock once; the token is then stale.
		r = fg(t, env, "release", a.String()).want(t, exitOK)
		contains(t, "stderr", r.stderr, "released "+lock)
		r = fg(t, env, "release", a.String()).want(t, exitHeld)
		contains(t, "stderr", r.stderr, "stale:", "nothing changed")
		r = fg(t, env, "check", a.String()).want(t, exitHeld)
		contains(t, "stderr", r.stderr, "was released")
		r = fg(t, env, "assert", a.String()).want(t, exitHeld)
		contains(t, "assert's stderr", r.stderr, "was released")
		r = fg(t, env, "renew", a.String()).want(t, exitHeld)
		contains(t, "stderr", r.stderr, "stale:", "claim it again")

		// B claims with a higher fence; A's token is now refused at the gate.
		r = fg(t, env, "claim", "--lock", lock, "--holder", "agent-b").want(t, exitOK)
		b := parseToken(t, r.stdout)
		if b.Fence <= a.Fence {
			t.Fatalf("B's fence %d is not above A's %d", b.Fence, a.Fence)
		}
		r = fg(t, env, "check", a.String()).want(t, exitHeld)
		contains(t, "stderr", r.stderr, fmt.Sprintf("stale: %s has moved on to fence %d", lock, b.Fence))
		r = insert(a.String(), a.Fence, "agent-a").want(t, exitHeld)
		contains(t, "stderr", r.stderr,
			fmt.Sprintf(`refused: %s fence %d from "agent-a" is below the floor %d from "agent-b" (rejection #1 at `, lock, a.Fence, b.Fence),
			"nothing was committed")
		// A forged fence is never issued, above the floor or not.
		forged := fence.Token{Resource: lock, Holder: "mallory", Fence: b.Fence + 100}.String()
		r = insert(forged, b.Fence+100, "mallory").want(t, exitHeld)
		contains(t, "stderr", r.stderr, fmt.Sprintf(`refused: %s fence %d was never issued to "mallory" (rejection #2`, lock, b.Fence+100))
		r = fg(t, env, "check", forged).want(t, exitHeld)
		contains(t, "stderr", r.stderr, "never issued: no lease on")
		r = fg(t, env, "check", "fg1:1:elsewhere:x").want(t, exitHeld)
		contains(t, "stderr", r.stderr, "never issued: elsewhere was never leased")
		r = fg(t, env, "renew", "fg1:1:elsewhere:x").want(t, exitHeld)
		contains(t, "stderr", r.stderr, "never issued: elsewhere was never leased")
		fg(t, env, "release", "fg1:1:elsewhere:x").want(t, exitHeld)

		// B writes; a failing statement commits nothing; SQL from stdin.
		insert(b.String(), b.Fence, "agent-b").want(t, exitOK)
		r = fg(t, env, "gate", b.String(), "--", "DELETE FROM log", "INSERT INTO no_such_table VALUES (1)")
		r.want(t, exitError)
		contains(t, "stderr", r.stderr, "statement 2:", "nothing was committed")
		if got := db.logRows(t); fmt.Sprint(got) != fmt.Sprint([]int64{a.Fence, b.Fence}) {
			t.Errorf("log has fences %v, want [%d %d]", got, a.Fence, b.Fence)
		}
		var stdout, stderr strings.Builder
		code := run(t.Context(), []string{"gate", b.String(), "--", "-"},
			strings.NewReader("DELETE FROM log WHERE holder = 'agent-a'"), &stdout, &stderr, func(k string) string { return env[k] })
		if code != exitOK {
			t.Fatalf("gate with SQL from stdin: exit %d: %s", code, stderr.String())
		}
		if got := db.logRows(t); fmt.Sprint(got) != fmt.Sprint([]int64{b.Fence}) {
			t.Errorf("log has fences %v after the delete, want [%d]", got, b.Fence)
		}

		// Status shows the lock and the refusals.
		r = fg(t, env, "status").want(t, exitOK)
		contains(t, "status", r.stdout, "LOCK", lock, "held", "agent-b", strconv.FormatInt(b.Fence, 10),
			"Recent refusals, newest first:", "rejection #1", "rejection #2", "was never issued")
		if strings.Index(r.stdout, "rejection #2") > strings.Index(r.stdout, "rejection #1") {
			t.Errorf("refusals are not newest first:\n%s", r.stdout)
		}
		r = fg(t, env, "status", "--json").want(t, exitOK)
		var rep ops.StatusReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r.stdout)
		}
		if len(rep.Locks) != 1 || len(rep.Refusals) != 2 {
			t.Fatalf("status --json: %+v", rep)
		}
		l := rep.Locks[0]
		if l.Lock != lock || l.State != "held" || l.Holder != "agent-b" || l.Fence != b.Fence ||
			l.Floor != b.Fence || l.FloorHolder != "agent-b" || l.RemainingMS <= 0 || l.ExpiresAt == "" {
			t.Errorf("status --json lock: %+v", l)
		}
		if f := rep.Refusals[0]; f.Seq != 2 || !f.NotIssued || f.Holder != "mallory" {
			t.Errorf("newest refusal: %+v", f)
		}
		if f := rep.Refusals[1]; f.Seq != 1 || f.NotIssued || f.Fence != a.Fence || f.Floor != b.Fence || f.FloorHolder != "agent-b" {
			t.Errorf("oldest refusal: %+v", f)
		}
		if strings.Contains(r.stdout, `"path"`) {
			t.Errorf("status --json shows a path for the plain lock %s:\n%s", lock, r.stdout)
		}
		r = fg(t, env, "status", "--lock", "elsewhere").want(t, exitOK)
		contains(t, "status --lock", r.stdout, "Lock elsewhere has no lease and no floor", "No refusals.")
		if strings.Contains(r.stdout, "No locks yet.") || strings.Contains(r.stdout, lock) {
			t.Errorf("status --lock elsewhere, beside lock %s:\n%s", lock, r.stdout)
		}

		// Every time is printed one way (the database's microseconds too).
		for _, args := range [][]string{{"status"}, {"status", "--json"}, {"leader", lock}, {"leader", "--json", lock}} {
			oneTimeLayout(t, fg(t, env, args...).want(t, exitOK).stdout, args)
		}
		r = fg(t, env, "status", "--json", "--refusals", "0").want(t, exitOK)
		contains(t, "status --refusals 0", r.stdout, `"refusals": []`)
	})
}

// anyTime matches a time in any RFC 3339 layout.
var anyTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// oneTimeLayout fails unless out has a time and every time in it is in
// ops.StampLayout.
func oneTimeLayout(t *testing.T, out string, what any) {
	t.Helper()
	times := anyTime.FindAllString(out, -1)
	if len(times) == 0 {
		t.Errorf("%v: no time in %q", what, out)
	}
	for _, s := range times {
		if p, err := time.Parse(ops.StampLayout, s); err != nil || p.Format(ops.StampLayout) != s {
			t.Errorf("%v: time %s is not in the layout %s", what, s, ops.StampLayout)
		}
	}
}

func TestClaimWait(t *testing.T) {
	t.Parallel()
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
	// A ttl long enough that the next claim surely comes before it ends,
	// on a loaded machine too; the wait past it below is as long.
	a := parseToken(t, fg(t, env, "claim", "--lock", "l", "--holder", "a", "--ttl", "3s").want(t, exitOK).stdout)

	// Waiting less than the lease has left: still held.
	r := fg(t, env, "claim", "--lock", "l", "--holder", "b", "--wait", "20ms").want(t, exitHeld)
	contains(t, "stderr", r.stderr, `held by "a"`)

	// Waiting past its expiry: granted, with a higher fence.
	b := parseToken(t, fg(t, env, "claim", "--lock", "l", "--holder", "b", "--wait", "10s").want(t, exitOK).stdout)
	if b.Fence <= a.Fence {
		t.Errorf("fence %d after %d", b.Fence, a.Fence)
	}
	r = fg(t, env, "check", a.String()).want(t, exitHeld)
	contains(t, "stderr", r.stderr, "stale:")

	// An expired lease: check says so. (Polled: the lease expires in the
	// database's clock.)
	c := parseToken(t, fg(t, env, "claim", "--lock", "short", "--ttl", "100ms").want(t, exitOK).stdout)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = fg(t, env, "check", c.String())
		if r.code == exitHeld || time.Now().After(deadline) {
			break
		}
	}
	r.want(t, exitHeld)
	contains(t, "stderr", r.stderr, "stale: the lease on short with fence", "expired")
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		env := map[string]string{envDSN: db.dsn}
		r := fg(t, env, "migrate", "status").want(t, exitOK)
		contains(t, "migrate status", r.stdout, "VERSION", "pending", "00001_fencegate_")
		if strings.Contains(r.stdout, "applied") {
			t.Errorf("a new database has applied migrations:\n%s", r.stdout)
		}
		r = fg(t, env, "migrate").want(t, exitOK)
		contains(t, "migrate", r.stderr, "up: ", "migrations applied (schema version ")
		r = fg(t, env, "migrate", "status").want(t, exitOK)
		if strings.Contains(r.stdout, "pending") {
			t.Errorf("pending migrations after migrate up:\n%s", r.stdout)
		}
		fg(t, env, "migrate", "up").want(t, exitOK) // idempotent
		fg(t, env, "claim", "--lock", "l", "--holder", "a").want(t, exitOK)

		fg(t, env, "migrate", "down", "--yes").want(t, exitOK)
		r = fg(t, env, "migrate", "status").want(t, exitOK)
		if strings.Contains(r.stdout, "applied") {
			t.Errorf("applied migrations after migrate down:\n%s", r.stdout)
		}
		// Every other command migrates by itself.
		r = fg(t, env, "status").want(t, exitOK)
		contains(t, "status", r.stdout, "No locks yet.")
	})
}

// Without --dsn or FENCEGATE_DSN the database is .fencegate.db in the
// working directory, created and migrated on first use.
func TestDefaultDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := subCmd(t, nil, "claim", "--lock", "l", "--holder", "a")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	parseToken(t, string(out))
	if _, err := os.Stat(filepath.Join(dir, defaultDB)); err != nil {
		t.Fatalf("no %s in the working directory: %v", defaultDB, err)
	}
	cmd = subCmd(t, nil, "status")
	cmd.Dir = dir
	if out, err = cmd.Output(); err != nil || !strings.Contains(string(out), "held") {
		t.Errorf("status in the same directory: %v\n%s", err, out)
	}

	// FENCEGATE_DSN, then --dsn, take precedence.
	other := filepath.Join(t.TempDir(), "other.db")
	cmd = subCmd(t, map[string]string{envDSN: other}, "claim", "--lock", "l", "--holder", "b")
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		t.Errorf("claim with %s: %v", envDSN, err)
	}
	third := filepath.Join(t.TempDir(), "third.db")
	r := fg(t, map[string]string{envDSN: other}, "--dsn", third, "claim", "--lock", "l", "--holder", "c").want(t, exitOK)
	if tok := parseToken(t, r.stdout); tok.Fence != 1 {
		t.Errorf("--dsn did not win over %s: fence %d", envDSN, tok.Fence)
	}
	fg(t, map[string]string{envDSN: other}, "claim", "--dsn", third, "--lock", "m", "--holder", "c").want(t, exitOK)
}

func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the demo's database goes here, and must be gone after
	start := time.Now()
	r := fg(t, nil, "demo").want(t, exitOK)
	elapsed := time.Since(start)
	contains(t, "demo", r.stdout,
		"1. A naive expiry check",
		"A  checks its lease               valid, 5ms left",
		"B  claims deploy-slot             fence 2 (A's lease has expired)",
		"A  wakes up, writes v1            committed",
		"=> deploy-slot runs v1 from agent-a: B's deploy was silently overwritten.",
		"2. Through the gate",
		"B  claims deploy-slot             fence 2; the gate's floor is now 2",
		"B  writes v2 through the gate     committed",
		"A  wakes up, writes v1            REFUSED, rolled back",
		"the rejection log says         #1: fence 1 from agent-a < floor 2 from agent-b",
		"=> deploy-slot runs v2 from agent-b; A's late write never committed.",
		"fencegate claim --lock deploy-slot",
		// fencegate is not on PATH after "go run": the hint says how to get it.
		"./cmd/fencegate\" puts fencegate in", `"go run ./cmd/fencegate"`,
	)
	if n := strings.Count(r.stdout, "\n"); n > 28 {
		t.Errorf("the demo is %d lines long:\n%s", n, r.stdout)
	}
	if elapsed > 5*time.Second {
		t.Errorf("the demo took %v", elapsed)
	}
	t.Logf("demo took %v", elapsed)
	if os.TempDir() == tmp { // TMPDIR is honoured (Unix)
		if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
			t.Errorf("the demo left files behind: %v", entries)
		}
	}
	// Deterministic: the same story every time.
	if again := fg(t, nil, "demo").want(t, exitOK); again.stdout != r.stdout {
		t.Errorf("the demo's output changed between runs:\n%s\n---\n%s", r.stdout, again.stdout)
	}
}

// Issue 36, item 2: a libpq keyword/value DSN became a SQLite file in the
// working directory, named after it, password and all, and the claim on
// it exited 0. Now it reaches Postgres, or the command fails; either way no
// file, and no password in what it prints.
func TestKeywordValueDSN(t *testing.T) {
	u, err := url.Parse(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	const pw = "SeCrEt123"
	for _, tc := range []struct {
		dsn  string
		code int
	}{
		{dbtest.KeywordValue(u), exitOK},                                             // host=127.0.0.1 port=5432 user=postgres dbname=test search_path=… sslmode=disable
		{"host=127.0.0.1 port=1 user=app password=" + pw + " dbname=app", exitError}, // nothing listens
		{"mode=rw cache=shared", exitUsage},
		{"app:" + pw + "@db.internal/app", exitUsage},
		{"sqlite:x.db", exitUsage},
	} {
		dir := t.TempDir()
		cmd := subCmd(t, map[string]string{envDSN: tc.dsn}, "claim", "--lock", "x", "--holder", "a")
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		r := result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
		if r.code != tc.code {
			t.Errorf("claim with %s=%q: want exit %d, got %v", envDSN, tc.dsn, tc.code, r)
		}
		if tc.code == exitOK {
			parseToken(t, r.stdout)
		}
		if strings.Contains(r.stdout+r.stderr, pw) {
			t.Errorf("claim with %q printed the password: %v", tc.dsn, r)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("claim with %q created %v in the working directory", tc.dsn, entries)
		}
	}
}

// TestSQLiteOpenErrors: a SQLite file the command cannot open gets an error
// that says why, exit 1; status reads a database in a directory nobody can
// write (a read-only mount, root included) read-only, and says so, where
// claim fails.
func TestSQLiteOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for path, says := range map[string]string{
		filepath.Join(dir, "nosuch", "fg.db"): "directory does not exist: " + filepath.Join(dir, "nosuch"),
		dir:                                   dir + " is a directory",
	} {
		r := fg(t, map[string]string{envDSN: path}, "status").want(t, exitError)
		contains(t, "status on "+path, r.stderr, says)
	}

	var env map[string]string
	ro := dbtest.ReadOnlyDir(t, func(dir string) {
		env = map[string]string{envDSN: filepath.Join(dir, "fg.db")}
		fg(t, env, "claim", "--lock", "l", "--holder", "a", "--ttl", "1h").want(t, exitOK)
	})
	r := fg(t, env, "status").want(t, exitOK)
	contains(t, "status in a read-only directory", r.stderr, "cannot be written", "opened it read-only")
	contains(t, "status in a read-only directory", r.stdout, "l ", "held", "a ")
	r = fg(t, env, "status", "--json").want(t, exitOK)
	contains(t, "status --json in a read-only directory", r.stdout, `"lock": "l"`)
	r = fg(t, env, "claim", "--lock", "m").want(t, exitError)
	contains(t, "claim in a read-only directory", r.stderr, ro+"/fg.db: read-only file system")
}
