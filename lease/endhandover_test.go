package lease

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// waitFor starts an AcquireWait of client on r and returns its place in
// the queue once it has one, and the channel of its result.
func waitFor(t *testing.T, ctx context.Context, coord *Coordinator, client *Client, r string) (int64, <-chan waitResult) {
	t.Helper()
	queued := make(chan int64, 1)
	coord.waits.hooks = &waitHooks{queued: func(res string, seq int64) {
		if res == r {
			queued <- seq
		}
	}}
	got := make(chan waitResult, 1)
	go func() {
		l, err := coord.AcquireWait(ctx, client, r)
		got <- waitResult{l, err}
	}()
	select {
	case seq := <-queued:
		return seq, got
	case res := <-got:
		t.Fatalf("AcquireWait returned before it queued: %v, %v", res.l, res.err)
	}
	return 0, nil
}

// A hand-over in the holder's transaction moves nothing until that
// transaction commits (a grant outside it would show here as b's lease
// while a's write is still open), and then grants the first waiter a new
// fence whose holder-side deadline lies inside the coordinator's term. The
// waiter waits in a Coordinator of its own, as in another process: it
// learns of the grant from the announcement (Postgres, which carries the
// generation) or from its next touch (the others, which read it).
func TestHandOverCommitsWithTheWrite(t *testing.T) {
	forEachDriver(t, testHandOverCommitsWithTheWrite[*sql.Tx], testHandOverCommitsWithTheWrite[pgx.Tx])
}

func testHandOverCommitsWithTheWrite[TTx any](t *testing.T, h harness[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	coord := NewCoordinator(h.Driver, nil)
	g := gate.New(h.Driver, nil)
	a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})
	r := resourceName(t)
	la := acquire(t, a, coord, r)
	seq, got := waitFor(t, ctx, NewCoordinator(h.Driver, nil), b, r)

	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Driver.Rollback(context.Background(), tx) }()
	if err := g.Commit(ctx, tx, la.Token()); err != nil {
		t.Fatal(err)
	}
	tok := la.Token()
	res, err := h.Driver.UnwrapExecutor(tx).LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{Resource: r, Holder: tok.Holder, Fence: tok.Fence})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Released || res.Waiter != seq || res.Lease.Holder != "b" || res.Lease.Fence <= tok.Fence {
		t.Fatalf("hand-over = %+v; want released to b's place %d under a fence above %d", res, seq, tok.Fence)
	}
	if first := res.Lease.ExpiresAt.Sub(res.Lease.GrantedAt); first > coord.waiterTTL {
		t.Errorf("first term %v is longer than the WaiterTTL %v", first, coord.waiterTTL)
	}
	st, err := coord.Status(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Holder != "a" || st.Fence != tok.Fence {
		t.Fatalf("before the write's commit the lease is %+v; want a's, fence %d", st, tok.Fence)
	}
	select {
	case w := <-got:
		t.Fatalf("the waiter returned before the hand-over committed: %v, %v", w.l, w.err)
	default:
	}
	if err := h.Driver.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	after := b.clock.Now()
	off, err := coord.EndHandOver(la, res)
	if err != nil || off != (HandOver{Released: true, To: "b", Fence: res.Lease.Fence}) {
		t.Fatalf("EndHandOver = %+v, %v", off, err)
	}
	if !la.Expired() {
		t.Error("a's lease is not marked released")
	}
	w := <-got
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.l.Token() != (fence.Token{Resource: r, Holder: "b", Fence: res.Lease.Fence}) {
		t.Fatalf("b got %v; want the handed-over fence %d", w.l.Token(), res.Lease.Fence)
	}
	// The coordinator's term ends (ExpiresAt-Now) after its clock read Now,
	// which came before the commit returned: a holder deadline past
	// after+that would outlast the coordinator's term.
	if limit := after.Add(res.Lease.ExpiresAt.Sub(res.Lease.Now)); w.l.Deadline().After(limit) {
		t.Errorf("b's deadline %v is past the coordinator's term (at most %v on b's clock)", w.l.Deadline(), limit)
	}
	if err := g.Do(ctx, w.l.Token(), func(context.Context, TTx) error { return nil }); err != nil {
		t.Errorf("b's fence is refused: %v", err)
	}
	if err := g.Do(ctx, tok, func(context.Context, TTx) error { return nil }); !errors.Is(err, gate.ErrStaleFence) {
		t.Errorf("a's fence after the hand-over: %v; want ErrStaleFence", err)
	}
}

// A waiter that died after its last touch, its place still live, is handed
// the resource for no longer than its place would have lasted (the
// WaiterTTL), not the hour it asked for: the next waiter is granted once
// that first term runs out.
func TestHandOverToADeadWaiterIsBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const waiterTTL = 300 * time.Millisecond
		coord := NewCoordinator(store, &CoordinatorOptions{WaiterTTL: waiterTTL})
		a, c := newClient(t, "a", ClientOptions{}), newClient(t, "c", ClientOptions{})
		r := resourceName(t)
		la := acquire(t, a, coord, r)
		// The dead waiter: a place that was touched once and never again.
		if _, err := store.Executor().WaiterAdd(ctx, &sqlstore.WaiterAddParams{
			Resource: r, Holder: "dead", TTL: waiterTTL, RequestID: newRequestID(), Term: time.Hour,
		}); err != nil {
			t.Fatal(err)
		}
		var res sqlstore.LeaseHandOverResult
		tok := la.Token()
		err := store.InTx(ctx, func(ex sqlstore.Executor) (err error) {
			res, err = ex.LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{Resource: r, Holder: tok.Holder, Fence: tok.Fence})
			return err
		})
		if err != nil || res.Lease.Holder != "dead" {
			t.Fatalf("hand-over = %+v, %v; want the dead waiter granted", res, err)
		}
		if first := res.Lease.ExpiresAt.Sub(res.Lease.GrantedAt); first > waiterTTL {
			t.Fatalf("the dead waiter's first term is %v; want at most the WaiterTTL %v", first, waiterTTL)
		}
		lc, err := coord.AcquireWait(ctx, c, r)
		if err != nil {
			t.Fatalf("the next waiter was not granted after the dead one's first term: %v", err)
		}
		if lc.Token().Fence <= res.Lease.Fence {
			t.Errorf("c's fence %d is not above the dead waiter's %d", lc.Token().Fence, res.Lease.Fence)
		}
	})
}
