package lease

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

func TestAcquireRenewRelease(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 10 * time.Second})
		a := newClient(t, "agent-a", ClientOptions{ClockSkew: 100 * time.Millisecond})

		req, _ := a.BeginAcquire("deploy-slot")
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		g := out.Grant
		if g.Resource != "deploy-slot" || g.Holder != "agent-a" || g.RequestID != req.RequestID || g.Fence < 1 {
			t.Errorf("grant %+v", g)
		}
		if g.TTL != 10*time.Second-store.ClockPrecision() {
			t.Errorf("grant TTL %v, want the default term less the clock's tick", g.TTL)
		}
		l, err := a.CompleteAcquire(req, g)
		if err != nil {
			t.Fatal(err)
		}
		if rem := l.Remaining(); rem <= 9*time.Second || rem > 10*time.Second {
			t.Errorf("Remaining = %v", rem)
		}
		if f := floorOf(t, store, "deploy-slot"); f.Floor != g.Fence || f.Holder != "agent-a" {
			t.Errorf("co-located Acquire left floor %+v, want fence %d", f, g.Fence)
		}

		st, err := coord.Status(ctx, "deploy-slot")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held || st.Holder != "agent-a" || st.Fence != g.Fence || st.Remaining <= 0 || !st.ExpiresAt.After(st.GrantedAt) {
			t.Errorf("Status %+v", st)
		}

		rreq, _ := a.BeginRenewal(l)
		rreq.TTL = 20 * time.Second
		rout, err := coord.Renew(ctx, rreq)
		if err != nil || !rout.OK || rout.Expired {
			t.Fatalf("Renew = %+v, %v", rout, err)
		}
		if rout.Grant.Fence != g.Fence || rout.Grant.RequestID != rreq.RequestID || !rout.Grant.CoordinatorExpiresAt.After(g.CoordinatorExpiresAt) {
			t.Errorf("renewal grant %+v after %+v", rout.Grant, g)
		}
		if _, err := a.CompleteRenewal(rreq, rout.Grant); err != nil {
			t.Fatal(err)
		}
		if l.Remaining() <= 10*time.Second {
			t.Errorf("after renewing to 20s, Remaining = %v", l.Remaining())
		}

		token, _ := a.Release(l)
		if ok, err := coord.Release(ctx, token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		if ok, err := coord.Release(ctx, token); err != nil || ok {
			t.Errorf("second Release = %v, %v; want a no-op", ok, err)
		}
		st, _ = coord.Status(ctx, "deploy-slot")
		if st.Held || !st.Released || st.Fence != g.Fence {
			t.Errorf("Status after release %+v", st)
		}

		// Released: the next acquisition is a new generation.
		l2 := acquire(t, a, coord, "deploy-slot")
		if l2.Token().Fence <= g.Fence {
			t.Errorf("fence after release %d, want above %d", l2.Token().Fence, g.Fence)
		}

		never, err := coord.Status(ctx, "never-leased")
		if err != nil || never.Held || never.Fence != 0 || never.Resource != "never-leased" {
			t.Errorf("Status of a never-leased resource = %+v, %v", never, err)
		}
		all, err := coord.List(ctx)
		if err != nil || len(all) != 1 || all[0].Resource != "deploy-slot" || !all[0].Held {
			t.Errorf("List = %+v, %v", all, err)
		}
	})
}

func TestDeniedOutcomesSayWhoHoldsIt(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{})
		la := acquire(t, a, coord, "r")

		req, _ := b.BeginAcquire("r")
		out, err := coord.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if out.OK || out.HeldBy != "agent-a" || out.Fence != la.Token().Fence || out.AlreadyHeld ||
			out.RetryAfter <= 0 || out.RetryAfter > 5*time.Second || out.ExpiresAt.IsZero() {
			t.Errorf("denied outcome %+v", out)
		}
		if _, err := b.CompleteAcquire(req, out.Grant); err == nil {
			t.Error("a denial's empty grant completed into a lease")
		}

		// The holder itself, under a new request, is denied too.
		req, _ = a.BeginAcquire("r")
		out, err = coord.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if out.OK || !out.AlreadyHeld || out.HeldBy != "agent-a" || out.Fence != la.Token().Fence {
			t.Errorf("second acquisition by the holder: %+v", out)
		}
	})
}

