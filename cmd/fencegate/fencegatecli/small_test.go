package fencegatecli

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// TestTTLMinimum: a ttl below the minimum would grant a lease born expired;
// claim, run and renew refuse it before touching the database.
func TestTTLMinimum(t *testing.T) {
	env := map[string]string{envDSN: t.TempDir() + "/db"}
	for _, args := range [][]string{
		{"claim", "--lock", "l", "--ttl", "1ns"},
		{"claim", "--lock", "l", "--ttl", "99ms"},
		{"run", "--lock", "l", "--ttl", "1ns", "--", "true"},
		{"renew", "--ttl", "1ns", "fg1:1:l:h"},
	} {
		r := fg(t, env, args...).want(t, exitUsage)
		contains(t, "stderr", r.stderr, "--ttl must be at least 100ms")
	}
	fg(t, env, "claim", "--lock", "l", "--ttl", "100ms").want(t, exitOK)
}

// TestVersion: --version and the version command print the build's version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := fg(t, nil, args...).want(t, exitOK)
		if !strings.HasPrefix(r.stdout, "fencegate ") || r.stdout != ops.Version()+"\n" {
			t.Errorf("%q printed %q", args, r.stdout)
		}
	}
	fg(t, nil, "version", "extra").want(t, exitUsage)
}

// TestNoDoubledPrefix: errors wrapped by several packages are printed with
// one prefix, the command's.
func TestNoDoubledPrefix(t *testing.T) {
	env := map[string]string{envDSN: t.TempDir() + "/db"}
	for _, args := range [][]string{
		{"claim", "--lock", "l", "--holder", "a\x01b"},
		{"claim", "--lock", "a\x01b"},
		{"run", "--lock", "l", "--holder", "a\x01b", "--", "true"},
		{"check", "fg1:0:l:h"},
		{"gate", "fg1:1:l:h", "--", "SELECT 1", "SELECT 2", "SELEC 3"},
		{"guard", "list"}, // SQLite has no guard
	} {
		onePrefix(t, fg(t, env, args...), args[0])
	}
	// The guard package's errors say "fencegate guard: ", like the command.
	databases(t, func(t *testing.T, db database) {
		onePrefix(t, fg(t, map[string]string{envDSN: db.dsn}, "guard", "install", "--table", "nope", "--resource", "x").want(t, exitError), "guard")
	})
	if got := message("fencegate: commit: lease: acquire \"x\": lease: coordinator busy, retry: boom"); got != "commit: acquire \"x\": coordinator busy, retry: boom" {
		t.Errorf("message: %q", got)
	}
}

// innerPrefix is a package's prefix inside a line that already has the
// command's.
var innerPrefix = regexp.MustCompile(`fencegate( guard)?: |lease: `)

// onePrefix fails unless the first line of r's stderr starts with the
// command's prefix and repeats no package's.
func onePrefix(t *testing.T, r result, cmd string) {
	t.Helper()
	line, _, _ := strings.Cut(r.stderr, "\n")
	rest, ok := strings.CutPrefix(line, "fencegate "+cmd+": ")
	if !ok || innerPrefix.MatchString(rest) {
		t.Errorf("fencegate %s: first line of stderr %q", cmd, line)
	}
}

// TestClaimBusy: a claim that finds the lock's floor row in use by another
// transaction (the previous holder's write) gets the coordinator's busy
// answer, which claim reports as held: exit 3, one prefix.
func TestClaimBusy(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		if !isPostgres(db.dsn) {
			t.Skip("SQLite waits out its busy timeout (10s) instead of a lock timeout")
		}
		env := map[string]string{envDSN: db.dsn}
		token := strings.TrimSpace(fg(t, env, "claim", "--lock", "busy", "--holder", "a").want(t, exitOK).stdout)
		fg(t, env, "release", token).want(t, exitOK)
		d, err := sqlopen.Open(t.Context(), db.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		tx, err := d.DB().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`SELECT floor FROM fencegate_floor WHERE resource = 'busy' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		r := fg(t, env, "claim", "--lock", "busy", "--holder", "b").want(t, exitHeld)
		contains(t, "stderr", r.stderr, "fencegate claim: busy: busy, in use by another transaction; nothing was granted")
		if strings.Count(r.stderr, "lease: ") > 0 || strings.Count(r.stderr, "fencegate: ") > 0 {
			t.Errorf("doubled prefixes:\n%s", r.stderr)
		}
	})
}

// TestUnmigratedHint: a store whose tables are missing says to migrate.
func TestUnmigratedHint(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		env := map[string]string{envDSN: db.dsn}
		token := strings.TrimSpace(fg(t, env, "claim", "--lock", "l", "--holder", "a").want(t, exitOK).stdout)
		table := "fencegate_floor"
		if isPostgres(db.dsn) {
			table = "fencegate_write_guard"
		}
		db.exec(t, "DROP TABLE "+table)
		r := fg(t, env, "gate", token, "--", "SELECT 1").want(t, exitError)
		contains(t, "stderr", r.stderr, "fencegate migrate", "nothing was committed")
	})
}
