package pgxgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
)

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

// CommitBatchHandOver's write, release and grant are one pipelined
// transaction: a batch that fails grants nothing, and one that commits
// hands the resource to the waiter, which learns of it (from the
// announcement: it waits in a Coordinator of its own) with the new fence.
func TestCommitBatchHandOver(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, g := pipelineHarness(t, h, nil)
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

		fence := la.Token().Fence
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), la.Token(), writeBatch(1, fence)); err != nil {
			t.Fatal(err)
		}
		_, err = pgxgate.CommitBatchHandOver(ctx, g, d.Pool(), coord, la, writeBatch(1, fence)) // duplicate key
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "23505" {
			t.Fatalf("got %v, want a unique violation", err)
		}
		if st, err := coord.Status(ctx, "r"); err != nil || st.Holder != "a" {
			t.Fatalf("after the failed batch: %+v, %v; want a's lease still", st, err)
		}
		off, err := pgxgate.CommitBatchHandOver(ctx, g, d.Pool(), coord, la, writeBatch(2, fence))
		if err != nil || off.To != "b" || off.Fence <= fence {
			t.Fatalf("hand-over = %+v, %v; want b under a fence above %d", off, err, fence)
		}
		w := <-got
		if w.err != nil || w.l.Token() != (gate.Token{Resource: "r", Holder: "b", Fence: off.Fence}) {
			t.Fatalf("b got %v, %v; want fence %d", w.l, w.err, off.Fence)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 2 {
			t.Fatalf("%d items, want 2", n)
		}
	})
}
