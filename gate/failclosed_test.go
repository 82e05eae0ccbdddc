package gate_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// fixture is a migrated database with an items table, seen through one
// transaction type, so that a test body runs on SQLite, Postgres through
// database/sql, and Postgres through pgx.
type fixture[TTx any] struct {
	driver  sqlstore.Driver[TTx]
	dialect sqlstore.Dialect
	begin   func(t *testing.T) TTx
	insert  func(ctx context.Context, tx TTx, id int) error // the caller's write
	commit  func(tx TTx) error
	exec    func(t *testing.T, query string) // on the pool, $n placeholders
	count   func(t *testing.T, query string) int
	// lock locks table exclusively from a connection of its own until
	// unlock: LOCK TABLE in a transaction on Postgres, LOCK TABLES on
	// MySQL; on SQLite the transaction holds the write lock from BEGIN.
	lock func(t *testing.T, table string) (unlock func())
}

// sqlDriver is a database/sql driver with its *sql.DB.
type sqlDriver interface {
	sqlstore.Driver[*sql.Tx]
	DB() *sql.DB
}

func sqlFixture(t *testing.T, d sqlDriver) fixture[*sql.Tx] {
	q := func(query string) string {
		switch d.Dialect() {
		case sqlite.Dialect:
			return strings.ReplaceAll(query, "$", "?")
		case mysql.Dialect:
			query, _ = mysqltest.Rebind(query, nil)
		}
		return query
	}
	f := fixture[*sql.Tx]{
		driver: d, dialect: d.Dialect(),
		begin: func(t *testing.T) *sql.Tx {
			tx, err := d.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback() })
			return tx
		},
		insert: func(ctx context.Context, tx *sql.Tx, id int) error {
			_, err := tx.ExecContext(ctx, q(`INSERT INTO items (id) VALUES ($1)`), id)
			return err
		},
		commit: func(tx *sql.Tx) error { return tx.Commit() },
		exec: func(t *testing.T, query string) {
			if _, err := d.DB().Exec(q(query)); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		},
		count: func(t *testing.T, query string) int {
			var n int
			if err := d.DB().QueryRow(q(query)).Scan(&n); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return n
		},
	}
	f.lock = func(t *testing.T, table string) func() {
		ctx := context.Background()
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Dialect() == mysql.Dialect { // LOCK TABLES ends a transaction
			if _, err := conn.ExecContext(ctx, `LOCK TABLES `+table+` WRITE`); err != nil {
				t.Fatal(err)
			}
			return func() { _, _ = conn.ExecContext(ctx, `UNLOCK TABLES`); conn.Close() }
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Dialect() == pgsql.Dialect {
			if _, err := tx.Exec(pgLockTable(table)); err != nil {
				t.Fatal(err)
			}
		}
		return func() { _ = tx.Rollback(); conn.Close() }
	}
	f.exec(t, `CREATE TABLE items (id INTEGER PRIMARY KEY)`)
	return f
}

