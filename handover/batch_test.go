package handover_test

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
	"github.com/fencegate/fencegate/handover"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// pgxItems is a migrated pgx database with a table to write, and its gate.
func pgxItems(t *testing.T, h dbtest.Harness[pgx.Tx]) (*pgxv5.Driver, *gate.Gate[pgx.Tx]) {
	t.Helper()
	d := h.Driver.(*pgxv5.Driver)
	if _, err := d.Pool().Exec(context.Background(), `CREATE TABLE items (id int PRIMARY KEY, fence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return d, gate.New(d, nil)
}

// writeBatch queues an insert of item id.
func writeBatch(id int, fence int64) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO items (id, fence) VALUES ($1, $2)`, id, fence)
	return b
}

// waitUntilQueued polls the queue until n waiters stand in it.
func waitUntilQueued(t *testing.T, ctx context.Context, coord *lease.Coordinator, r string, n int) {
	t.Helper()
	for {
		ws, err := coord.Waiters(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d waiters queued, want %d", len(ws), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// CommitBatch's write, release and grant are one pipelined
// transaction: a batch that fails grants nothing, and one that commits
// hands the resource to the waiter, which learns of it (from the
// announcement: it waits in a Coordinator of its own) with the new fence.
func TestCommitBatch(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, g := pgxItems(t, h)
		coord, other := lease.NewCoordinator(d, nil), lease.NewCoordinator(d, nil)
		a, _ := lease.NewClient(&lease.ClientOptions{Holder: "a"})
		b, _ := lease.NewClient(&lease.ClientOptions{Holder: "b"})
		req, _ := a.BeginAcquire("r")
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		la, err := a.CompleteAcquire(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   *lease.Lease
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := other.AcquireWait(ctx, b, "r")
			got <- result{l, err}
		}()
		waitUntilQueued(t, ctx, coord, "r", 1)

		was := la.Token().Fence
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), la.Token(), writeBatch(1, was)); err != nil {
			t.Fatal(err)
		}
		_, err = handover.CommitBatch(ctx, g, d.Pool(), coord, la, writeBatch(1, was)) // duplicate key
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "23505" {
			t.Fatalf("got %v, want a unique violation", err)
		}
		if st, err := coord.Status(ctx, "r"); err != nil || st.Holder != "a" {
			t.Fatalf("after the failed batch: %+v, %v; want a's lease still", st, err)
		}
		off, err := handover.CommitBatch(ctx, g, d.Pool(), coord, la, writeBatch(2, was))
		if err != nil || off.To != "b" || off.Fence <= was {
			t.Fatalf("hand-over = %+v, %v; want b under a fence above %d", off, err, was)
		}
		w := <-got
		if w.err != nil || w.l.Token() != (fence.Token{Resource: "r", Holder: "b", Fence: off.Fence}) {
			t.Fatalf("b got %v, %v; want fence %d", w.l, w.err, off.Fence)
		}
		var n int64
		if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM items`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d items, want 2", n)
		}
	})
}
