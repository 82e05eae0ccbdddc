package handover_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/handover"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// Do's write and hand-over are one transaction: when the write fails,
// nothing is released or granted.
func TestDoRollsBackWithTheWrite(t *testing.T) {
	dbtest.ForEachWithProfiles(t,
		func(t *testing.T, h dbtest.Harness[*sql.Tx]) { t.Parallel(); testDoRollsBack(t, h) },
		func(t *testing.T, h dbtest.Harness[pgx.Tx]) { t.Parallel(); testDoRollsBack(t, h) })
}

func testDoRollsBack[TTx any](t *testing.T, h dbtest.Harness[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	coord := lease.NewCoordinator(h.Driver, nil)
	g := gate.New(h.Driver, nil)
	a, _ := lease.NewClient(&lease.ClientOptions{Holder: "a"})
	b, _ := lease.NewClient(&lease.ClientOptions{Holder: "b"})
	la, err := coord.AcquireWait(ctx, a, "r")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := coord.AcquireWait(ctx, b, "r")
		got <- result{l, err}
	}()
	waitUntilQueued(t, ctx, coord, "r", 1)

	boom := errors.New("the write failed")
	off, err := handover.Do(ctx, g, coord, la, func(context.Context, TTx) error { return boom })
	if !errors.Is(err, boom) || off != (lease.HandOver{}) {
		t.Fatalf("Do = %+v, %v; want the write's error", off, err)
	}
	if st, err := coord.Status(ctx, "r"); err != nil || st.Holder != "a" || st.Fence != la.Token().Fence {
		t.Fatalf("after the failed write the lease is %+v, %v; want still a's", st, err)
	}
	if la.Expired() {
		t.Error("a's lease was marked released though nothing committed")
	}
	if ws, err := coord.Waiters(ctx, "r"); err != nil || !slices.ContainsFunc(ws, func(w sqlstore.Waiter) bool { return w.Holder == "b" }) {
		t.Errorf("b's place left the queue though nothing committed: %+v, %v", ws, err)
	}
	off, err = handover.Do(ctx, g, coord, la, nil)
	if err != nil || off.To != "b" {
		t.Fatalf("Do = %+v, %v; want handed to b", off, err)
	}
	if w := <-got; w.err != nil || w.l.Token().Fence != off.Fence {
		t.Fatalf("b got %v, %v; want fence %d", w.l, w.err, off.Fence)
	}
}

// Do refuses what it cannot hand over before touching the database: a
// missing lease, and a set's lease.
func TestDoRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	store := dbtest.SQLite(t)
	coord := lease.NewCoordinator(store, nil)
	g := gate.New(store, nil)
	if _, err := handover.Do[*sql.Tx](ctx, g, coord, nil, nil); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("Do without a lease: %v; want ErrInvalidInput", err)
	}
	a, _ := lease.NewClient(&lease.ClientOptions{Holder: "a"})
	l, err := coord.AcquireWaitSet(ctx, a, []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handover.Do(ctx, g, coord, l, nil); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("Do of a set's lease: %v; want ErrInvalidInput", err)
	}
}
