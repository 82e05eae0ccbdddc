package sqlstoretest

import (
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseLeases states the lease table's primitives, the steps the
// shared step-by-step acquisition composes; the rules they make are Rules.
func exerciseLeases[TTx any](run runner[TTx]) {
	run("Executor/Leases", func(t *testing.T, d sqlstore.Driver[TTx]) {
		var row sqlstore.LeaseRow
		err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			if err := ex.SetLockTimeout(ctx, time.Second); err != nil {
				return err
			}
			locked, err := ex.LeaseGetForUpdate(ctx, "r")
			if err != nil || locked.Found {
				t.Fatalf("LeaseGetForUpdate of a new resource = %+v, %v", locked, err)
			}
			row = grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 4, RequestID: "q1", TTL: time.Minute})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !row.Live() || row.Holder != "a" || row.Fence != 4 || row.RequestID != "q1" || row.ExpiresAt.Sub(row.GrantedAt) != time.Minute {
			t.Fatalf("granted %+v", row)
		}
		ex := d.Executor()
		for _, c := range []struct {
			resource, request string
			fence             int64
		}{{"r", "q1", 4}, {"r", "q2", 0}, {"other", "q1", 0}} { // the grant recorded its request
			if f, err := ex.RequestFence(ctx, c.resource, c.request); err != nil || f != c.fence {
				t.Fatalf("RequestFence(%s, %s) = %d, %v; want %d", c.resource, c.request, f, err, c.fence)
			}
		}
		if _, inserted, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "b", Fence: 5, RequestID: "q2", TTL: time.Minute}); err != nil || inserted {
			t.Fatalf("second insert = %v, %v; want not inserted", inserted, err)
		}
		if got, err := ex.LeaseGet(ctx, "r"); err != nil || got.Holder != "a" || !got.Live() || got.Now.Before(got.GrantedAt) {
			t.Fatalf("LeaseGet = %+v, %v", got, err)
		}
		if _, err := ex.LeaseGet(ctx, "none"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("LeaseGet(none) = %v, want ErrNotFound", err)
		}
		if got, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 3, TTL: time.Hour}); err != nil || got.Found {
			t.Fatalf("renew of another fence = %+v, %v", got, err)
		}
		got, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Hour})
		if err != nil || !got.Found || got.ExpiresAt.Sub(got.Now) < 59*time.Minute || got.Fence != 4 {
			t.Fatalf("LeaseRenew = %+v, %v", got, err)
		}
		// A renewal never shortens the lease: a shorter ttl keeps the expiry.
		if kept, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Minute}); err != nil ||
			!kept.Found || !kept.ExpiresAt.Equal(got.ExpiresAt) || kept.ExpiresAt.Sub(kept.Now) < 59*time.Minute {
			t.Fatalf("LeaseRenew with a shorter ttl = %+v, %v; want Found, expiry kept at %v", kept, err, got.ExpiresAt)
		}
		err = d.InTx(ctx, func(ex sqlstore.Executor) error {
			locked, err := ex.LeaseGetForUpdate(ctx, "r")
			if err != nil || !locked.Found {
				t.Fatalf("LeaseGetForUpdate = %+v, %v", locked, err)
			}
			row = grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r", Holder: "b", Fence: 6, RequestID: "q3", TTL: time.Minute, Replace: true})
			return nil
		})
		if err != nil || row.Holder != "b" || row.Fence != 6 {
			t.Fatalf("replace = %+v, %v", row, err)
		}
		for i, want := range []bool{false, true, false} { // wrong fence; the lease; released already
			fence := int64(6)
			if i == 0 {
				fence = 4
			}
			if ok := release(t, ex, "r", "b", fence); ok != want {
				t.Fatalf("LeaseRelease #%d = %v; want %v", i, ok, want)
			}
		}
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "a", Holder: "c", Fence: 7, RequestID: "q4", TTL: time.Minute})
		rows, err := ex.LeaseList(ctx)
		if err != nil || len(rows) != 2 || rows[0].Resource != "a" || rows[1].Live() || !rows[1].Released {
			t.Fatalf("LeaseList = %+v, %v", rows, err)
		}
	})
	// Every store runs fn with an executor, on a pinned connection or its
	// own Executor.
	run("Store/OnConn", func(t *testing.T, d sqlstore.Driver[TTx]) {
		err := d.OnConn(ctx, func(ex sqlstore.Executor) error {
			grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 4, RequestID: "q1", TTL: time.Minute})
			got, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Hour})
			if err != nil || !got.Found {
				t.Errorf("LeaseRenew on a pinned connection = %+v, %v", got, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.Executor().LeaseGet(ctx, "r"); err != nil || got.ExpiresAt.Sub(got.Now) < 59*time.Minute {
			t.Errorf("after OnConn (autocommit): %+v, %v", got, err)
		}
	})
}
