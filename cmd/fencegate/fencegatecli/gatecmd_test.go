package fencegatecli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// TestGateConfined runs, through the command, the SQL from issue 9 that
// ended the fenced transaction from inside: every such write now fails,
// commits nothing, and says so; exit 0 only for a write that committed.
func TestGateConfined(t *testing.T) {
	cases := []struct {
		name    string
		stdin   string
		args    []string // after "gate TOKEN"
		code    int
		rows    []int64 // the fences in the log table afterwards
		pgOnly  bool
		message string // in stderr
	}{
		{name: "COMMIT, wait, INSERT", args: []string{"--", "COMMIT; SELECT pg_sleep(0); INSERT INTO log VALUES (1, 'a')"}, code: exitUsage, pgOnly: true, message: "more than one statement"},
		{name: "INSERT; ROLLBACK", args: []string{"--", "INSERT INTO log VALUES (1, 'a'); ROLLBACK"}, code: exitUsage, message: "more than one statement"},
		{name: "ROLLBACK; INSERT", args: []string{"--", "ROLLBACK; INSERT INTO log VALUES (1, 'a')"}, code: exitUsage, message: "more than one statement"},
		{name: "INSERT; COMMIT; failing", args: []string{"--", "INSERT INTO log VALUES (1, 'a'); COMMIT; SELECT * FROM no_such_table"}, code: exitUsage, message: "more than one statement"},
		{name: "INSERT; COMMIT", args: []string{"--", "INSERT INTO log VALUES (1, 'a'); COMMIT"}, code: exitUsage, message: "more than one statement"},
		{name: "INSERT, COMMIT", args: []string{"--", "INSERT INTO log VALUES (1, 'a')", "/* */ commit"}, code: exitError, message: "statement 2: a fenced write's SQL may not end, restart or nest its transaction"},
		{name: "INSERT, ROLLBACK", args: []string{"--", "INSERT INTO log VALUES (1, 'a')", "ROLLBACK"}, code: exitError, message: "statement 2: a fenced write's SQL may not end, restart or nest its transaction"},
		{name: "BEGIN, INSERT", args: []string{"--", "BEGIN", "INSERT INTO log VALUES (1, 'a')"}, code: exitError, message: "statement 1: a fenced write's SQL may not end, restart or nest its transaction"},
		{name: "INSERT, SAVEPOINT", args: []string{"--", "INSERT INTO log VALUES (1, 'a')", "SAVEPOINT s"}, code: exitError, message: "statement 2: a fenced write's SQL may not end, restart or nest its transaction"},
		{name: "DO COMMIT", args: []string{"--", "INSERT INTO log VALUES (1, 'a')", "DO $$ BEGIN COMMIT; END $$"}, code: exitError, pgOnly: true, message: "invalid transaction termination"},
		{name: "extra --arg", args: []string{"--arg", "1", "--arg", "b", "--arg", "extra", "--", "INSERT INTO log VALUES ($1, $2)"}, code: exitUsage, message: "takes 2 arguments, got 3"},
		{name: "missing --arg", args: []string{"--arg", "1", "--", "INSERT INTO log VALUES ($1, $2)"}, code: exitUsage, message: "takes 2 arguments, got 1"},
		{name: "NUL on stdin", stdin: "INSERT INTO log VALUES (1, 'a')\x00; DELETE FROM log", args: []string{"--", "-"}, code: exitUsage, message: "statement 1 contains a NUL byte"},
		{name: "committed", args: []string{"--arg", "1", "--arg", "a", "--", "INSERT INTO log VALUES ($1, $2)"}, code: exitOK, rows: []int64{1}},
	}
	databases(t, func(t *testing.T, db database) {
		db.createLog(t)
		env := map[string]string{envDSN: db.dsn}
		for _, c := range cases {
			if c.pgOnly && !isPostgres(db.dsn) {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				db.exec(t, `DELETE FROM log`)
				lock := "l-" + strings.ReplaceAll(c.name, " ", "-")
				token := strings.TrimSpace(fg(t, env, "claim", "--lock", lock, "--holder", "a").want(t, exitOK).stdout)
				var stdout, stderr bytes.Buffer
				args := []string{"gate", token}
				for _, a := range c.args {
					args = append(args, db.q(a))
				}
				code := run(t.Context(), args, strings.NewReader(c.stdin), &stdout, &stderr, func(k string) string { return env[k] })
				r := result{code, stdout.String(), stderr.String()}
				r.want(t, c.code)
				if got := db.logRows(t); !slices.Equal(got, c.rows) {
					t.Errorf("log rows %v, want %v\n%v", got, c.rows, r)
				}
				if c.code == exitError {
					contains(t, "stderr", r.stderr, "nothing was committed")
				}
				contains(t, "stderr", r.stderr, c.message)
			})
		}
	})
}

// TestGateDDLOnMySQL: DDL through gate on MySQL, which commits it
// implicitly, is refused before anything is sent, in plain words (it was the
// server's XAER_RMFAIL), exit 1, nothing committed.
func TestGateDDLOnMySQL(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		if !strings.HasPrefix(db.dsn, "mysql") {
			t.Skip("Postgres and SQLite hold DDL in a transaction")
		}
		db.createLog(t)
		env := map[string]string{envDSN: db.dsn}
		token := strings.TrimSpace(fg(t, env, "claim", "--lock", "ddl", "--holder", "a").want(t, exitOK).stdout)
		r := fg(t, env, "gate", token, "--", db.q("INSERT INTO log VALUES (1, 'a')"), "CREATE TABLE t2 (a INT)").want(t, exitError)
		for _, want := range []string{"statement 2", "CREATE is DDL", "commit it implicitly", "create and alter tables outside the gate", "nothing was committed"} {
			contains(t, "stderr", r.stderr, want)
		}
		if strings.Contains(r.stderr, "XAER") {
			t.Errorf("stderr %q: the DDL reached the server", r.stderr)
		}
		if got := db.logRows(t); len(got) != 0 {
			t.Errorf("log rows %v, want none", got)
		}
	})
}

// TestGateSetToken: gate takes a set token (a claim of several locks at
// once, made through the library): admitted whole, then refused once one
// member was claimed by another, nothing committed.
func TestGateSetToken(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		db.createLog(t)
		env := map[string]string{envDSN: db.dsn}
		ctx := t.Context()
		store, err := sqlopen.Open(ctx, db.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if err := store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
		client, err := lease.NewClient(&lease.ClientOptions{Holder: "a"})
		if err != nil {
			t.Fatal(err)
		}
		req, err := client.BeginAcquireSet([]string{"set-x", "set-y"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		l, err := client.CompleteAcquire(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		tok := l.Token().String()
		fg(t, env, "gate", "--lock", "set-y", tok, "--", db.q("INSERT INTO log VALUES (1, 'a')")).want(t, exitOK)
		if _, err := coord.Release(ctx, l.Token()); err != nil {
			t.Fatal(err)
		}
		fg(t, env, "claim", "--lock", "set-y", "--holder", "b").want(t, exitOK)
		r := fg(t, env, "gate", tok, "--", db.q("INSERT INTO log VALUES (2, 'a')")).want(t, exitHeld)
		contains(t, "stderr", r.stderr, "set-y")
		if got := db.logRows(t); !slices.Equal(got, []int64{1}) {
			t.Fatalf("log rows %v, want [1]", got)
		}
	})
}
