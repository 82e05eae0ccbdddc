package confined_test

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// dbDriver is a database/sql driver of the one list (internal/dbtest).
type dbDriver interface {
	sqlstore.Driver[*sql.Tx]
	DB() *sql.DB
}

// sqlDrivers returns the database/sql drivers of the one list by name, each
// opening a fresh, migrated database.
func sqlDrivers() map[string]func(testing.TB) dbDriver {
	m := map[string]func(testing.TB) dbDriver{}
	for _, d := range dbtest.Drivers() {
		if d.SQL != nil {
			m[d.Name] = func(t testing.TB) dbDriver { return d.SQL(t, d.DSN(t)).Driver.(dbDriver) }
		}
	}
	return m
}

type env struct {
	d     dbDriver
	g     *gate.Gate[*sql.Tx]
	coord *lease.Coordinator
}

func newEnv(t *testing.T, open func(testing.TB) dbDriver) *env {
	t.Helper()
	d := open(t)
	if _, err := d.DB().Exec(`CREATE TABLE t (v text)`); err != nil {
		t.Fatal(err)
	}
	return &env{d: d, g: gate.New(d, &gate.Options{VerifyIssued: true}), coord: lease.NewCoordinator(d, nil)}
}

// claim acquires resource for holder and returns its token.
func (e *env) claim(t *testing.T, holder, resource string) fence.Token {
	t.Helper()
	c, err := lease.NewClient(&lease.ClientOptions{Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.coord.Acquire(context.Background(), req)
	if err != nil || !out.OK {
		t.Fatalf("acquire %s for %s: %+v, %v", resource, holder, out, err)
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// rows returns the values in t, sorted.
func (e *env) rows(t *testing.T) []string {
	t.Helper()
	rs, err := e.d.DB().Query(`SELECT v FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var vs []string
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

func stmts(sqls ...string) []confined.Statement {
	out := make([]confined.Statement, len(sqls))
	for i, s := range sqls {
		out[i] = confined.Statement{SQL: s}
	}
	return out
}

const insertA = `INSERT INTO t VALUES ('a')`

var dollarParam = regexp.MustCompile(`\$[0-9]+`)

// sqlFor adapts a statement written for Postgres and SQLite to the driver
// called name. MySQL's parameters are ? in order (the tests' $n come in
// order), it concatenates with CONCAT and casts to CHAR.
func sqlFor(name, q string) string {
	if name != "mysql" {
		return q
	}
	q = strings.NewReplacer("v || $1", "CONCAT(v, $1)", " AS text)", " AS CHAR)").Replace(q)
	return dollarParam.ReplaceAllString(q, "?")
}

// TestTransactionControlRefused runs, on every dialect, SQL that tries to
// end, restart or nest the fenced transaction, in every spelling: each
// write fails, commits nothing, and says so.
func TestTransactionControlRefused(t *testing.T) {
	pgOnly := map[string]bool{"postgres-sql": true}
	cases := []struct {
		name    string
		stmts   []confined.Statement
		want    error           // errors.Is; nil: any error
		dialect map[string]bool // nil: every dialect
	}{
		{"COMMIT", stmts(insertA, "COMMIT"), confined.ErrTransactionControl, nil},
		{"commit lower case", stmts(insertA, "commit"), confined.ErrTransactionControl, nil},
		{"COMMIT behind comments", stmts(insertA, "/* x */ -- y\n CoMmIt /* z */"), confined.ErrTransactionControl, nil},
		{"COMMIT TRANSACTION", stmts(insertA, "COMMIT TRANSACTION"), confined.ErrTransactionControl, nil},
		{"END", stmts(insertA, "END"), confined.ErrTransactionControl, nil},
		{"END TRANSACTION", stmts(insertA, "end transaction"), confined.ErrTransactionControl, nil},
		{"COMMIT first", stmts("COMMIT", insertA), confined.ErrTransactionControl, nil},
		{"COMMIT then a failing statement", stmts(insertA, "COMMIT", "SELECT * FROM no_such_table"), confined.ErrTransactionControl, nil},
		{"ROLLBACK", stmts(insertA, "ROLLBACK"), confined.ErrTransactionControl, nil},
		{"ROLLBACK first", stmts("ROLLBACK", insertA), confined.ErrTransactionControl, nil},
		{"ROLLBACK TRANSACTION", stmts(insertA, "rollback transaction"), confined.ErrTransactionControl, nil},
		{"ABORT", stmts(insertA, "ABORT"), confined.ErrTransactionControl, pgOnly},
		{"BEGIN", stmts("BEGIN", insertA), confined.ErrTransactionControl, nil},
		{"BEGIN IMMEDIATE", stmts(insertA, "BEGIN IMMEDIATE"), nil, nil},
		{"START TRANSACTION", stmts(insertA, "START TRANSACTION"), confined.ErrTransactionControl, pgOnly},
		{"SAVEPOINT", stmts(insertA, "SAVEPOINT s"), confined.ErrTransactionControl, nil},
		{"RELEASE", stmts(insertA, "RELEASE s"), nil, nil},
		{"ROLLBACK TO", stmts(insertA, "ROLLBACK TO s"), nil, nil},
		{"ROLLBACK TO SAVEPOINT", stmts(insertA, "ROLLBACK TO SAVEPOINT s"), nil, nil},
		{"PREPARE TRANSACTION", stmts(insertA, "PREPARE TRANSACTION 'fg'"), nil, pgOnly},
		{"COMMIT PREPARED", stmts(insertA, "COMMIT PREPARED 'fg'"), nil, pgOnly},
		{"ROLLBACK PREPARED", stmts(insertA, "ROLLBACK PREPARED 'fg'"), nil, pgOnly},
		{"DO block COMMIT", stmts(insertA, "DO $$ BEGIN COMMIT; END $$"), nil, pgOnly},
		{"DO block ROLLBACK", stmts(insertA, "DO $$ BEGIN ROLLBACK; END $$"), nil, pgOnly},
		{"multi-statement COMMIT after", stmts(insertA + "; COMMIT"), nil, nil},
		{"multi-statement COMMIT before", stmts("COMMIT; " + insertA), nil, nil},
		{"multi-statement COMMIT then sleep", stmts("COMMIT; SELECT 1; " + insertA), nil, nil},
		{"multi-statement ROLLBACK after", stmts(insertA + "; ROLLBACK"), nil, nil},
		{"multi-statement ROLLBACK before", stmts("ROLLBACK; " + insertA), nil, nil},
		{"multi-statement COMMIT then failing", stmts(insertA + "; COMMIT; SELECT * FROM no_such_table"), nil, nil},
		{"SET CONSTRAINTS ALL IMMEDIATE", stmts(insertA, "SET CONSTRAINTS ALL IMMEDIATE"), nil, pgOnly},
		{"guard row deleted, then COMMIT", stmts(insertA, "DELETE FROM fencegate_write_guard", "COMMIT"), confined.ErrTransactionControl, pgOnly},
		{"guard key forged, then COMMIT", stmts(insertA, "UPDATE fencegate_write_guard SET key_hash = sha256('x')",
			"SELECT set_config('fencegate.write_key', 'x', true)", "COMMIT"), confined.ErrTransactionControl, pgOnly},
		{"COPY FROM STDIN", stmts(insertA, "/* x */ copy t from stdin"), confined.ErrNotAllowed, pgOnly}, // would wait forever for input
		{"ATTACH", stmts(insertA, "ATTACH 'other.db' AS other"), nil, nil},
		{"PRAGMA", stmts(insertA, "PRAGMA synchronous = OFF"), nil, nil},
	}
	for name, open := range sqlDrivers() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			for _, c := range cases {
				if c.dialect != nil && !c.dialect[name] {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					token := e.claim(t, "alice", "r-"+c.name)
					res, err := confined.Write(context.Background(), e.d, e.g, token, c.stmts)
					if err == nil {
						t.Fatalf("Write committed: %+v", res)
					}
					if c.want != nil && !errors.Is(err, c.want) {
						t.Errorf("err = %v, want %v", err, c.want)
					}
					if res.Outcome != confined.NotCommitted {
						t.Errorf("outcome = %v, want not committed (err %v)", res.Outcome, err)
					}
					if got := e.rows(t); len(got) != 0 {
						t.Errorf("rows %q committed (err %v)", got, err)
					}
				})
			}
			// The connections are clean afterwards: a write commits.
			token := e.claim(t, "alice", "after")
			res, err := confined.Write(context.Background(), e.d, e.g, token, stmts(insertA))
			if err != nil || res.Outcome != confined.Committed {
				t.Fatalf("a plain write after the refusals: %+v, %v", res, err)
			}
		})
	}
}

// TestWrite commits statements with bound arguments and counts their rows,
// on every dialect.
func TestWrite(t *testing.T) {
	for name, open := range sqlDrivers() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			token := e.claim(t, "alice", "r")
			sts := []confined.Statement{
				{SQL: `INSERT INTO t VALUES ($1), ($2)`, Args: []any{"a", "b"}},
				{SQL: `UPDATE t SET v = v || $1 WHERE v = $2`, Args: []any{"!", "b"}},
				{SQL: `SELECT v FROM t`},
				{SQL: `DELETE FROM t WHERE v = 'none'`},
				{SQL: `DELETE FROM t WHERE length(v) = $1`, Args: []any{"5"}}, // text for an integer parameter
				// JSON's values, as the MCP server passes them:
				{SQL: `DELETE FROM t WHERE length(v) = $1 OR $2 OR CAST($3 AS text) IS NOT NULL`, Args: []any{float64(7), false, nil}},
			}
			for i := range sts {
				sts[i].SQL = sqlFor(name, sts[i].SQL)
			}
			res, err := confined.Write(context.Background(), e.d, e.g, token, sts)
			if err != nil || res.Outcome != confined.Committed {
				t.Fatalf("Write: %+v, %v", res, err)
			}
			if want := []int64{2, 1, 0, 0, 0, 0}; !slices.Equal(res.RowsAffected, want) {
				t.Errorf("rows affected %v, want %v", res.RowsAffected, want)
			}
			if got, want := e.rows(t), []string{"a", "b!"}; !slices.Equal(got, want) {
				t.Errorf("rows %q, want %q", got, want)
			}
		})
	}
}

// TestInvalidStatements: arguments that do not match the parameters, NUL
// bytes, several statements in one string and empty statements are refused
// on every dialect, and nothing commits.
func TestInvalidStatements(t *testing.T) {
	cases := []struct {
		name string
		st   confined.Statement
	}{
		{"extra argument", confined.Statement{SQL: `INSERT INTO t VALUES ($1)`, Args: []any{"a", "b"}}},
		{"argument without parameter", confined.Statement{SQL: insertA, Args: []any{"a"}}},
		{"missing argument", confined.Statement{SQL: `INSERT INTO t VALUES ($1)`}},
		{"NUL in SQL", confined.Statement{SQL: insertA + "\x00; DELETE FROM t"}},
		{"NUL in argument", confined.Statement{SQL: `INSERT INTO t VALUES ($1)`, Args: []any{"a\x00b"}}},
		{"two statements", confined.Statement{SQL: insertA + "; " + insertA}},
		{"empty", confined.Statement{SQL: "  "}},
		{"only a comment", confined.Statement{SQL: "-- nothing"}},
	}
	for name, open := range sqlDrivers() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					token := e.claim(t, "alice", "r-"+c.name)
					st := confined.Statement{SQL: sqlFor(name, c.st.SQL), Args: c.st.Args}
					res, err := confined.Write(context.Background(), e.d, e.g, token, []confined.Statement{st})
					if !errors.Is(err, confined.ErrInvalidStatement) {
						t.Errorf("err = %v, want ErrInvalidStatement", err)
					}
					if res.Outcome != confined.NotCommitted || len(e.rows(t)) != 0 {
						t.Errorf("committed: %+v, rows %q", res, e.rows(t))
					}
				})
			}
		})
	}
}

// TestStaleTokenRunsNothing: a refused token gets the gate's
// *StaleFenceError, logged, and its statements never run.
func TestStaleTokenRunsNothing(t *testing.T) {
	for name, open := range sqlDrivers() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			ctx := context.Background()
			old := e.claim(t, "alice", "r")
			if _, err := e.coord.Release(ctx, old); err != nil {
				t.Fatal(err)
			}
			e.claim(t, "bob", "r")
			res, err := confined.Write(ctx, e.d, e.g, old, stmts(insertA))
			stale, ok := errors.AsType[*gate.StaleFenceError](err)
			if !ok || stale.Seq == 0 {
				t.Fatalf("err = %v, want a logged *gate.StaleFenceError", err)
			}
			if res.Outcome != confined.NotCommitted || len(e.rows(t)) != 0 {
				t.Errorf("committed: %+v, rows %q", res, e.rows(t))
			}
		})
	}
}

// TestSuccessorRacesCommitThenWait is the issue's "COMMIT; SELECT
// pg_sleep(4); INSERT": alice's SQL commits, then waits (on an advisory lock
// the test holds) while bob claims and writes, then inserts. Alice's COMMIT
// must fail at once and her late INSERT never land. On Postgres, where a
// statement can wait.
func TestSuccessorRacesCommitThenWait(t *testing.T) {
	e := newEnv(t, sqlDrivers()["postgres-sql"])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	blocker, err := e.d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if _, err := blocker.ExecContext(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	alice := e.claim(t, "alice", "r")
	done := make(chan error, 1)
	var res confined.Result
	go func() {
		var err error
		res, err = confined.Write(ctx, e.d, e.g, alice, stmts(
			`INSERT INTO t VALUES ('alice-1')`, "COMMIT", `SELECT pg_advisory_xact_lock(4242)`, `INSERT INTO t VALUES ('alice-late')`))
		done <- err
	}()
	// Wait until alice's write has ended, or waits for the lock.
	var aliceErr error
	finished := false
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := false; !finished && !waiting; {
		select {
		case aliceErr = <-done:
			finished = true
		case <-tick.C:
			if err := e.d.DB().QueryRowContext(ctx, advisoryWaiting, 4242).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Alice's lease passes to bob, who claims and writes.
	if _, err := e.coord.Release(ctx, alice); err != nil {
		t.Fatal(err)
	}
	bob := e.claim(t, "bob", "r")
	if _, err := confined.Write(ctx, e.d, e.g, bob, stmts(`INSERT INTO t VALUES ('bob')`)); err != nil {
		t.Fatalf("bob's write: %v", err)
	}
	if _, err := blocker.ExecContext(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	if !finished {
		aliceErr = <-done
	}
	if !errors.Is(aliceErr, confined.ErrTransactionControl) || res.Outcome != confined.NotCommitted {
		t.Errorf("alice's write: %+v, %v; want ErrTransactionControl, not committed", res, aliceErr)
	}
	if got, want := e.rows(t), []string{"bob"}; !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
}

// advisoryWaiting says whether a session waits for the advisory lock on its
// one bigint argument. Only that key: other packages' tests (the bench's
// advisory-lock workers) wait for advisory locks on the same server, and
// would end the wait before the write reached the lock.
const advisoryWaiting = `SELECT count(*) > 0 FROM pg_locks
	WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1`

// TestSQLiteAutomaticRollback: SQLite ends a transaction by itself on INSERT
// OR ROLLBACK's conflict and on a trigger's RAISE(ROLLBACK); the write stops
// there, reports nothing committed, and runs nothing after it.
func TestSQLiteAutomaticRollback(t *testing.T) {
	e := newEnv(t, sqlDrivers()["sqlite"])
	if _, err := e.d.DB().Exec(`CREATE TABLE u (k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for name, sqls := range map[string][]string{
		"INSERT OR ROLLBACK": {insertA, `INSERT INTO u VALUES (1)`, `INSERT OR ROLLBACK INTO u VALUES (1)`, `INSERT INTO t VALUES ('after')`},
		"RAISE(ROLLBACK)": {insertA, "CREATE TEMP TRIGGER r AFTER INSERT ON u BEGIN SELECT RAISE(ROLLBACK, 'no'); END;",
			`INSERT INTO u VALUES (2)`, `INSERT INTO t VALUES ('after')`},
	} {
		t.Run(name, func(t *testing.T) {
			token := e.claim(t, "alice", "r-"+name)
			res, err := confined.Write(context.Background(), e.d, e.g, token, stmts(sqls...))
			if err == nil || res.Outcome != confined.NotCommitted {
				t.Fatalf("Write: %+v, %v", res, err)
			}
			if got := e.rows(t); len(got) != 0 {
				t.Errorf("rows %q committed (err %v)", got, err)
			}
		})
	}
}

// TestCancelledWhileWaiting: a write whose context ends while a statement
// waits returns promptly, commits nothing, and leaves the pool usable.
func TestCancelledWhileWaiting(t *testing.T) {
	e := newEnv(t, sqlDrivers()["postgres-sql"])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	blocker, err := e.d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if _, err := blocker.ExecContext(ctx, `SELECT pg_advisory_lock(4243)`); err != nil {
		t.Fatal(err)
	}
	token := e.claim(t, "alice", "r")
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var res confined.Result
	go func() {
		var err error
		res, err = confined.Write(wctx, e.d, e.g, token, stmts(insertA, `SELECT pg_advisory_xact_lock(4243)`))
		done <- err
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := false; !waiting; {
		<-tick.C
		if err := e.d.DB().QueryRowContext(ctx, advisoryWaiting, 4243).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	wcancel()
	err = <-done
	if err == nil || res.Outcome != confined.NotCommitted {
		t.Fatalf("Write: %+v, %v", res, err)
	}
	if got := e.rows(t); len(got) != 0 {
		t.Errorf("rows %q committed", got)
	}
	res, err = confined.Write(ctx, e.d, e.g, token, stmts(insertA))
	if err != nil || res.Outcome != confined.Committed {
		t.Fatalf("the next write: %+v, %v", res, err)
	}
}

// TestUnmigratedGuard: a Postgres database without the write guard gets an
// error that says to migrate, and nothing runs.
func TestUnmigratedGuard(t *testing.T) {
	e := newEnv(t, sqlDrivers()["postgres-sql"])
	if _, err := e.d.DB().Exec(`DROP TABLE fencegate_write_guard`); err != nil {
		t.Fatal(err)
	}
	token := e.claim(t, "alice", "r")
	res, err := confined.Write(context.Background(), e.d, e.g, token, stmts(insertA))
	if !errors.Is(err, sqlstore.ErrNotMigrated) || !strings.Contains(err.Error(), "fencegate migrate") || res.Outcome != confined.NotCommitted {
		t.Fatalf("Write: %+v, %v; want ErrNotMigrated", res, err)
	}
	if got := e.rows(t); len(got) != 0 {
		t.Errorf("rows %q committed", got)
	}
}

// TestMySQLImplicitCommitsRefused: MySQL commits implicitly before DDL, LOCK
// TABLES and more, and lets procedures and prepared statements COMMIT. In
// the XA transaction a confined write runs in, the server refuses them all,
// and nothing commits.
func TestMySQLImplicitCommitsRefused(t *testing.T) {
	e := newEnv(t, sqlDrivers()["mysql"])
	if _, err := e.d.DB().Exec(`CREATE PROCEDURE fg_commit() BEGIN INSERT INTO t VALUES ('proc'); COMMIT; END`); err != nil {
		t.Fatal(err)
	}
	for name, sqls := range map[string][]string{
		"CREATE TABLE":              {insertA, `CREATE TABLE u (k INT)`},
		"CREATE TABLE AS SELECT":    {insertA, `CREATE TABLE u AS SELECT * FROM t`},
		"ALTER TABLE":               {insertA, `ALTER TABLE t ADD COLUMN w INT`},
		"DROP TABLE":                {insertA, `DROP TABLE t`},
		"TRUNCATE":                  {insertA, `TRUNCATE t`},
		"LOCK TABLES":               {insertA, `LOCK TABLES t WRITE`},
		"CREATE USER":               {insertA, `CREATE USER fg_nobody`},
		"procedure that commits":    {insertA, `CALL fg_commit()`},
		"prepared COMMIT":           {insertA, `PREPARE s FROM 'COMMIT'`, `EXECUTE s`},
		"executable comment COMMIT": {insertA, `/*!COMMIT*/`},
		"XA END":                    {insertA, `XA END 'fencegate-x'`},
		"autocommit on, then fail":  {`SET autocommit = 1`, insertA, `SELECT * FROM no_such_table`},
	} {
		t.Run(name, func(t *testing.T) {
			token := e.claim(t, "alice", "r-"+name)
			res, err := confined.Write(context.Background(), e.d, e.g, token, stmts(sqls...))
			if err == nil || res.Outcome != confined.NotCommitted {
				t.Fatalf("Write: %+v, %v", res, err)
			}
			if got := e.rows(t); len(got) != 0 {
				t.Errorf("rows %q committed (err %v)", got, err)
			}
		})
	}
	var tables int
	if err := e.d.DB().QueryRow(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('t', 'u')`).Scan(&tables); err != nil || tables != 1 {
		t.Fatalf("tables t and u: %d of them, %v; want t alone", tables, err)
	}
}

// TestRetryableStatementErrorRetried: a statement's own serialization
// failure comes from the database unmarked by any driver; Write still reads
// it as retryable (by the gate's driver) and runs the transaction again, 3
// times in all, committing nothing.
func TestRetryableStatementErrorRetried(t *testing.T) {
	e := newEnv(t, sqlDrivers()["postgres-sql"])
	if _, err := e.d.DB().Exec(`CREATE SEQUENCE attempts`); err != nil {
		t.Fatal(err)
	}
	token := e.claim(t, "alice", "r")
	res, err := confined.Write(context.Background(), e.d, e.g, token, stmts(insertA,
		`DO $$ BEGIN PERFORM nextval('attempts'); RAISE EXCEPTION 'lost a race' USING ERRCODE = 'serialization_failure'; END $$`))
	if _, ok := errors.AsType[*confined.StatementError](err); !ok || !sqlstore.IsRetryable(e.d.ClassifyError(err)) || res.Outcome != confined.NotCommitted {
		t.Fatalf("Write: %+v, %v; want a retryable *StatementError, not committed", res, err)
	}
	var attempts int
	if err := e.d.DB().QueryRow(`SELECT last_value FROM attempts`).Scan(&attempts); err != nil || attempts != 3 {
		t.Errorf("the statement ran %d times (%v), want 3", attempts, err)
	}
	if got := e.rows(t); len(got) != 0 {
		t.Errorf("rows %q committed", got)
	}
}

// withoutConfine is a driver that hides its Confine.
type withoutConfine struct {
	sqlstore.Driver[*sql.Tx]
	db *sql.DB
}

func (w withoutConfine) DB() *sql.DB { return w.db }

// TestDriverWithoutConfiner: a gate whose driver cannot confine a
// transaction (no sqlstore.Confiner) gets a clear error, and nothing runs.
func TestDriverWithoutConfiner(t *testing.T) {
	for name, open := range sqlDrivers() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			token := e.claim(t, "alice", "r")
			plain := withoutConfine{e.d, e.d.DB()}
			res, err := confined.Write(context.Background(), plain, gate.New(plain, nil), token, stmts(insertA))
			if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "sqlstore.Confiner") || res.Outcome != confined.NotCommitted {
				t.Fatalf("Write: %+v, %v; want errors.ErrUnsupported naming sqlstore.Confiner", res, err)
			}
			if got := e.rows(t); len(got) != 0 {
				t.Errorf("rows %q committed", got)
			}
		})
	}
}

// confineCounter counts the confined transactions a write begins.
type confineCounter struct {
	dbDriver
	confines *int
}

func (c confineCounter) Confine(ctx context.Context, conn *sql.Conn, fn func(sqlstore.ConfinedSession) error) error {
	*c.confines++
	return c.dbDriver.(sqlstore.Confiner).Confine(ctx, conn, fn)
}

func (c confineCounter) CheckStatement(query string) error {
	return c.dbDriver.(sqlstore.StatementChecker).CheckStatement(query)
}

// TestMySQLDDLRefusedBeforeSent: DDL on MySQL, which commits implicitly, is
// refused before any transaction begins (the server refused it inside one
// with XAER_RMFAIL), with an answer that says to create tables outside the
// gate.
func TestMySQLDDLRefusedBeforeSent(t *testing.T) {
	e := newEnv(t, sqlDrivers()["mysql"])
	token := e.claim(t, "alice", "r")
	var confines int
	d := confineCounter{e.d, &confines}
	res, err := confined.Write(context.Background(), d, e.g, token, stmts(insertA, `CREATE TABLE u (k INT)`))
	se, ok := errors.AsType[*confined.StatementError](err)
	if !ok || se.Index != 1 || !errors.Is(err, confined.ErrTransactionControl) || res.Outcome != confined.NotCommitted {
		t.Fatalf("Write: %+v, %v; want statement 2 refused as transaction control, not committed", res, err)
	}
	for _, want := range []string{"CREATE is DDL", "commit it implicitly", "create and alter tables outside the gate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Write: %v; want it to say %q", err, want)
		}
	}
	if confines != 0 {
		t.Errorf("%d confined transactions begun; want none: the DDL is refused before anything is sent", confines)
	}
	if got := e.rows(t); len(got) != 0 {
		t.Errorf("rows %q committed", got)
	}
	if _, err := confined.Write(context.Background(), d, e.g, token, stmts(insertA)); err != nil || confines != 1 {
		t.Fatalf("Write without DDL: %v after %d confined transactions; want nil after 1", err, confines)
	}
}