// A retried acquisition (the reply was lost) gets the same grant while it is
// current, from the database: across coordinators, with less time left.
func TestRetriedAcquireGetsTheSameGrant(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		a := newClient(t, "agent-a", ClientOptions{})
		req, _ := a.BeginAcquire("r")
		first, err := coord.Acquire(ctx, req)
		if err != nil || !first.OK {
			t.Fatalf("Acquire = %+v, %v", first, err)
		}
		// The reply is lost; the holder retries, reaching another
		// coordinator (a restart, another replica).
		retry, err := NewCoordinator(store, nil).Acquire(ctx, req)
		if err != nil || !retry.OK {
			t.Fatalf("retried Acquire = %+v, %v", retry, err)
		}
		if retry.Grant.Fence != first.Grant.Fence || retry.Grant.RequestID != req.RequestID ||
			retry.Grant.CoordinatorExpiresAt != first.Grant.CoordinatorExpiresAt {
			t.Errorf("retry granted %+v, first %+v", retry.Grant, first.Grant)
		}
		if retry.Grant.TTL > first.Grant.TTL {
			t.Errorf("retry TTL %v above the first's %v: the holder's window could outgrow the coordinator's", retry.Grant.TTL, first.Grant.TTL)
		}
		l, err := a.CompleteAcquire(req, retry.Grant)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.CompleteAcquire(req, first.Grant); !errors.Is(err, ErrRequestUsed) {
			t.Errorf("completing the duplicate grant: %v, want ErrRequestUsed", err)
		}
		// Once the lease is over, a late retry is never granted again: its
		// holder gave up on it, and the grant would lock the resource.
		token, _ := a.Release(l)
		if _, err := coord.Release(ctx, token); err != nil {
			t.Fatal(err)
		}
		again, err := coord.Acquire(ctx, req)
		if !errors.Is(err, ErrRequestExpired) || again.OK {
			t.Errorf("retry after release = %+v, %v; want ErrRequestExpired", again, err)
		}
		if st, _ := coord.Status(ctx, "r"); st.Held {
			t.Errorf("a late retry was granted: %+v", st)
		}
	})
}

// A retried request that arrives after its lease expired, even after other
// generations came and went, gets ErrRequestExpired and changes nothing.
func TestLateRetryAfterExpiryIsNeverGranted(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: 50 * time.Millisecond})
		b := newClient(t, "agent-b", ClientOptions{})
		req, _ := a.BeginAcquire("r")
		first, err := coord.Acquire(ctx, req)
		if err != nil || !first.OK {
			t.Fatalf("Acquire = %+v, %v", first, err)
		}
		waitUntilFree(t, coord, "r")
		if out, err := NewCoordinator(store, nil).Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) || out.OK {
			t.Fatalf("retry after expiry = %+v, %v; want ErrRequestExpired", out, err)
		}

		lb := acquire(t, b, coord, "r") // another generation, then free again
		tb, _ := b.Release(lb)
		if _, err := coord.Release(ctx, tb); err != nil {
			t.Fatal(err)
		}
		out, err := coord.Acquire(ctx, req)
		if !errors.Is(err, ErrRequestExpired) || out.OK {
			t.Fatalf("retry after another generation = %+v, %v; want ErrRequestExpired", out, err)
		}
		if st, _ := coord.Status(ctx, "r"); st.Held || st.Fence != tb.Fence {
			t.Errorf("a late retry changed the lease: %+v", st)
		}
		if f := floorOf(t, store, "r"); f.Floor != tb.Fence {
			t.Errorf("a late retry moved the floor to %d", f.Floor)
		}
	})
}

// An expired lease is never resurrected: Renew says Expired, and the holder
// must acquire again, getting a new fence.
func TestExpiredLeaseIsNeverRenewed(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: 50 * time.Millisecond})
		b := newClient(t, "agent-b", ClientOptions{})
		la := acquire(t, a, coord, "r")
		waitUntilFree(t, coord, "r")

		if !la.Expired() {
			t.Error("the holder still believes in a lease the coordinator expired")
		}
		req, _ := a.BeginRenewal(la)
		out, err := coord.Renew(ctx, req)
		if err != nil || out.OK || !out.Expired || out.HeldBy != "" {
			t.Fatalf("Renew of an expired lease = %+v, %v; want Expired", out, err)
		}

		lb := acquire(t, b, coord, "r")
		req, _ = a.BeginRenewal(la)
		out, err = coord.Renew(ctx, req)
		if err != nil || out.OK || !out.Expired || out.HeldBy != "agent-b" || out.Fence != lb.Token().Fence {
			t.Fatalf("Renew of a superseded lease = %+v, %v; want Expired naming agent-b", out, err)
		}
		if st, _ := coord.Status(ctx, "r"); st.Holder != "agent-b" {
			t.Errorf("a refused renewal changed the lease: %+v", st)
		}

		// A released lease is not renewed either.
		tb, _ := b.Release(lb)
		_, _ = coord.Release(ctx, tb)
		rreq := &RenewRequest{Resource: "r", Holder: "agent-b", Fence: tb.Fence, RequestID: "retry-1"}
		if out, err := coord.Renew(ctx, rreq); err != nil || !out.Expired {
			t.Errorf("Renew of a released lease = %+v, %v", out, err)
		}
	})
}