func pgxFixture(t *testing.T, d *pgxv5.Driver) fixture[pgx.Tx] {
	pool := d.Pool()
	f := fixture[pgx.Tx]{
		driver: d, dialect: pgsql.Dialect,
		begin: func(t *testing.T) pgx.Tx {
			tx, err := pool.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		},
		insert: func(ctx context.Context, tx pgx.Tx, id int) error {
			_, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES ($1)`, id)
			return err
		},
		commit: func(tx pgx.Tx) error { return tx.Commit(context.Background()) },
		exec: func(t *testing.T, query string) {
			if _, err := pool.Exec(context.Background(), query); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		},
		count: func(t *testing.T, query string) int {
			var n int
			if err := pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return n
		},
	}
	f.lock = func(t *testing.T, table string) func() {
		ctx := context.Background()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, pgLockTable(table)); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx); conn.Release() }
	}
	f.exec(t, `CREATE TABLE items (id INTEGER PRIMARY KEY)`)
	return f
}

// pgLockTable is Postgres's statement that locks table exclusively.
func pgLockTable(table string) string { return `LOCK TABLE ` + table + ` IN ACCESS EXCLUSIVE MODE` }

// forEachTxType runs the same generic body on every driver of the one list
// (internal/dbtest.Drivers).
func forEachTxType(t *testing.T, sqlBody func(*testing.T, fixture[*sql.Tx]), pgxBody func(*testing.T, fixture[pgx.Tx])) {
	dbtest.ForEach(t,
		func(t *testing.T, h dbtest.Harness[*sql.Tx]) { sqlBody(t, sqlFixture(t, h.Driver.(sqlDriver))) },
		func(t *testing.T, h dbtest.Harness[pgx.Tx]) { pgxBody(t, pgxFixture(t, h.Driver.(*pgxv5.Driver))) })
}

// pgxDefault is a fixture on pgx in its default exec mode.
func pgxDefault(t *testing.T) fixture[pgx.Tx] {
	d := dbtest.Find(t, "pgx-cache-statement")
	return pgxFixture(t, d.Pgx(t, d.DSN(t)).Driver.(*pgxv5.Driver))
}

// issue records a lease the way the coordinator does, for VerifyIssued.
func issue[TTx any](t *testing.T, f fixture[TTx], holder string, fence int64) {
	t.Helper()
	ctx := context.Background()
	err := f.driver.InTx(ctx, func(ex sqlstore.Executor) error {
		_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource: "r", Holder: holder, Fence: fence, RequestID: "req-" + holder, TTL: time.Minute})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeAnyway is the caller who ignores Commit's error: it writes and
// commits. Nothing of it may land.
func writeAnyway[TTx any](t *testing.T, f fixture[TTx], tx TTx, id int) {
	t.Helper()
	_ = f.insert(context.Background(), tx, id)
	if err := f.commit(tx); err == nil {
		t.Errorf("the transaction committed after Commit failed")
	}
	if n := f.count(t, `SELECT count(*) FROM items WHERE id = `+strconv.Itoa(id)); n != 0 {
		t.Fatalf("a write committed after Commit failed")
	}
}

// Item 2: Commit failed open when its statement was cut. Every error from
// Commit, a cancelled context included, now leaves tx unable to commit.
func TestCommitErrorRollsBack(t *testing.T) {
	forEachTxType(t, testCommitErrorRollsBack[*sql.Tx], testCommitErrorRollsBack[pgx.Tx])
}

func testCommitErrorRollsBack[TTx any](t *testing.T, f fixture[TTx]) {
	g := gate.New(f.driver, nil)
	tok := fence.Token{Resource: "r", Holder: "a", Fence: 5}

	// Cancelled before the floor statement runs.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tx := f.begin(t)
	if err := g.Commit(cancelled, tx, tok); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context = %v", err)
	}
	writeAnyway(t, f, tx, 1)

	// Invalid input, too.
	tx = f.begin(t)
	if err := g.Commit(context.Background(), tx, fence.Token{Resource: "r", Holder: "a"}); !errors.Is(err, fence.ErrInvalidInput) {
		t.Fatalf("Commit of a zero fence = %v", err)
	}
	writeAnyway(t, f, tx, 2)

	if f.dialect != pgsql.Dialect {
		return // a SQLite transaction holds the database: the statement cannot block
	}
	// Cut while the floor statement runs: it waits for the floor row that
	// another writer's open transaction holds, until the deadline.
	blocker := f.begin(t)
	if err := g.Commit(context.Background(), blocker, tok); err != nil {
		t.Fatal(err)
	}
	deadline, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	tx = f.begin(t)
	if err := g.Commit(deadline, tx, tok); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Commit cut by its deadline = %v", err)
	}
	if err := f.commit(blocker); err != nil {
		t.Fatal(err)
	}
	writeAnyway(t, f, tx, 3)
}

// Item 2 for CommitBatch with a pgx.Tx: a cancelled pipeline rolls it back.
func TestCommitBatchErrorRollsBackTx(t *testing.T) {
	f := pgxDefault(t)
	g := gate.New(f.driver, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tx := f.begin(t)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO items (id) VALUES (1)`)
	if err := pgxgate.CommitBatch(cancelled, g, tx, fence.Token{Resource: "r", Holder: "a", Fence: 5}, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("CommitBatch with a cancelled context = %v", err)
	}
	writeAnyway(t, f, tx, 2)
}

// cancelAfterRaise cancels the caller's context the moment the floor
// statement has returned: the refusal is decided, the follow-up is not run.
type cancelAfterRaise[TTx any] struct {
	sqlstore.Driver[TTx]
	cancel context.CancelFunc
}

func (d cancelAfterRaise[TTx]) UnwrapExecutor(tx TTx) sqlstore.Executor {
	return cancellingExecutor{d.Driver.UnwrapExecutor(tx), d.cancel}
}

type cancellingExecutor struct {
	sqlstore.Executor
	cancel context.CancelFunc
}

func (e cancellingExecutor) FloorRaise(ctx context.Context, p *sqlstore.FloorRaiseParams) (sqlstore.FloorRaiseResult, error) {
	res, err := e.Executor.FloorRaise(ctx, p)
	e.cancel()
	return res, err
}

// Item 3: once the database refused a fence, the caller gets a
// *StaleFenceError and the rejection log its record, whatever the caller's
// context does next.
func TestRefusalSurvivesCancellation(t *testing.T) {
	forEachTxType(t, testRefusalSurvivesCancellation[*sql.Tx], testRefusalSurvivesCancellation[pgx.Tx])
}

func testRefusalSurvivesCancellation[TTx any](t *testing.T, f fixture[TTx]) {
	issue(t, f, "a", 3)
	for _, tc := range []struct {
		tok       fence.Token
		notIssued bool
	}{
		{fence.Token{Resource: "r", Holder: "a", Fence: 1000}, true}, // forged
		{fence.Token{Resource: "r", Holder: "mallory", Fence: 3}, true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		g := gate.New(cancelAfterRaise[TTx]{f.driver, cancel}, &gate.Options{VerifyIssued: true})
		tx := f.begin(t)
		err := g.Commit(ctx, tx, tc.tok)
		var stale *gate.StaleFenceError
		if !errors.As(err, &stale) || stale.NotIssued != tc.notIssued || stale.Seq <= 0 {
			t.Fatalf("Commit(%s) = %v; want a logged *StaleFenceError", tc.tok, err)
		}
		if n := f.count(t, `SELECT count(*) FROM fencegate_rejection WHERE seq = `+strconv.FormatInt(stale.Seq, 10)); n != 1 {
			t.Fatalf("rejection #%d is not in the log", stale.Seq)
		}
		writeAnyway(t, f, tx, int(stale.Seq))
	}
}

// Item 4: Admit honours VerifyIssued: a fence the coordinator never issued
// is refused, logged, and leaves the floor alone.
func TestAdmitVerifiesIssued(t *testing.T) {
	forEachTxType(t, testAdmitVerifiesIssued[*sql.Tx], testAdmitVerifiesIssued[pgx.Tx])
}

func testAdmitVerifiesIssued[TTx any](t *testing.T, f fixture[TTx]) {
	ctx := context.Background()
	g := gate.New(f.driver, &gate.Options{VerifyIssued: true})
	issue(t, f, "a", 3)
	err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "mallory", Fence: 1_000_000_000_000_000})
	var stale *gate.StaleFenceError
	if !errors.Is(err, gate.ErrFenceNotIssued) || !errors.As(err, &stale) || stale.Seq <= 0 {
		t.Fatalf("Admit of a forged fence = %v; want a logged ErrFenceNotIssued", err)
	}
	if _, err := g.Floor(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("a forged fence raised the floor: %v", err)
	}
	if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 3}); err != nil {
		t.Fatalf("Admit of the issued fence: %v", err)
	}
	if fl, err := g.Floor(ctx, "r"); err != nil || fl.Floor != 3 {
		t.Fatalf("floor = %+v, %v; want 3", fl, err)
	}
}

