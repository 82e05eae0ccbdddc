package mysql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestFenceCounter(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	next := func(ex sqlstore.Executor) int64 {
		t.Helper()
		f, err := ex.FenceNext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := next(d.Executor()); f != 1 {
		t.Fatalf("first fence = %d", f)
	}
	// Rolled back with the granting transaction: the next grant gets it.
	tx, ex := inTx(t, d)
	if f := next(ex); f != 2 {
		t.Fatalf("fence = %d, want 2", f)
	}
	if err := d.Rollback(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if f := next(d.Executor()); f != 2 {
		t.Fatalf("fence after a rolled-back grant = %d, want 2 again", f)
	}
	// FenceAtLeast moves it up, never down.
	for _, min := range []int64{100, 50} {
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error { return ex.FenceAtLeast(ctx, min) }); err != nil {
			t.Fatal(err)
		}
	}
	if f := next(d.Executor()); f != 100 {
		t.Fatalf("fence after FenceAtLeast(100), (50) = %d, want 100", f)
	}
	// A fence taken in a transaction does not leak into the floor upsert's
	// LAST_INSERT_ID: the grant's raise must read as an insert.
	err := d.InTx(ctx, func(ex sqlstore.Executor) error {
		f := next(ex)
		r, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "new", Holder: "h", Fence: f})
		if err == nil && (!r.Admitted || r.Floor != f) {
			t.Errorf("raise after FenceNext = %+v, want admitted at %d", r, f)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLeaseLifecycle(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	ex := d.Executor()
	if _, err := ex.LeaseGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("LeaseGet of a new resource = %v, want ErrNotFound", err)
	}
	var granted sqlstore.LeaseRow
	err := d.InTx(ctx, func(ex sqlstore.Executor) error {
		row, err := ex.LeaseGetForUpdate(ctx, "r")
		if err != nil || row.Found {
			t.Fatalf("LeaseGetForUpdate of a new resource = %+v, %v", row, err)
		}
		var ok bool
		granted, ok, err = ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 1, RequestID: "q1", TTL: time.Hour})
		if err != nil || !ok {
			t.Fatalf("LeaseGrant = %v, %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !granted.Live() || granted.Holder != "a" || granted.RequestID != "q1" || granted.Fence != 1 ||
		granted.ExpiresAt.Sub(granted.GrantedAt) != time.Hour || !granted.Now.Equal(granted.GrantedAt) {
		t.Fatalf("granted %+v", granted)
	}

	// The grant recorded its request.
	for _, c := range []struct {
		resource, request string
		fence             int64
	}{{"r", "q1", 1}, {"r", "q2", 0}, {"x", "q1", 0}} {
		if f, err := ex.RequestFence(ctx, c.resource, c.request); err != nil || f != c.fence {
			t.Errorf("RequestFence(%s, %s) = %d, %v; want %d", c.resource, c.request, f, err, c.fence)
		}
	}

	// A second first grant (a concurrent acquisition that lost the race)
	// writes nothing and says so.
	row, ok, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "b", Fence: 2, RequestID: "q2", TTL: time.Hour})
	if err != nil || ok || row.Found {
		t.Fatalf("conflicting first grant = %+v, %v, %v", row, ok, err)
	}

	// Locking read: Now comes from after the lock, not before the row.
	locked, err := lockedRead(ctx, d, "r")
	if err != nil || locked.Holder != "a" || locked.Now.Before(granted.GrantedAt) || !locked.Live() {
		t.Fatalf("LeaseGetForUpdate = %+v, %v", locked, err)
	}

	renewed, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 1, TTL: 2 * time.Hour})
	if err != nil || !renewed.Found || renewed.ExpiresAt.Sub(renewed.Now) != 2*time.Hour || renewed.Now.Before(granted.Now) ||
		!renewed.GrantedAt.Equal(granted.GrantedAt) {
		t.Fatalf("LeaseRenew = %+v, %v", renewed, err)
	}
	for _, p := range []sqlstore.LeaseRenewParams{
		{Resource: "r", Holder: "a", Fence: 2, TTL: time.Hour}, // another fence
		{Resource: "r", Holder: "b", Fence: 1, TTL: time.Hour}, // another holder
		{Resource: "x", Holder: "a", Fence: 1, TTL: time.Hour}, // another resource
	} {
		if r, err := ex.LeaseRenew(ctx, &p); err != nil || r.Found {
			t.Errorf("LeaseRenew(%+v) = %+v, %v; want not found", p, r, err)
		}
	}

	if res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: "r", Holder: "a", Fence: 2}); err != nil || res.Released {
		t.Fatalf("stale release = %+v, %v", res, err)
	}
	if res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: "r", Holder: "a", Fence: 1}); err != nil || !res.Released {
		t.Fatalf("release = %+v, %v", res, err)
	}
	if res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: "r", Holder: "a", Fence: 1}); err != nil || res.Released {
		t.Fatalf("second release = %+v, %v", res, err)
	}
	got, err := ex.LeaseGet(ctx, "r")
	if err != nil || !got.Released || got.Live() || got.ExpiresAt.After(got.Now) {
		t.Fatalf("released lease = %+v, %v", got, err)
	}
	if r, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 1, TTL: time.Hour}); err != nil || r.Found {
		t.Fatalf("renewal of a released lease = %+v, %v", r, err)
	}
	if f, err := ex.RequestFence(ctx, "r", "q2"); err != nil || f != 0 {
		t.Fatalf("the lost first grant recorded its request: %d, %v", f, err)
	}

	// A new generation replaces the row.
	err = d.InTx(ctx, func(ex sqlstore.Executor) error {
		row, ok, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "b", Fence: 3, RequestID: "q3", TTL: time.Minute, Replace: true})
		if err != nil || !ok || row.Holder != "b" || row.Fence != 3 || row.Released || !row.Live() {
			t.Errorf("replacing grant = %+v, %v, %v", row, ok, err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	grantMany(t, d, "q", "p")
	list, err := ex.LeaseList(ctx)
	if err != nil || len(list) != 3 || list[0].Resource != "p" || list[1].Resource != "q" || list[2].Resource != "r" || list[2].Holder != "b" {
		t.Fatalf("LeaseList = %+v, %v", list, err)
	}
	for _, l := range list {
		if l.Now.IsZero() {
			t.Errorf("LeaseList row without the clock: %+v", l)
		}
	}
}

func lockedRead(ctx context.Context, d interface {
	InTx(context.Context, func(sqlstore.Executor) error) error
}, resource string) (row sqlstore.LeaseRow, err error) {
	err = d.InTx(ctx, func(ex sqlstore.Executor) error {
		row, err = ex.LeaseGetForUpdate(ctx, resource)
		return err
	})
	return row, err
}

func grantMany(t *testing.T, d interface {
	InTx(context.Context, func(sqlstore.Executor) error) error
}, resources ...string) {
	t.Helper()
	ctx := context.Background()
	for i, r := range resources {
		err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: r, Holder: "h", Fence: int64(100 + i), RequestID: "x", TTL: time.Minute})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRejectionLog(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	ex := d.Executor()
	var logged []sqlstore.Rejection
	for i, res := range []string{"a", "b", "a"} {
		r, err := ex.RejectionInsert(ctx, sqlstore.Rejection{
			Resource: res, Fence: int64(i + 1), Holder: "old", Floor: 9, FloorHolder: "new", NotIssued: i == 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq == 0 || r.At.IsZero() || time.Since(r.At) > time.Hour || time.Until(r.At) > time.Hour {
			t.Fatalf("RejectionInsert = %+v", r)
		}
		logged = append(logged, r)
	}
	check := func(p sqlstore.RejectionListParams, want ...int) {
		t.Helper()
		got, err := ex.RejectionList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("RejectionList(%+v) = %d records, want %d", p, len(got), len(want))
		}
		for i, w := range want {
			if got[i] != logged[w] {
				t.Errorf("RejectionList(%+v)[%d] = %+v, want %+v", p, i, got[i], logged[w])
			}
		}
	}
	check(sqlstore.RejectionListParams{}, 0, 1, 2)
	check(sqlstore.RejectionListParams{Resource: "a"}, 0, 2)
	check(sqlstore.RejectionListParams{Newest: true, Limit: 2}, 2, 1)
	check(sqlstore.RejectionListParams{AfterSeq: logged[0].Seq}, 1, 2)
	check(sqlstore.RejectionListParams{Resource: "a", AfterSeq: logged[0].Seq, Newest: true}, 2)
}
