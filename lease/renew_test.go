package lease

import (
	"context"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// A renewal with a short ttl does not shorten a kept lease under its keeper:
// the coordinator's expiry stays where the keeper's deadline was dated
// from, Renew and RenewBatch answer the time that is left, and another
// holder is still denied.
func TestRenewalNeverShortensAKeptLease(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: 30 * time.Second})
		l := acquire(t, a, coord, "r")
		kept, err := Keep(ctx, a, coord, l)
		if err != nil {
			t.Fatal(err)
		}
		defer kept.Release(ctx)
		before, err := coord.Status(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}

		short := func() *RenewRequest {
			tok := l.Token()
			return &RenewRequest{Resource: tok.Resource, Holder: tok.Holder, Fence: tok.Fence, RequestID: newRequestID(), TTL: 50 * time.Millisecond}
		}
		out, err := coord.Renew(ctx, short())
		if err != nil || !out.OK {
			t.Fatalf("Renew with a short ttl = %+v, %v; want OK", out, err)
		}
		if out.Grant.TTL < 20*time.Second {
			t.Errorf("Renew with a short ttl answered %v left, want the kept term's (about 30s)", out.Grant.TTL)
		}
		outs, err := coord.RenewBatch(ctx, []*RenewRequest{short()})
		if err != nil || !outs[0].OK || outs[0].Grant.TTL < 20*time.Second {
			t.Fatalf("RenewBatch with a short ttl = %+v, %v; want OK with about 30s left", outs, err)
		}

		after, err := coord.Status(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if after.ExpiresAt.Time().Before(before.ExpiresAt.Time()) {
			t.Fatalf("a renewal moved the expiry from %v to %v, %v earlier, under the keeper",
				before.ExpiresAt, after.ExpiresAt, before.ExpiresAt.Time().Sub(after.ExpiresAt.Time()))
		}
		b := newClient(t, "agent-b", ClientOptions{})
		req, _ := b.BeginAcquire("r")
		if got, err := coord.Acquire(ctx, req); err != nil || got.OK || got.HeldBy != "agent-a" {
			t.Fatalf("successor's Acquire = %+v, %v; want held by agent-a", got, err)
		}
		if kept.Context().Err() != nil {
			t.Fatalf("the kept lease was lost: %v", context.Cause(kept.Context()))
		}
	})
}

// A lease named twice in one batch is answered the same, on every store:
// both copies renewed, to the longer of their terms.
func TestRenewBatchAnswersADuplicateLeaseOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{TTL: 30 * time.Second}) // live until the batch, on a loaded machine too
		l := acquire(t, a, coord, "r")
		other := acquire(t, a, coord, "s")
		renewal := func(l *Lease, ttl time.Duration) *RenewRequest {
			req, err := a.BeginRenewal(l)
			if err != nil {
				t.Fatal(err)
			}
			req.TTL = ttl
			return req
		}
		reqs := []*RenewRequest{renewal(l, time.Minute), renewal(other, time.Minute), renewal(l, 2*time.Minute)}
		outs, err := coord.RenewBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, out := range outs {
			if !out.OK || out.Grant.RequestID != reqs[i].RequestID {
				t.Fatalf("outcome %d = %+v, want OK for request %s", i, out, reqs[i].RequestID)
			}
		}
		if outs[0].Grant.CoordinatorExpiresAt != outs[2].Grant.CoordinatorExpiresAt || outs[0].Grant.TTL != outs[2].Grant.TTL {
			t.Fatalf("the two copies were answered %+v and %+v, want the same grant", outs[0].Grant, outs[2].Grant)
		}
		if ttl := outs[0].Grant.TTL; ttl <= time.Minute || ttl > 2*time.Minute {
			t.Fatalf("the copies renewed to %v, want the longer term (2m)", ttl)
		}
		for i, req := range reqs {
			if _, err := a.CompleteRenewal(req, outs[i].Grant); err != nil {
				t.Fatalf("CompleteRenewal(%d): %v", i, err)
			}
		}
	})
}