// Item 6: when the database does not answer the rejection log's insert,
// a refused Commit still returns, within Options.CleanupTimeout, and says
// the refusal may not have been logged. Another session's lock on the log
// table plays the unresponsive database.
func TestRefusalLogIsBounded(t *testing.T) {
	forEachTxType(t, testRefusalLogIsBounded[*sql.Tx], testRefusalLogIsBounded[pgx.Tx])
}

func testRefusalLogIsBounded[TTx any](t *testing.T, f fixture[TTx]) {
	ctx := context.Background()
	if err := gate.New(f.driver, nil).Admit(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 9}); err != nil {
		t.Fatal(err)
	}
	var unlock func()
	defer func() { unlock() }()
	// Lock once Commit has rolled the caller's transaction back: on SQLite
	// that transaction holds the write lock until then.
	d := &lockAfterRollback[TTx]{Driver: f.driver, lock: func() {
		unlock = f.lock(t, "fencegate_rejection")
	}}
	g := gate.New(d, &gate.Options{CleanupTimeout: 100 * time.Millisecond})
	tx := f.begin(t)
	err := g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "a", Fence: 1})
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "may not have been logged") {
		t.Fatalf("Commit = %v; want a *StaleFenceError saying the log may not have been written", err)
	}
	unlock()
	unlock = func() {}
	writeAnyway(t, f, tx, 1)
}

