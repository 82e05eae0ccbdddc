package gate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// harness is a driver of the one list (internal/dbtest.Drivers) with a gate
// on it and a table of items to write.
type harness[TTx any] struct {
	dbtest.Harness[TTx]
	g *gate.Gate[TTx]
}

func newHarness[TTx any](t *testing.T, dh dbtest.Harness[TTx], opts *gate.Options) *harness[TTx] {
	t.Helper()
	h := &harness[TTx]{Harness: dh, g: gate.New(dh.Driver, opts)}
	h.exec(t, `CREATE TABLE items (id INTEGER PRIMARY KEY, resource TEXT NOT NULL, fence BIGINT NOT NULL, holder TEXT NOT NULL)`)
	return h
}

func (h *harness[TTx]) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if err := h.DBExec(context.Background(), query, args...); err != nil {
		t.Fatalf("exec %s: %v", query, err)
	}
}

func (h *harness[TTx]) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := h.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", query, err)
	}
	return n
}

// write commits one item under token, through Commit in the caller's tx.
func (h *harness[TTx]) write(ctx context.Context, id int, tok fence.Token) error {
	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		return err
	}
	defer h.Driver.Rollback(ctx, tx)
	if err := h.g.Commit(ctx, tx, tok); err != nil {
		return err
	}
	if err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES ($1, $2, $3, $4)`,
		id, tok.Resource, tok.Fence, tok.Holder); err != nil {
		return err
	}
	return h.Driver.Commit(ctx, tx)
}

func (h *harness[TTx]) floor(t *testing.T, resource string) sqlstore.Floor {
	t.Helper()
	f, err := h.g.Floor(context.Background(), resource)
	if err != nil {
		t.Fatalf("floor %s: %v", resource, err)
	}
	return f
}

// forEachDriver runs a rule written once over TTx on every driver, and on
// every profile (dbtest.Profiles: the distributed-SQL one).
func forEachDriver(t *testing.T, sqlBody func(*testing.T, dbtest.Harness[*sql.Tx]), pgxBody func(*testing.T, dbtest.Harness[pgx.Tx])) {
	dbtest.ForEachWithProfiles(t, sqlBody, pgxBody)
}

// forEachSQLDriver runs a database/sql rule (sql.ErrTxDone, a *sql.DB's
// pool size) on every database/sql driver of the list.
func forEachSQLDriver(t *testing.T, fn func(t *testing.T, h *harness[*sql.Tx])) {
	dbtest.ForEach(t, func(t *testing.T, dh dbtest.Harness[*sql.Tx]) { fn(t, newHarness(t, dh, nil)) }, nil)
}

// db is the *sql.DB under a database/sql driver of the list.
func db(h *harness[*sql.Tx]) *sql.DB { return h.Driver.(interface{ DB() *sql.DB }).DB() }

func TestCommitAdmitsEqualRaisesHigherRefusesLower(t *testing.T) {
	forEachDriver(t, testCommitAdmitsEqualRaisesHigherRefusesLower[*sql.Tx], testCommitAdmitsEqualRaisesHigherRefusesLower[pgx.Tx])
}

func testCommitAdmitsEqualRaisesHigherRefusesLower[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	a5 := fence.Token{Resource: "slot", Holder: "a", Fence: 5}
	b7 := fence.Token{Resource: "slot", Holder: "b", Fence: 7}

	if err := h.write(ctx, 1, a5); err != nil {
		t.Fatalf("first fence: %v", err)
	}
	if err := h.write(ctx, 2, a5); err != nil {
		t.Fatalf("equal fence must be admitted: %v", err)
	}
	if err := h.write(ctx, 3, b7); err != nil {
		t.Fatalf("higher fence: %v", err)
	}
	if f := h.floor(t, "slot"); f.Floor != 7 || f.Holder != "b" {
		t.Fatalf("floor = %d by %q, want 7 by b", f.Floor, f.Holder)
	}

	err := h.write(ctx, 4, a5)
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || !errors.Is(err, gate.ErrStaleFence) || errors.Is(err, gate.ErrFenceNotIssued) {
		t.Fatalf("lower fence: got %v, want *StaleFenceError", err)
	}
	if stale.Resource != "slot" || stale.Holder != "a" || stale.Fence != 5 || stale.Floor != 7 || stale.FloorHolder != "b" || stale.Seq <= 0 {
		t.Fatalf("refusal = %+v", stale)
	}
	if n := h.count(t, `SELECT count(*) FROM items WHERE id = 4`); n != 0 {
		t.Fatalf("refused write committed")
	}
	if f := h.floor(t, "slot"); f.Floor != 7 {
		t.Fatalf("refusal changed the floor to %d", f.Floor)
	}
	rejs, err := h.g.Rejections(ctx, gate.RejectionQuery{Resource: "slot"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rejs) != 1 || rejs[0].Seq != stale.Seq || rejs[0].Fence != 5 || rejs[0].Holder != "a" ||
		rejs[0].Floor != 7 || rejs[0].FloorHolder != "b" || rejs[0].At.IsZero() {
		t.Fatalf("rejection log = %+v, want the refusal %+v", rejs, stale)
	}
}

func TestRefusedCommitRollsBackCallerTransaction(t *testing.T) {
	forEachDriver(t, testRefusedCommitRollsBack[*sql.Tx], testRefusedCommitRollsBack[pgx.Tx])
}

func testRefusedCommitRollsBack[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	if err := h.g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 10}); err != nil {
		t.Fatal(err)
	}
	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write before Commit (against the rules) must not commit either.
	if err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES (1, 'r', 3, 'old')`); err != nil {
		t.Fatal(err)
	}
	if err := h.g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "old", Fence: 3}); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("got %v, want stale", err)
	}
	// The caller ignores the error and carries on: the tx is gone.
	txDone := func(err error) bool { return errors.Is(err, sql.ErrTxDone) || errors.Is(err, pgx.ErrTxClosed) }
	if err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES (2, 'r', 3, 'old')`); !txDone(err) {
		t.Fatalf("write after refusal: got %v, want the transaction closed", err)
	}
	if err := h.Driver.Commit(ctx, tx); !txDone(err) {
		t.Fatalf("commit after refusal: got %v, want the transaction closed", err)
	}
	if n := h.count(t, `SELECT count(*) FROM items`); n != 0 {
		t.Fatalf("%d refused writes committed", n)
	}
	rejs, err := h.g.Rejections(ctx, gate.RejectionQuery{})
	if err != nil || len(rejs) != 1 || rejs[0].Fence != 3 {
		t.Fatalf("rejections = %+v (%v)", rejs, err)
	}
}

// A holder that was superseded while it was away comes back with its older
// fence: refused, although it was admitted before.
func TestReentrantOlderFenceRefused(t *testing.T) {
	forEachDriver(t, testReentrantOlderFenceRefused[*sql.Tx], testReentrantOlderFenceRefused[pgx.Tx])
}

func testReentrantOlderFenceRefused[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	a := fence.Token{Resource: "r", Holder: "a", Fence: 1}
	b := fence.Token{Resource: "r", Holder: "b", Fence: 2}
	if err := h.write(ctx, 1, a); err != nil {
		t.Fatal(err)
	}
	if err := h.write(ctx, 2, b); err != nil {
		t.Fatal(err)
	}
	if err := h.write(ctx, 3, a); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("got %v, want stale", err)
	}
	if n := h.count(t, `SELECT count(*) FROM items WHERE holder = 'a'`); n != 1 {
		t.Fatalf("a has %d writes, want 1", n)
	}
}

func TestDoFailingCallbackLeavesFloorRaised(t *testing.T) {
	forEachDriver(t, testDoFailingCallbackLeavesFloorRaised[*sql.Tx], testDoFailingCallbackLeavesFloorRaised[pgx.Tx])
}

func testDoFailingCallbackLeavesFloorRaised[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	if err := h.g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := h.g.Do(ctx, fence.Token{Resource: "r", Holder: "b", Fence: 9}, func(ctx context.Context, tx TTx) error {
		if err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES (1, 'r', 9, 'b')`); err != nil {
			return err
		}
		return boom // half-way
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the callback's error", err)
	}
	if n := h.count(t, `SELECT count(*) FROM items`); n != 0 {
		t.Fatal("the failed callback's write committed")
	}
	if f := h.floor(t, "r"); f.Floor != 9 || f.Holder != "b" {
		t.Fatalf("floor = %d by %s, want 9 by b", f.Floor, f.Holder)
	}
	if err := h.write(ctx, 2, fence.Token{Resource: "r", Holder: "a", Fence: 4}); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("older holder after the failed attempt: got %v, want stale", err)
	}
}