// A release with a stale token never frees the successor's lease.
func TestStaleReleaseIsANoOp(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: 50 * time.Millisecond})
		b := newClient(t, "agent-b", ClientOptions{})
		la := acquire(t, a, coord, "r")
		waitUntilFree(t, coord, "r")
		lb := acquire(t, b, coord, "r")

		ok, err := coord.Release(ctx, la.Token()) // a, late
		if err != nil || ok {
			t.Fatalf("stale Release = %v, %v; want false, nil", ok, err)
		}
		forged := fence.Token{Resource: "r", Holder: "agent-a", Fence: lb.Token().Fence}
		if ok, err := coord.Release(ctx, forged); err != nil || ok {
			t.Fatalf("Release with the successor's fence but another holder = %v, %v", ok, err)
		}
		st, _ := coord.Status(ctx, "r")
		if !st.Held || st.Holder != "agent-b" || st.Fence != lb.Token().Fence {
			t.Errorf("stale release disturbed the successor: %+v", st)
		}
	})
}

// Fences live in the database: a coordinator started after another one
// stopped continues the sequence, and finds the leases and request ids.
func TestRestartContinuesTheFenceSequence(t *testing.T) {
	forEachDriver(t, testRestartContinues[*sql.Tx], testRestartContinues[pgx.Tx])
}

func testRestartContinues[TTx any](t *testing.T, h harness[TTx]) {
	open := h.Reopen // another coordinator process on the same database
	ctx := context.Background()
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{})

	store1, close1 := open(t)
	coord1 := NewCoordinator(store1, nil)
	var last int64
	for range 3 {
		l := acquire(t, b, coord1, "churn")
		tok, _ := b.Release(l)
		if _, err := coord1.Release(ctx, tok); err != nil {
			t.Fatal(err)
		}
		last = l.Token().Fence
	}
	req, _ := a.BeginAcquire("held")
	held, err := coord1.Acquire(ctx, req)
	if err != nil || !held.OK {
		t.Fatalf("Acquire = %+v, %v", held, err)
	}
	close1()

	store2, close2 := open(t)
	defer close2()
	coord2 := NewCoordinator(store2, nil)
	l := acquire(t, b, coord2, "churn")
	if l.Token().Fence <= held.Grant.Fence || l.Token().Fence <= last {
		t.Errorf("after restart fence %d; before it %d and %d were issued", l.Token().Fence, last, held.Grant.Fence)
	}
	out, err := coord2.Acquire(ctx, req) // a's retry
	if err != nil || !out.OK || out.Grant.Fence != held.Grant.Fence {
		t.Errorf("retried request after restart = %+v, %v; want fence %d", out, err, held.Grant.Fence)
	}
	breq, _ := b.BeginAcquire("held")
	if out, err := coord2.Acquire(ctx, breq); err != nil || out.OK || out.HeldBy != "agent-a" {
		t.Errorf("lease did not survive the restart: %+v, %v", out, err)
	}
}

// StartFence continues from another fence source and never lowers the
// sequence.
func TestStartFence(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		a := newClient(t, "agent-a", ClientOptions{})
		coord := NewCoordinator(store, &CoordinatorOptions{StartFence: 1000})
		l1 := acquire(t, a, coord, "r1")
		l2 := acquire(t, a, coord, "r2")
		if l1.Token().Fence < 1000 || l2.Token().Fence <= l1.Token().Fence {
			t.Errorf("fences %d, %d with StartFence 1000", l1.Token().Fence, l2.Token().Fence)
		}
		lower := NewCoordinator(store, &CoordinatorOptions{StartFence: 10})
		if l3 := acquire(t, a, lower, "r3"); l3.Token().Fence <= l2.Token().Fence {
			t.Errorf("a lower StartFence moved the sequence back: %d after %d", l3.Token().Fence, l2.Token().Fence)
		}
	})
}

