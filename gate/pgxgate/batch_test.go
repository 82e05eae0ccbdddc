package pgxgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// pipelineHarness is a migrated pgx database (each test runs on pgx under
// every exec mode of internal/dbtest.Drivers) with a table to write and a
// sequence to prove that a statement never ran (nextval is never rolled
// back, so a rolled-back call would still show).
func pipelineHarness(t *testing.T, h dbtest.Harness[pgx.Tx], opts *gate.Options) (*pgxv5.Driver, *gate.Gate[pgx.Tx]) {
	t.Helper()
	d := h.Driver.(*pgxv5.Driver)
	if _, err := d.Pool().Exec(context.Background(), `
CREATE TABLE items (id int PRIMARY KEY, fence bigint NOT NULL);
CREATE SEQUENCE probe;`); err != nil {
		t.Fatal(err)
	}
	return d, gate.New(d, opts)
}

func pgCount(t *testing.T, d *pgxv5.Driver, query string) int64 {
	t.Helper()
	var n int64
	if err := d.Pool().QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// writeBatch queues an insert of item id and a probe of whether anything
// after the fence ran.
func writeBatch(id int, fence int64) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO items (id, fence) VALUES ($1, $2)`, id, fence)
	b.Queue(`SELECT nextval('probe')`)
	return b
}

func TestCommitBatchAdmitsAndCommits(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		a := fence.Token{Resource: "r", Holder: "a", Fence: 5}
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), a, writeBatch(1, 5)); err != nil {
			t.Fatalf("first write: %v", err)
		}
		// Equal fence again, with a result read through a callback.
		b := &pgx.Batch{}
		var got int64
		b.Queue(`INSERT INTO items (id, fence) VALUES (2, 5) RETURNING fence`).QueryRow(func(row pgx.Row) error { return row.Scan(&got) })
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), a, b); err != nil || got != 5 {
			t.Fatalf("equal fence: %v (returned %d)", err, got)
		}
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "b", Fence: 9}, writeBatch(3, 9)); err != nil {
			t.Fatalf("higher fence: %v", err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 3 {
			t.Fatalf("%d items, want 3", n)
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 9 || f.Holder != "b" {
			t.Fatalf("floor = %+v, %v; want 9 by b", f, err)
		}
	})
}

func TestCommitBatchRefusalLeavesNoWriteBehind(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 10}); err != nil {
			t.Fatal(err)
		}
		stale := fence.Token{Resource: "r", Holder: "old", Fence: 3}
		err := pgxgate.CommitBatch(ctx, g, d.Pool(), stale, writeBatch(1, 3))
		var se *gate.StaleFenceError
		if !errors.As(err, &se) || !errors.Is(err, gate.ErrStaleFence) || errors.Is(err, gate.ErrFenceNotIssued) {
			t.Fatalf("got %v, want *StaleFenceError", err)
		}
		if se.Floor != 10 || se.FloorHolder != "new" || se.Fence != 3 || se.Holder != "old" || se.Seq <= 0 {
			t.Fatalf("refusal = %+v", se)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Fatalf("the refused write committed %d rows", n)
		}
		// nextval is not transactional: had the probe run, the sequence would
		// have moved even though the pipeline rolled back.
		if called := pgCount(t, d, `SELECT count(*) FROM probe WHERE is_called`); called != 0 {
			t.Fatal("a statement after the refused fence ran")
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 10 {
			t.Fatalf("floor = %+v, %v; want 10", f, err)
		}
		rejs, err := g.Rejections(ctx, gate.RejectionQuery{Resource: "r"})
		if err != nil || len(rejs) != 1 || rejs[0].Seq != se.Seq || rejs[0].Floor != 10 {
			t.Fatalf("rejection log = %+v, %v", rejs, err)
		}
		// The pool still works after the refusal (the connection came back idle).
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "new", Fence: 10}, writeBatch(2, 10)); err != nil {
			t.Fatalf("after a refusal: %v", err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 1 {
			t.Fatalf("%d items, want 1", n)
		}
	})
}

// A failing statement of the caller's rolls back the whole pipeline, the
// floor raise included.
func TestCommitBatchIsAtomic(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "a", Fence: 1}, writeBatch(1, 1)); err != nil {
			t.Fatal(err)
		}
		err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "b", Fence: 2}, writeBatch(1, 2)) // duplicate key
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "23505" {
			t.Fatalf("got %v, want a unique violation", err)
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 1 {
			t.Fatalf("floor = %+v, %v; the failed pipeline's raise committed", f, err)
		}
		if n := pgCount(t, d, `SELECT last_value FROM probe`); n != 1 {
			t.Fatalf("probe = %d, want 1 (only the first pipeline's)", n)
		}
	})
}

func TestCommitBatchInTx(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 10}); err != nil {
			t.Fatal(err)
		}
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (1, 3)`); err != nil {
			t.Fatal(err)
		}
		if err := pgxgate.CommitBatch(ctx, g, tx, fence.Token{Resource: "r", Holder: "old", Fence: 3}, writeBatch(2, 3)); !errors.Is(err, gate.ErrStaleFence) {
			t.Fatalf("got %v, want stale", err)
		}
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Fatalf("commit after refusal: %v, want ErrTxClosed", err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Fatalf("%d refused writes committed", n)
		}
	})
}

func TestCommitBatchVerifyIssued(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, &gate.Options{VerifyIssued: true})
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 3, RequestID: "q", TTL: time.Minute})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "a", Fence: 1000}, writeBatch(1, 1000))
		if !errors.Is(err, gate.ErrFenceNotIssued) {
			t.Fatalf("forged fence: got %v, want ErrFenceNotIssued", err)
		}
		for range 2 { // the first raises the floor, the second keeps it
			if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "a", Fence: 3}, nil); err != nil {
				t.Fatalf("issued fence: %v", err)
			}
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Fatalf("%d items, want 0", n)
		}
	})
}

// An equal-fence writer (the path that does not rewrite the floor row) still
// locks the floor until its transaction ends, so a higher fence cannot
// commit before it: a write under N never commits after one under N+1.
func TestEqualFenceHoldsFloorAgainstRaise(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		a := fence.Token{Resource: "r", Holder: "a", Fence: 5}
		if err := g.Admit(ctx, a); err != nil {
			t.Fatal(err)
		}
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := g.Commit(ctx, tx, a); err != nil { // equal: the no-write path
			t.Fatal(err)
		}
		raise := func() error {
			return pgx.BeginFunc(ctx, d.Pool(), func(tx2 pgx.Tx) error {
				if _, err := tx2.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
					return err
				}
				return g.Commit(ctx, tx2, fence.Token{Resource: "r", Holder: "b", Fence: 6})
			})
		}
		if err := raise(); !sqlstore.IsRetryable(err) {
			t.Fatalf("a higher fence got past an equal-fence writer in flight: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := raise(); err != nil {
			t.Fatalf("raise after the writer ended: %v", err)
		}
	})
}
