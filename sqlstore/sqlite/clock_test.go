package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// stepClock emulates a step of the host's clock by d: every time fencegate
// stored (the leases' and the clock's high-water mark) moves by -d, which
// is what the wall clock moving by d looks like from the rows.
func stepClock(t *testing.T, d *sqlite.Driver, step time.Duration) {
	t.Helper()
	us := -step.Microseconds()
	if _, err := d.DB().Exec(`
UPDATE fencegate_lease SET granted_at = granted_at + ?1, expires_at = expires_at + ?1;
UPDATE fencegate_clock SET hw = hw + ?1`, us); err != nil {
		t.Fatal(err)
	}
}

// The coordinator's clock on SQLite never runs backwards: a lease judged
// expired stays expired when the host's clock steps back, and the clock
// follows a forward step at once.
func TestClockNeverRunsBackwards(t *testing.T) {
	ctx := context.Background()
	d := dbtest.SQLite(t)
	c := lease.NewCoordinator(d, nil)
	const ttl = 10 * time.Second

	a, err := c.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "a", RequestID: "a1", TTL: ttl})
	if err != nil || !a.OK {
		t.Fatalf("acquire a: %+v, %v", a, err)
	}
	renew := func() lease.RenewOutcome {
		t.Helper()
		out, err := c.Renew(ctx, &lease.RenewRequest{Resource: "r", Holder: "a", Fence: a.Grant.Fence, RequestID: "a-renew", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Forward 20 s: the lease expires, and its holder is told so.
	stepClock(t, d, 20*time.Second)
	if out := renew(); out.OK || !out.Expired {
		t.Fatalf("renewal after the lease expired: %+v, want expired", out)
	}
	// Back 20 s: the wall clock says the lease is live again, but the
	// coordinator judged it expired already.
	stepClock(t, d, -20*time.Second)
	if out := renew(); out.OK || !out.Expired {
		t.Fatalf("renewal after the clock stepped back: %+v, want expired (the lease came back to life)", out)
	}
	b, err := c.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "b", RequestID: "b1", TTL: ttl})
	if err != nil || !b.OK {
		t.Fatalf("rival after the clock stepped back: %+v, %v; want granted", b, err)
	}
	// While the wall clock is behind, the coordinator's stands still: b's
	// term runs from the high-water mark, never longer than asked.
	st, err := c.Status(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if st.Remaining > ttl || st.Remaining <= 0 {
		t.Fatalf("b's remaining term %v, want in (0, %v]", st.Remaining, ttl)
	}
	// Forward 40 s, past the mark: the clock follows the wall clock again.
	stepClock(t, d, 40*time.Second)
	cOut, err := c.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "c", RequestID: "c1", TTL: ttl})
	if err != nil || !cOut.OK || cOut.Grant.Fence <= b.Grant.Fence {
		t.Fatalf("acquire after b expired: %+v, %v", cOut, err)
	}
}