// lockAfterRollback runs lock once, right after the first rollback.
type lockAfterRollback[TTx any] struct {
	sqlstore.Driver[TTx]
	lock func()
	done bool
}

func (d *lockAfterRollback[TTx]) Rollback(ctx context.Context, tx TTx) error {
	err := d.Driver.Rollback(ctx, tx)
	if !d.done {
		d.done = true
		d.lock()
	}
	return err
}

// Item 10: a pgx savepoint passed to Commit or CommitBatch is refused with
// ErrNestedTx before anything runs. A refusal used to roll back only the
// savepoint, and the outer transaction committed its writes.
func TestCommitRefusesNestedTx(t *testing.T) {
	f := pgxDefault(t)
	ctx := context.Background()
	g := gate.New(f.driver, nil)
	if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 9}); err != nil {
		t.Fatal(err)
	}
	outer := f.begin(t)
	nested, err := outer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := fence.Token{Resource: "r", Holder: "a", Fence: 1}
	if err := g.Commit(ctx, nested, stale); !errors.Is(err, gate.ErrNestedTx) {
		t.Fatalf("Commit of a savepoint = %v, want ErrNestedTx", err)
	}
	if err := nested.Commit(ctx); err == nil {
		t.Error("the savepoint committed after Commit refused it")
	}
	nested, err = outer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgxgate.CommitBatch(ctx, g, nested, stale, &pgx.Batch{}); !errors.Is(err, gate.ErrNestedTx) {
		t.Fatalf("CommitBatch on a savepoint = %v, want ErrNestedTx", err)
	}
	if n := f.count(t, `SELECT count(*) FROM fencegate_rejection`); n != 0 {
		t.Fatalf("a refused savepoint ran the fence statement (%d rejections)", n)
	}
	// The outermost transaction is accepted.
	if err := g.Commit(ctx, outer, fence.Token{Resource: "r", Holder: "b", Fence: 9}); err != nil {
		t.Fatal(err)
	}
}

// embedsTx and embedsEmbedsTx are a caller's own types around a
// transaction, as issue 22 item 9 passed one.
type embedsTx struct{ pgx.Tx }

type embedsEmbedsTx struct {
	n int
	*embedsTx
}

// A savepoint inside a type of the caller's that embeds it is still a
// savepoint: IsNestedTx looks through embedding, and Commit refuses it.
func TestCommitRefusesEmbeddedNestedTx(t *testing.T) {
	f := pgxDefault(t)
	ctx := context.Background()
	g := gate.New(f.driver, nil)
	outer := f.begin(t)
	for _, wrap := range []func(pgx.Tx) pgx.Tx{
		func(tx pgx.Tx) pgx.Tx { return embedsTx{tx} },
		func(tx pgx.Tx) pgx.Tx { return &embedsTx{tx} },
		func(tx pgx.Tx) pgx.Tx { return embedsEmbedsTx{1, &embedsTx{tx}} },
	} {
		nested, err := outer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := wrap(nested)
		if !gate.IsNestedTx(tx) {
			t.Errorf("IsNestedTx(%T) = false", tx)
		}
		if err := g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "a", Fence: 1}); !errors.Is(err, gate.ErrNestedTx) {
			t.Fatalf("Commit of %T = %v, want ErrNestedTx", tx, err)
		}
		if gate.IsNestedTx(wrap(outer)) {
			t.Errorf("IsNestedTx(%T) of the outermost transaction = true", tx)
		}
	}
	var nilTx *embedsTx
	for _, tx := range []any{nil, nilTx, embedsTx{}, embedsEmbedsTx{}, outer, 7} {
		if gate.IsNestedTx(tx) {
			t.Errorf("IsNestedTx(%#v) = true", tx)
		}
	}
}