// A floor raised by another fence source above the sequence makes Acquire
// refuse, grant nothing, and say how to fix it.
func TestFloorAheadOfTheSequence(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		_, err := store.Executor().FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "etcd-holder", Fence: 500})
		if err != nil {
			t.Fatal(err)
		}
		a := newClient(t, "agent-a", ClientOptions{})
		coord := NewCoordinator(store, nil)
		req, _ := a.BeginAcquire("r")
		out, err := coord.Acquire(ctx, req)
		if !errors.Is(err, ErrFloorAhead) || out.OK {
			t.Fatalf("Acquire under a floor of 500 = %+v, %v; want ErrFloorAhead", out, err)
		}
		t.Log(err)
		if st, _ := coord.Status(ctx, "r"); st.Fence != 0 || st.Held {
			t.Errorf("a refused acquisition left a lease: %+v", st)
		}
		if f := floorOf(t, store, "r"); f.Floor != 500 {
			t.Errorf("floor %d, want 500 untouched", f.Floor)
		}
		l := acquire(t, a, NewCoordinator(store, &CoordinatorOptions{StartFence: 501}), "r")
		if l.Token().Fence < 501 {
			t.Errorf("fence %d with StartFence 501", l.Token().Fence)
		}
	})
}

// The same over a lease row that exists and is free, the case the Postgres
// fast path (fencegate_grant) writes before it sees the floor: nothing of
// the refused grant stays, neither the lease nor the request id, which a
// later coordinator then grants.
func TestFloorAheadOfAReleasedLease(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		a := newClient(t, "agent-a", ClientOptions{})
		coord := NewCoordinator(store, nil)
		old := acquire(t, a, coord, "r")
		tok, _ := a.Release(old)
		if ok, err := coord.Release(ctx, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		_, err := store.Executor().FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "etcd-holder", Fence: tok.Fence + 500})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := a.BeginAcquire("r")
		out, err := coord.Acquire(ctx, req)
		if !errors.Is(err, ErrFloorAhead) || out.OK {
			t.Fatalf("Acquire under a floor of %d = %+v, %v; want ErrFloorAhead", tok.Fence+500, out, err)
		}
		if st, _ := coord.Status(ctx, "r"); st.Fence != tok.Fence || st.Held || !st.Released {
			t.Errorf("a refused acquisition changed the lease: %+v, want fence %d released", st, tok.Fence)
		}
		if f := floorOf(t, store, "r"); f.Floor != tok.Fence+500 || f.Holder != "etcd-holder" {
			t.Errorf("floor %+v, want %d from etcd-holder untouched", f, tok.Fence+500)
		}
		// The refused request made no generation: the same request is
		// granted once the sequence is above the floor.
		again, err := NewCoordinator(store, &CoordinatorOptions{StartFence: tok.Fence + 501}).Acquire(ctx, req)
		if err != nil || !again.OK || again.Grant.Fence <= tok.Fence+500 {
			t.Fatalf("the same request with StartFence %d = %+v, %v; want a grant above the floor", tok.Fence+501, again, err)
		}
	})
}

func TestBadInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{MaxTTL: time.Hour})
		a := newClient(t, "agent-a", ClientOptions{})
		good, _ := a.BeginAcquire("r")
		acq := func(mutate func(*AcquireRequest)) *AcquireRequest {
			r := &AcquireRequest{Resource: good.Resource, Holder: good.Holder, RequestID: good.RequestID, TTL: good.TTL}
			mutate(r)
			return r
		}
		for name, req := range map[string]*AcquireRequest{
			"nil request":      nil,
			"negative ttl":     acq(func(r *AcquireRequest) { r.TTL = -time.Second }),
			"1ns ttl":          acq(func(r *AcquireRequest) { r.TTL = time.Nanosecond }),
			"ttl below min":    acq(func(r *AcquireRequest) { r.TTL = MinTTL - 1 }),
			"ttl above max":    acq(func(r *AcquireRequest) { r.TTL = 2 * time.Hour }),
			"empty holder":     acq(func(r *AcquireRequest) { r.Holder = "" }),
			"empty resource":   acq(func(r *AcquireRequest) { r.Resource = "" }),
			"huge resource":    acq(func(r *AcquireRequest) { r.Resource = string(make([]byte, 10000)) }),
			"bad utf8 holder":  acq(func(r *AcquireRequest) { r.Holder = "\xc3\x28" }),
			"empty request id": acq(func(r *AcquireRequest) { r.RequestID = "" }),
			"spaced id":        acq(func(r *AcquireRequest) { r.RequestID = "a b" }),
		} {
			out, err := coord.Acquire(ctx, req)
			if !errors.Is(err, fence.ErrInvalidInput) || out.OK {
				t.Errorf("Acquire with %s = %+v, %v; want fence.ErrInvalidInput", name, out, err)
			} else {
				t.Logf("%s: %v", name, err)
			}
		}
		// A coordinator whose default is below the minimum refuses too.
		if _, err := NewCoordinator(store, &CoordinatorOptions{TTL: time.Nanosecond}).Acquire(ctx, good); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Acquire with a 1ns default ttl: %v", err)
		}
		// A coordinator configured with a negative default ttl refuses too.
		if _, err := NewCoordinator(store, &CoordinatorOptions{TTL: -time.Second}).Acquire(ctx, good); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Acquire with a negative default ttl: %v", err)
		}

		// Renew of a resource that was never leased.
		_, err := coord.Renew(ctx, &RenewRequest{Resource: "nope", Holder: "agent-a", Fence: 1, RequestID: "x"})
		if !errors.Is(err, ErrUnknownResource) {
			t.Errorf("Renew of an unknown resource: %v, want ErrUnknownResource", err)
		} else {
			t.Log(err)
		}
		for name, req := range map[string]*RenewRequest{
			"nil":          nil,
			"zero fence":   {Resource: "r", Holder: "agent-a", RequestID: "x"},
			"negative ttl": {Resource: "r", Holder: "agent-a", Fence: 1, RequestID: "x", TTL: -1},
			"1ns ttl":      {Resource: "r", Holder: "agent-a", Fence: 1, RequestID: "x", TTL: 1},
			"empty holder": {Resource: "r", Fence: 1, RequestID: "x"},
		} {
			if _, err := coord.Renew(ctx, req); !errors.Is(err, fence.ErrInvalidInput) {
				t.Errorf("Renew with %s: %v, want fence.ErrInvalidInput", name, err)
			}
		}
		if _, err := coord.Release(ctx, fence.Token{}); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Release of the zero token: %v", err)
		}
		if _, err := coord.Status(ctx, ""); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Status of the empty resource: %v", err)
		}

		// Nothing of the above was written.
		if all, err := coord.List(ctx); err != nil || len(all) != 0 {
			t.Errorf("bad input left leases: %+v, %v", all, err)
		}

		// A grant completed against the wrong request.
		r1, _ := a.BeginAcquire("r1")
		r2, _ := a.BeginAcquire("r2")
		out2, err := coord.Acquire(ctx, r2)
		if err != nil || !out2.OK {
			t.Fatal(out2, err)
		}
		if _, err := a.CompleteAcquire(r1, out2.Grant); !errors.Is(err, ErrGrantMismatch) {
			t.Errorf("grant for r2 completed against r1: %v, want ErrGrantMismatch", err)
		} else {
			t.Log(err)
		}
	})
}

// Co-located mode: Acquire raises the floor in its own transaction, so a
// stale holder is refused before the new holder writes; the gate under
// VerifyIssued refuses fences this coordinator never issued, without raising
// the floor.
func TestCoLocatedGate(t *testing.T) {
	forEachDriver(t, testCoLocatedGate[*sql.Tx], testCoLocatedGate[pgx.Tx])
}

func testCoLocatedGate[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	coord := NewCoordinator(h.Driver, &CoordinatorOptions{TTL: 50 * time.Millisecond})
	g := gate.New(h.Driver, &gate.Options{VerifyIssued: true})
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})

	la := acquire(t, a, coord, "r")
	waitUntilFree(t, coord, "r")
	lb := acquire(t, b, coord, "r")

	// b has not written, yet a is refused: the floor moved with the grant.
	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := mustStale(t, g.Commit(ctx, tx, la.Token()), la.Token())
	if stale.Floor != lb.Token().Fence || stale.FloorHolder != "agent-b" || stale.NotIssued {
		t.Errorf("refusal %+v", stale)
	}

	for name, forged := range map[string]fence.Token{
		"a fence above any issued":     {Resource: "r", Holder: "agent-b", Fence: lb.Token().Fence + 1000},
		"the live fence, wrong holder": {Resource: "r", Holder: "mallory", Fence: lb.Token().Fence},
		"a resource never leased":      {Resource: "other", Holder: "agent-b", Fence: lb.Token().Fence},
	} {
		tx, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = g.Commit(ctx, tx, forged)
		_ = h.Driver.Rollback(ctx, tx)
		if !errors.Is(err, gate.ErrFenceNotIssued) {
			t.Errorf("%s: Commit(%v) = %v, want ErrFenceNotIssued", name, forged, err)
		}
	}
	if f := floorOf(t, h.Driver, "r"); f.Floor != lb.Token().Fence || f.Holder != "agent-b" {
		t.Errorf("forged fences moved the floor to %+v", f)
	}
	if f := floorOf(t, h.Driver, "other"); f.Floor != 0 {
		t.Errorf("a forged fence created a floor: %+v", f)
	}

	// The rightful holder writes.
	if err := g.Do(ctx, lb.Token(), func(context.Context, TTx) error { return nil }); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
}

