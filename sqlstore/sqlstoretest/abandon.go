package sqlstoretest

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// abandonTable is LeaseAbandon's rules: given a resource's state, abandon
// request "q" of holder "a", then check what it released and that a late
// sending of "q" grants nothing while a fresh request is still granted.
var abandonTable = []struct {
	name     string
	given    func(e *env) // the row's resource's state
	released bool         // LeaseAbandon's Released
	heldBy   string       // the live holder after the abandon, "" for none
}{
	{name: "never leased", given: func(*env) {}},
	{name: "held by another", given: func(e *env) { e.given("b", "q0", minute) }, heldBy: "b"},
	{name: "granted to the request", given: func(e *env) { e.given("a", "q", minute) }, released: true},
	{name: "its lease over already", given: func(e *env) { e.givenReleased("a", "q") }},
	{name: "free after another's lease", given: func(e *env) { e.givenReleased("b", "q0") }},
}

func abandonRules(t *testing.T, e *env) {
	for _, r := range abandonTable {
		t.Run(r.name, func(t *testing.T) {
			e := e.row(t, r.name)
			r.given(e)
			var res sqlstore.LeaseAbandonResult
			err := e.do(func(ex sqlstore.Executor) error {
				var err error
				res, err = ex.LeaseAbandon(ctx, &sqlstore.LeaseAbandonParams{Resource: e.res, Holder: "a", RequestID: "q", LockTimeout: time.Second})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Released != r.released {
				t.Errorf("LeaseAbandon = %+v, want Released %v", res, r.released)
			}
			cur, err := e.lease()
			if err != nil {
				t.Fatal(err)
			}
			if got := map[bool]string{true: cur.Holder}[cur.Live()]; got != r.heldBy {
				t.Errorf("after the abandon the lease is %+v, want live holder %q", cur, r.heldBy)
			}
			e.abandoned("q", r.heldBy)
		})
	}
	t.Run("set", func(t *testing.T) {
		e := e.row(t, "set")
		members := []string{e.res + "/x", e.res + "/y"}
		acquire := func(request string) sqlstore.LeaseAcquireResult {
			t.Helper()
			res, err := e.s.Executor().LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
				Members: members, Holder: "a", RequestID: request, TTL: minute, LockTimeout: time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		abandon := func(request string) sqlstore.LeaseAbandonResult {
			t.Helper()
			var res sqlstore.LeaseAbandonResult
			if err := e.do(func(ex sqlstore.Executor) error {
				var err error
				res, err = ex.LeaseAbandon(ctx, &sqlstore.LeaseAbandonParams{Members: members, Holder: "a", RequestID: request, LockTimeout: time.Second})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return res
		}
		// Granted, then abandoned: every member released.
		if res := acquire("s1"); res.Status != sqlstore.AcquireGranted {
			t.Fatalf("LeaseAcquire(s1) = %+v, want granted", res)
		}
		if res := abandon("s1"); !res.Released {
			t.Errorf("LeaseAbandon(s1) = %+v, want Released", res)
		}
		for _, m := range members {
			if l, err := e.s.Executor().LeaseGet(ctx, m); err != nil || l.Live() {
				t.Errorf("member %s after the abandon: %+v, %v; want released", m, l, err)
			}
		}
		// Abandoned before it ran: a late sending grants nothing.
		if res := abandon("s2"); res.Released {
			t.Errorf("LeaseAbandon(s2) = %+v, want nothing released", res)
		}
		if res := acquire("s2"); res.Status != sqlstore.AcquireRequestExpired {
			t.Errorf("a late sending of an abandoned set request = %+v, want request expired", res)
		}
		if res := acquire("s3"); res.Status != sqlstore.AcquireGranted {
			t.Errorf("a fresh set request after the abandon = %+v, want granted", res)
		}
	})
}

// abandoned checks that request of holder "a", abandoned on the row's
// resource, is never granted: a late sending of it is answered request
// expired, and once the resource is free a fresh request is granted a
// fence above every fence the abandon could have spent.
func (e *env) abandoned(request, heldBy string) {
	e.t.Helper()
	late, err := e.s.Executor().LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
		Resource: e.res, Holder: "a", RequestID: request, TTL: minute, LockTimeout: time.Second,
	})
	if err != nil || late.Status != sqlstore.AcquireRequestExpired {
		e.t.Errorf("a late sending of the abandoned request = %+v, %v; want request expired", late, err)
	}
	if e.requestFence(request) == 0 {
		e.t.Errorf("the abandoned request %s is not recorded as spent", request)
	}
	if heldBy != "" {
		cur, err := e.lease()
		if err != nil {
			e.t.Fatal(err)
		}
		if !release(e.t, e.s.Executor(), e.res, cur.Holder, cur.Fence) {
			e.t.Fatalf("release of %+v released nothing", cur)
		}
	}
	fresh := e.given("c", "fresh", minute)
	if fresh.Fence <= e.requestFence(request) {
		e.t.Errorf("fresh grant's fence %d is not above the abandoned request's %d", fresh.Fence, e.requestFence(request))
	}
}