// Item 6 for Do: when fn fails, Do rolls back and raises the floor in a
// transaction of its own; with the database not answering that raise, Do
// still returns fn's error, within Options.CleanupTimeout.
func TestDoFallbackRaiseIsBounded(t *testing.T) {
	forEachTxType(t, testDoFallbackRaiseIsBounded[*sql.Tx], testDoFallbackRaiseIsBounded[pgx.Tx])
}

func testDoFallbackRaiseIsBounded[TTx any](t *testing.T, f fixture[TTx]) {
	unlock := func() {}
	defer func() { unlock() }()
	d := &lockAfterRollback[TTx]{Driver: f.driver, lock: func() {
		unlock = f.lock(t, "fencegate_floor")
	}}
	g := gate.New(d, &gate.Options{CleanupTimeout: 100 * time.Millisecond})
	boom := errors.New("boom")
	err := g.Do(context.Background(), fence.Token{Resource: "r", Holder: "a", Fence: 1}, func(context.Context, TTx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if !d.done {
		t.Fatal("Do did not roll back")
	}
}

// cancelOnClose cancels the caller's context as soon as the pipeline's
// results are in: the refusal is decided, its follow-up is not run.
type cancelOnClose struct {
	pgxgate.BatchSender
	cancel context.CancelFunc
}

func (s cancelOnClose) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return closeThenCancel{s.BatchSender.SendBatch(ctx, b), s.cancel}
}

type closeThenCancel struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (r closeThenCancel) Close() error {
	err := r.BatchResults.Close()
	r.cancel()
	return err
}

// Item 3 for CommitBatch: a refusal survives the caller's cancellation.
func TestCommitBatchRefusalSurvivesCancellation(t *testing.T) {
	f := pgxDefault(t)
	issue(t, f, "a", 3)
	g := gate.New(f.driver, &gate.Options{VerifyIssued: true})
	ctx, cancel := context.WithCancel(context.Background())
	pool := f.driver.(*pgxv5.Driver).Pool()
	err := pgxgate.CommitBatch(ctx, g, cancelOnClose{pool, cancel}, fence.Token{Resource: "r", Holder: "a", Fence: 1000}, &pgx.Batch{})
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || !stale.NotIssued || stale.Seq <= 0 {
		t.Fatalf("CommitBatch = %v; want a logged *StaleFenceError", err)
	}
	if n := f.count(t, `SELECT count(*) FROM fencegate_rejection`); n != 1 {
		t.Fatalf("%d rejections, want 1", n)
	}
}

// blackhole forwards TCP connections to a database until stop; from then on
// it accepts and forwards nothing: a database that stopped answering (a
// synchronous standby gone, a network partition).
type blackhole struct {
	ln      net.Listener
	target  string
	stopped atomic.Bool
	close   func() // cuts every connection; idempotent
}

func newBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) { mu.Lock(); open = append(open, c); mu.Unlock() }
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			if b.stopped.Load() {
				continue // accepted, never answered
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			track(up)
			conns.Add(2)
			go func() { defer conns.Done(); b.pipe(up, c) }()
			go func() { defer conns.Done(); b.pipe(c, up) }()
		}
	}()
	var once sync.Once
	b.close = func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			for _, c := range open {
				c.Close()
			}
			mu.Unlock()
			conns.Wait()
		})
	}
	t.Cleanup(b.close)
	return b
}