// If the previous generation's write transaction holds the floor row, an
// acquisition waits at most the lock timeout and is refused retryably, with
// nothing granted; once that transaction ends it succeeds.
func TestAcquireWaitsForTheOldWriterThenRefusesRetryably(t *testing.T) {
	forEachDriver(t, testAcquireWaitsForTheOldWriter[*sql.Tx], testAcquireWaitsForTheOldWriter[pgx.Tx])
}

func testAcquireWaitsForTheOldWriter[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	var coordStore sqlstore.Store = h.Driver
	if h.Driver.Dialect() == sqlite.Dialect {
		// SQLite's writer holds the whole file from BEGIN, and the
		// acquisition's wait is bounded by the busy timeout, not
		// LockTimeout: give the coordinator its own connection with a short
		// one.
		coordStore = sqliteWithBusyTimeout(t, h, 150)
	}
	coord := NewCoordinator(coordStore, &CoordinatorOptions{LockTimeout: 150 * time.Millisecond})
	g := gate.New(h.Driver, &gate.Options{VerifyIssued: true})
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{})
	la := acquire(t, a, coord, "r")

	// a's lease ends at the coordinator (released here; expiry is the same
	// case), but a's write transaction, which admitted its fence, is still
	// open: a slow write.
	if ok, err := coord.Release(ctx, la.Token()); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Driver.Rollback(ctx, tx)
	if err := g.Commit(ctx, tx, la.Token()); err != nil {
		t.Fatal(err)
	}

	req, _ := b.BeginAcquire("r")
	start := time.Now()
	out, err := coord.Acquire(ctx, req)
	waited := time.Since(start)
	if !errors.Is(err, ErrBusy) || out.OK {
		t.Fatalf("Acquire while the old writer holds the floor = %+v, %v; want ErrBusy", out, err)
	}
	t.Logf("refused after %v: %v", waited, err)
	if waited > 5*time.Second {
		t.Errorf("waited %v, far beyond the lock timeout", waited)
	}
	if !sqlstore.IsRetryable(err) {
		t.Errorf("ErrBusy does not unwrap to a retryable database error: %v", err)
	}
	if strings.Contains(err.Error(), ": lease: ") {
		t.Errorf("error %q repeats its prefix", err)
	}

	// Nothing was granted half-way: the lease and the floor are a's.
	if err := h.Driver.Commit(ctx, tx); err != nil {
		t.Fatalf("the old writer's commit: %v", err)
	}
	st, _ := coord.Status(ctx, "r")
	if st.Holder != "agent-a" || st.Fence != la.Token().Fence {
		t.Errorf("refused acquisition changed the lease: %+v", st)
	}
	if f := floorOf(t, h.Driver, "r"); f.Floor != la.Token().Fence {
		t.Errorf("refused acquisition moved the floor to %d", f.Floor)
	}

	// The writer is done: the same request now succeeds.
	out, err = coord.Acquire(ctx, req)
	if err != nil || !out.OK || out.Grant.Fence <= la.Token().Fence {
		t.Fatalf("Acquire after the old writer finished = %+v, %v", out, err)
	}
}

// sqliteWithBusyTimeout opens a second store on h's SQLite file with a busy
// timeout of ms milliseconds.
func sqliteWithBusyTimeout[TTx any](t *testing.T, h harness[TTx], ms int) sqlstore.Store {
	t.Helper()
	var path string
	if err := h.QueryRow(context.Background(), `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	d, err := sqlite.Open(context.Background(), "file:"+path+"?_pragma=busy_timeout("+strconv.Itoa(ms)+")")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
