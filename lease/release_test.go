package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// Issue 15 saw a false from Release under 16 concurrent acquirers. A release
// is an UPDATE of the lease row, so it queues behind every acquisition
// holding that row locked (the stepwise transaction holds it for all its
// round trips). That is not where a false comes from: an acquisition that
// only locked the row leaves it unchanged, so Postgres does not check the
// release's condition again when the lock comes free, and a release that
// found the lease live when it arrived releases it, even if the term ran
// out while it waited. (Only a changed row, a successor's grant, is checked
// again, and a successor exists only after the lease expired.) So a false
// means the lease was over before the release reached the database.
func TestReleaseQueuedBehindAnAcquisitionStillReleases(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Postgres(t)
	coord := NewCoordinator(d, nil)
	// A term long enough that the release surely reaches the row while the
	// lease is live, on a loaded machine too.
	a := newClient(t, "agent-a", ClientOptions{TTL: 3 * time.Second})
	l := acquire(t, a, coord, "r")

	// A concurrent acquisition's transaction, between its locking read and
	// its commit.
	blocker, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	var pid int
	if err := blocker.QueryRowContext(ctx,
		`SELECT pg_backend_pid() FROM fencegate_lease WHERE resource = 'r' FOR UPDATE`).Scan(&pid); err != nil {
		t.Fatal(err)
	}

	type result struct {
		ok  bool
		err error
	}
	released := make(chan result, 1)
	go func() {
		ok, err := coord.Release(ctx, l.Token())
		released <- result{ok, err}
	}()
	// Wait until the release queues on the row lock: the server says so.
	for {
		var waiting bool
		err := d.DB().QueryRowContext(ctx,
			`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case r := <-released:
			t.Fatalf("Release = %v, %v without waiting for the locked row", r.ok, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	waitUntilFree(t, coord, "r") // the term runs out while the release waits
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-released; r.err != nil || !r.ok {
		t.Fatalf("Release queued behind an acquisition = %v, %v; want true, nil", r.ok, r.err)
	}
	if st, err := coord.Status(ctx, "r"); err != nil || st.Held || !st.Released || st.Fence != l.Token().Fence {
		t.Errorf("Status = %+v, %v; want the lease released", st, err)
	}
}

// ReleaseStrict says why a release released nothing, for each reason, in
// a way errors.Is and errors.As read.
func TestReleaseStrictSaysWhy(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: time.Minute})
		b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})
		short := newClient(t, "agent-s", ClientOptions{TTL: 50 * time.Millisecond})
		check := func(what string, token fence.Token, reason ReleaseReason, heldBy string) {
			t.Helper()
			err := coord.ReleaseStrict(ctx, token)
			var nr *ReleaseError
			if !errors.Is(err, ErrNotReleased) || !errors.As(err, &nr) {
				t.Errorf("%s: ReleaseStrict = %v, want a *ReleaseError matching ErrNotReleased", what, err)
				return
			}
			if nr.Reason != reason {
				t.Errorf("%s: Reason = %v, want %v", what, nr.Reason, reason)
			}
			if nr.Resource != token.Resource || nr.Fence != token.Fence || nr.Holder != token.Holder || nr.HeldBy != heldBy {
				t.Errorf("%s: %+v", what, nr)
			}
			t.Logf("%s: %v", what, err)
		}

		check("never leased", fence.Token{Resource: "job", Holder: "agent-a", Fence: 1}, ReleaseNeverHeld, "")

		l := acquire(t, a, coord, "job")
		check("another holder's token", fence.Token{Resource: "job", Holder: "agent-b", Fence: l.Token().Fence}, ReleaseNeverHeld, "agent-a")
		check("a fence above every grant", fence.Token{Resource: "job", Holder: "agent-a", Fence: l.Token().Fence + 1}, ReleaseNeverHeld, "agent-a")
		if err := coord.ReleaseStrict(ctx, l.Token()); err != nil {
			t.Fatalf("ReleaseStrict of a live lease = %v", err)
		}
		check("released twice", l.Token(), ReleaseAlreadyReleased, "agent-a")

		l = acquire(t, short, coord, "slot")
		waitUntilFree(t, coord, "slot")
		check("expired", l.Token(), ReleaseExpired, "agent-s")

		acquire(t, b, coord, "slot")
		check("superseded", l.Token(), ReleaseSuperseded, "agent-b")
	})
}