// pipe copies src to dst until stop, then swallows what src sends.
func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if !b.stopped.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

func (b *blackhole) stop() { b.stopped.Store(true) }

// via returns dsn with its host and port replaced by the blackhole's.
func (b *blackhole) via(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = b.ln.Addr().String()
	return u.String()
}

// stopAfterRaise stops answering the moment the floor statement returned a
// refusal: the rollback, the floor read and the log all meet a silent
// database.
type stopAfterRaise[TTx any] struct {
	sqlstore.Driver[TTx]
	stop func()
}

func (d stopAfterRaise[TTx]) UnwrapExecutor(tx TTx) sqlstore.Executor {
	return cancellingExecutor{d.Driver.UnwrapExecutor(tx), d.stop}
}

// Item 6 with a database that stops answering altogether: a refused Commit
// returns within Options.CleanupTimeout, its rollback included (database/sql's
// Rollback takes no context), and says the refusal may not have been
// logged; the transaction cannot commit.
func TestRefusalWhenTheDatabaseStopsAnswering(t *testing.T) {
	// silent returns a fresh schema's URL through a blackhole, and its stop.
	silent := func(t *testing.T) (dsn string, stop, cut func()) {
		schemaURL := dbtest.PostgresSchemaURL(t)
		u, err := url.Parse(schemaURL)
		if err != nil {
			t.Fatal(err)
		}
		bh := newBlackhole(t, u.Host)
		return bh.via(t, schemaURL), bh.stop, bh.close
	}
	t.Run("postgres-sql", func(t *testing.T) {
		dsn, stop, cut := silent(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		defer cut() // first: closing the pool would wait on silent connections
		testStopsAnswering(t, sqlFixture(t, migrated(t, pgsql.New(db))), stop)
	})
	t.Run("postgres-pgx", func(t *testing.T) {
		dsn, stop, cut := silent(t)
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		defer cut()
		testStopsAnswering(t, pgxFixture(t, migrated(t, pgxv5.New(pool))), stop)
	})
}

func migrated[S sqlstore.Store](t *testing.T, s S) S {
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func testStopsAnswering[TTx any](t *testing.T, f fixture[TTx], stop func()) {
	ctx := context.Background()
	if err := gate.New(f.driver, nil).Admit(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 9}); err != nil {
		t.Fatal(err)
	}
	g := gate.New(stopAfterRaise[TTx]{f.driver, stop}, &gate.Options{CleanupTimeout: 200 * time.Millisecond})
	tx := f.begin(t)
	err := g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "a", Fence: 1})
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "may not have been logged") {
		t.Fatalf("Commit = %v; want a *StaleFenceError saying the log may not have been written", err)
	}
	if err := f.commit(tx); err == nil {
		t.Fatal("the refused transaction committed")
	}
}

// failFloorReads makes the first n floor reads outside any transaction fail,
// as a connection cut at that moment does.
type failFloorReads[TTx any] struct {
	sqlstore.Driver[TTx]
	n *atomic.Int32
}

func (d failFloorReads[TTx]) Executor() sqlstore.Executor {
	return failingFloorGet{d.Driver.Executor(), d.n}
}

type failingFloorGet struct {
	sqlstore.Executor
	n *atomic.Int32
}

func (e failingFloorGet) FloorGet(ctx context.Context, resource string) (sqlstore.Floor, error) {
	if e.n.Add(-1) >= 0 {
		return sqlstore.Floor{}, errors.New("conn closed")
	}
	return e.Executor.FloorGet(ctx, resource)
}

// A fence below the floor that no live lease holds is refused as stale, with the real
// floor in its record, even when the floor read after the refusal fails at
// first (the reliability suite saw "never issued, floor 0" records after
// connections were cut); when it cannot be read at all, no false record is
// written and the error says the refusal may not have been logged.
func TestRefusalRecordSurvivesAFailedFloorRead(t *testing.T) {
	forEachTxType(t, testRefusalRecordSurvivesAFailedFloorRead[*sql.Tx], testRefusalRecordSurvivesAFailedFloorRead[pgx.Tx])
}