func TestDoCommitsAndRefuses(t *testing.T) {
	forEachDriver(t, testDoCommitsAndRefuses[*sql.Tx], testDoCommitsAndRefuses[pgx.Tx])
}

func testDoCommitsAndRefuses[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	insert := func(id int, tok fence.Token) error {
		return h.g.Do(ctx, tok, func(ctx context.Context, tx TTx) error {
			err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES ($1, $2, $3, $4)`,
				id, tok.Resource, tok.Fence, tok.Holder)
			return err
		})
	}
	if err := insert(1, fence.Token{Resource: "r", Holder: "b", Fence: 2}); err != nil {
		t.Fatal(err)
	}
	called := false
	err := h.g.Do(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 1}, func(context.Context, TTx) error {
		called = true
		return nil
	})
	if !errors.Is(err, gate.ErrStaleFence) || called {
		t.Fatalf("Do with a stale fence = %v (callback ran: %v)", err, called)
	}
	if n := h.count(t, `SELECT count(*) FROM items`); n != 1 {
		t.Fatalf("%d items, want 1", n)
	}
}

func TestVerifyIssued(t *testing.T) {
	forEachDriver(t, testVerifyIssued[*sql.Tx], testVerifyIssued[pgx.Tx])
}

func testVerifyIssued[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, &gate.Options{VerifyIssued: true})
	// Issue fence 3 to "a" the way the coordinator records it.
	grant := func(holder string, fence int64, replace bool) {
		t.Helper()
		err := h.Driver.InTx(ctx, func(ex sqlstore.Executor) error {
			_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
				Resource: "r", Holder: holder, Fence: fence, RequestID: "req", TTL: time.Minute, Replace: replace})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	grant("a", 3, false)

	forged := fence.Token{Resource: "r", Holder: "a", Fence: 1000}
	err := h.write(ctx, 1, forged)
	var stale *gate.StaleFenceError
	if !errors.Is(err, gate.ErrFenceNotIssued) || !errors.As(err, &stale) || !stale.NotIssued {
		t.Fatalf("forged fence: got %v, want ErrFenceNotIssued", err)
	}
	if _, err := h.g.Floor(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("a forged fence created a floor: %v", err)
	}
	if err := h.write(ctx, 2, fence.Token{Resource: "r", Holder: "mallory", Fence: 3}); !errors.Is(err, gate.ErrFenceNotIssued) {
		t.Fatalf("issued fence, wrong holder: got %v", err)
	}
	if err := h.write(ctx, 3, fence.Token{Resource: "r", Holder: "a", Fence: 3}); err != nil {
		t.Fatalf("issued fence: %v", err)
	}
	grant("b", 4, true)
	if err := h.write(ctx, 4, fence.Token{Resource: "r", Holder: "b", Fence: 4}); err != nil {
		t.Fatalf("next generation: %v", err)
	}
	err = h.write(ctx, 5, fence.Token{Resource: "r", Holder: "a", Fence: 3})
	if !errors.Is(err, gate.ErrStaleFence) || errors.Is(err, gate.ErrFenceNotIssued) {
		t.Fatalf("superseded fence: got %v, want stale (not 'never issued')", err)
	}
	if f := h.floor(t, "r"); f.Floor != 4 {
		t.Fatalf("floor = %d, want 4", f.Floor)
	}
	if n := h.count(t, `SELECT count(*) FROM items`); n != 2 {
		t.Fatalf("%d items, want 2", n)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	forEachDriver(t, testBadInputChangesNothing[*sql.Tx], testBadInputChangesNothing[pgx.Tx])
}

func testBadInputChangesNothing[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	bad := []fence.Token{
		{Resource: "", Holder: "a", Fence: 1},
		{Resource: strings.Repeat("x", fence.MaxNameLen+1), Holder: "a", Fence: 1},
		{Resource: "bad\xffutf8", Holder: "a", Fence: 1},
		{Resource: "nul\x00", Holder: "a", Fence: 1},
		{Resource: "r", Holder: "", Fence: 1},
		{Resource: "r", Holder: "a", Fence: 0},
		{Resource: "r", Holder: "a", Fence: -4},
	}
	for _, tok := range bad {
		tx, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = h.g.Commit(ctx, tx, tok)
		var inv *fence.InvalidInputError
		if !errors.Is(err, fence.ErrInvalidInput) || !errors.As(err, &inv) || inv.Reason == "" {
			t.Errorf("Commit(%q) = %v, want ErrInvalidInput", tok, err)
		}
		_ = h.Driver.Rollback(ctx, tx)
		if err := h.g.Admit(ctx, tok); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Admit(%q) = %v, want ErrInvalidInput", tok, err)
		}
		if err := h.g.Do(ctx, tok, func(context.Context, TTx) error { t.Error("callback ran"); return nil }); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Do(%q) = %v, want ErrInvalidInput", tok, err)
		}
	}
	if n := h.count(t, `SELECT count(*) FROM fencegate_floor`); n != 0 {
		t.Fatalf("bad input wrote %d floors", n)
	}
	if n := h.count(t, `SELECT count(*) FROM fencegate_rejection`); n != 0 {
		t.Fatalf("bad input wrote %d rejections", n)
	}
}

// Many writers with mixed fences on one hot resource: afterwards the data,
// in commit order, carries non-decreasing fences, and every refusal is in
// the log. Commit order is the order of the item ids: each id is drawn after
// Commit has locked the floor row, which is held until the transaction ends.
func TestHammerOneResourcePostgres(t *testing.T) {
	ctx := context.Background()
	pg := dbtest.Find(t, "postgres-sql")
	h := newHarness(t, pg.SQL(t, pg.DSN(t)), nil)
	h.exec(t, `DROP TABLE items`)
	h.exec(t, `CREATE TABLE items (id bigserial PRIMARY KEY, resource text, fence bigint, holder text)`)
	db(h).SetMaxOpenConns(24)

	const workers, perWorker = 16, 40
	var base atomic.Int64 // the "current generation", moving up
	base.Store(10)
	var refused, admitted atomic.Int64
	var mu sync.Mutex
	refusedSet := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				n := base.Load() - int64((w+i)%3) // some current, some one or two behind
				if (w*perWorker+i)%7 == 0 {
					n = base.Add(1) // a new generation starts
				}
				tok := fence.Token{Resource: "hot", Holder: fmt.Sprintf("w%d", w), Fence: n}
				err := h.g.Do(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO items (resource, fence, holder) VALUES ($1, $2, $3)`, tok.Resource, tok.Fence, tok.Holder)
					return err
				})
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, gate.ErrStaleFence):
					refused.Add(1)
					mu.Lock()
					refusedSet[tok.String()]++
					mu.Unlock()
				default:
					t.Errorf("write %s: %v", tok, err)
				}
			}
		})
	}
	wg.Wait()

	rows, err := db(h).Query(`SELECT fence FROM items ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last, n int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		if f < last {
			t.Fatalf("write %d carries fence %d after a committed write under %d", n, f, last)
		}
		last, n = f, n+1
	}
	if n != admitted.Load() {
		t.Fatalf("%d items, but %d writes were admitted", n, admitted.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("the workload refused nothing; it does not test refusal")
	}
	rejs, err := h.g.Rejections(ctx, gate.RejectionQuery{Resource: "hot", Limit: workers * perWorker})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rejs)) != refused.Load() {
		t.Fatalf("rejection log has %d records, %d writes were refused", len(rejs), refused.Load())
	}
	for _, r := range rejs {
		key := fence.Token{Resource: r.Resource, Holder: r.Holder, Fence: r.Fence}.String()
		if refusedSet[key] == 0 {
			t.Fatalf("logged refusal %+v that no writer saw", r)
		}
		if r.Fence >= r.Floor {
			t.Fatalf("logged refusal %+v is not below its floor", r)
		}
		refusedSet[key]--
	}
	t.Logf("%d admitted, %d refused, final fence %d", admitted.Load(), refused.Load(), last)
}

// With a pool of one connection the caller's transaction holds the only
// connection: Commit (admitting or refusing, and logging the refusal) must
// never wait for a second one.
func TestOneConnectionPool(t *testing.T) {
	forEachSQLDriver(t, func(t *testing.T, h *harness[*sql.Tx]) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db(h).SetMaxOpenConns(1)
		for i := range 20 { // enough for statement caches to warm up mid-way
			if err := h.write(ctx, 2*i, fence.Token{Resource: "r", Holder: "b", Fence: 2}); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			if err := h.write(ctx, 2*i+1, fence.Token{Resource: "r", Holder: "a", Fence: 1}); !errors.Is(err, gate.ErrStaleFence) {
				t.Fatalf("stale write %d: %v", i, err)
			}
		}
		if n := h.count(t, `SELECT count(*) FROM items`); n != 20 {
			t.Fatalf("%d items, want 20", n)
		}
		if n := h.count(t, `SELECT count(*) FROM fencegate_rejection`); n != 20 {
			t.Fatalf("%d rejections, want 20", n)
		}
	})
}