func testRefusalRecordSurvivesAFailedFloorRead[TTx any](t *testing.T, f fixture[TTx]) {
	ctx := context.Background()
	if err := gate.New(f.driver, nil).Admit(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 7}); err != nil {
		t.Fatal(err)
	}
	old := fence.Token{Resource: "r", Holder: "a", Fence: 3} // no live lease: VerifyIssued reads the floor

	var n atomic.Int32
	n.Store(2)
	g := gate.New(failFloorReads[TTx]{f.driver, &n}, &gate.Options{VerifyIssued: true})
	tx := f.begin(t)
	err := g.Commit(ctx, tx, old)
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.NotIssued || stale.Floor != 7 || stale.Seq <= 0 {
		t.Fatalf("Commit(%s) after two failed floor reads = %v; want a logged stale refusal below floor 7", old, err)
	}
	writeAnyway(t, f, tx, 1)

	n.Store(1 << 20) // the floor cannot be read at all
	g = gate.New(failFloorReads[TTx]{f.driver, &n}, &gate.Options{VerifyIssued: true, CleanupTimeout: 50 * time.Millisecond})
	before := f.count(t, `SELECT count(*) FROM fencegate_rejection`)
	tx = f.begin(t)
	err = g.Commit(ctx, tx, old)
	if !errors.As(err, &stale) || stale.NotIssued || !strings.Contains(err.Error(), "may not have been logged") {
		t.Fatalf("Commit(%s) with no floor = %v; want a refusal that says it may not have been logged", old, err)
	}
	if after := f.count(t, `SELECT count(*) FROM fencegate_rejection`); after != before {
		t.Fatalf("a refusal whose floor could not be read was logged (%d records, want %d)", after, before)
	}
	writeAnyway(t, f, tx, 2)
}

// Issue 36, item 1: a refused Commit left a *sql.Tx that could still commit
// until a background rollback got to it, so with a short CleanupTimeout the
// caller's tx.Commit, called next, committed the stale write. Now tx is
// finished before Commit returns, whatever the bound. pgx was never
// affected: pgx.Tx.Rollback takes a context and runs in the caller's
// goroutine, and marks the transaction closed before it returns, even when
// ctx ended first (one exec mode is enough for that).
func TestRefusedCommitCannotCommit(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, h dbtest.Harness[*sql.Tx]) {
		testRefusedCommitCannotCommit(t, sqlFixture(t, h.Driver.(sqlDriver)), 100)
	}, nil)
	// Fewer: pgx drops the connection of a rollback cut by ctx, and each
	// transaction then dials a new one.
	t.Run("pgx", func(t *testing.T) { testRefusedCommitCannotCommit(t, pgxDefault(t), 20) })
}

func testRefusedCommitCannotCommit[TTx any](t *testing.T, f fixture[TTx], n int) {
	ctx := context.Background()
	if err := gate.New(f.driver, nil).Admit(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 10}); err != nil {
		t.Fatal(err)
	}
	for i, bound := range []time.Duration{time.Nanosecond, 0} { // 0: the default
		g := gate.New(f.driver, &gate.Options{CleanupTimeout: bound})
		first := i * n
		committed, id := 0, first
		for range n {
			id++
			tx := f.begin(t)
			if err := f.insert(ctx, tx, id); err != nil {
				t.Fatal(err)
			}
			if err := g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "a", Fence: 3}); !errors.Is(err, gate.ErrStaleFence) {
				t.Fatalf("Commit of a stale fence = %v", err)
			}
			if err := f.commit(tx); err == nil {
				committed++
			} else if !errors.Is(err, sql.ErrTxDone) && !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("tx.Commit after a refusal = %v, want sql.ErrTxDone or pgx.ErrTxClosed", err)
			}
		}
		rows := f.count(t, `SELECT count(*) FROM items WHERE id > `+strconv.Itoa(first)+` AND id <= `+strconv.Itoa(id))
		if committed != 0 || rows != 0 {
			t.Errorf("CleanupTimeout %v: %d of %d refused transactions committed, %d stale rows landed", bound, committed, n, rows)
		}
	}
}
