// Package sqlstoretest is the conformance suite every fencegate driver
// passes: Exercise states the sqlstore.Driver, Store and Executor contract
// method by method, on a real database. A new driver runs it from its own
// test (fencegate's drivers run it from one list, internal/dbtest.Drivers):
//
//	func TestConformance(t *testing.T) {
//		sqlstoretest.Exercise(t, func(t testing.TB) sqlstore.Driver[*sql.Tx] {
//			return openFreshMigratedDatabase(t)
//		})
//	}
//
// The gate's and the lease's rules, written once over any driver, run on
// top of it in those packages' tests.
package sqlstoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Exercise runs the contract on drivers from newDriver, which returns a
// driver on a fresh, migrated database each call (closed in t.Cleanup).
func Exercise[TTx any](t *testing.T, newDriver func(t testing.TB) sqlstore.Driver[TTx]) {
	t.Helper()
	ctx := context.Background()
	run := func(name string, fn func(t *testing.T, d sqlstore.Driver[TTx])) {
		t.Run(name, func(t *testing.T) { fn(t, newDriver(t)) })
	}
	floor := func(t *testing.T, ex sqlstore.Executor, resource string) sqlstore.Floor {
		t.Helper()
		f, err := ex.FloorGet(ctx, resource)
		if err != nil {
			t.Fatalf("FloorGet(%s): %v", resource, err)
		}
		return f
	}
	raise := func(t *testing.T, ex sqlstore.Executor, p sqlstore.FloorRaiseParams) sqlstore.FloorRaiseResult {
		t.Helper()
		r, err := ex.FloorRaise(ctx, p)
		if err != nil {
			t.Fatalf("FloorRaise(%+v): %v", p, err)
		}
		return r
	}
	grant := func(t *testing.T, ex sqlstore.Executor, p sqlstore.LeaseGrantParams) sqlstore.LeaseRow {
		t.Helper()
		row, inserted, err := ex.LeaseGrant(ctx, p)
		if err != nil || !inserted {
			t.Fatalf("LeaseGrant(%+v) = %v, %v", p, inserted, err)
		}
		return row
	}

	run("Store/Facts", func(t *testing.T, d sqlstore.Driver[TTx]) {
		if d.Dialect() == "" {
			t.Error("Dialect is empty")
		}
		if p := d.ClockPrecision(); p <= 0 || p > time.Second {
			t.Errorf("ClockPrecision = %v", p)
		}
		if err := d.ClassifyError(nil); err != nil {
			t.Errorf("ClassifyError(nil) = %v", err)
		}
		plain := errors.New("plain")
		if err := d.ClassifyError(plain); !errors.Is(err, plain) || sqlstore.IsRetryable(err) || sqlstore.IsConnLost(err) {
			t.Errorf("ClassifyError(plain) = %v: retryable %v, conn lost %v", err, sqlstore.IsRetryable(err), sqlstore.IsConnLost(err))
		}
	})

	run("Store/Migrate", func(t *testing.T, d sqlstore.Driver[TTx]) {
		for range 2 { // idempotent
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Executor().FloorList(ctx); err != nil {
			t.Fatal(err)
		}
	})

	run("Driver/BeginCommitRollback", func(t *testing.T, d sqlstore.Driver[TTx]) {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raise(t, d.UnwrapExecutor(tx), sqlstore.FloorRaiseParams{Resource: "rolled", Holder: "h", Fence: 1})
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatalf("second Rollback: %v, want nil", err)
		}
		if _, err := d.Executor().FloorGet(ctx, "rolled"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("rolled-back raise: FloorGet = %v, want ErrNotFound", err)
		}
		tx, err = d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raise(t, d.UnwrapExecutor(tx), sqlstore.FloorRaiseParams{Resource: "committed", Holder: "h", Fence: 2})
		if err := d.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatalf("Rollback after Commit: %v, want nil", err)
		}
		if f := floor(t, d.Executor(), "committed"); f.Floor != 2 {
			t.Fatalf("committed floor %d", f.Floor)
		}
	})

	run("Store/InTx", func(t *testing.T, d sqlstore.Driver[TTx]) {
		boom := errors.New("boom")
		err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			raise(t, ex, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want fn's error", err)
		}
		if _, err := d.Executor().FloorGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("InTx did not roll back: %v", err)
		}
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, err := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if f := floor(t, d.Executor(), "r"); f.Floor != 1 {
			t.Fatalf("floor %d after InTx", f.Floor)
		}
	})

	run("Executor/FloorRaise", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		steps := []struct {
			holder      string
			fence       int64
			admitted    bool
			floor       int64
			floorHolder string
		}{
			{"a", 5, true, 5, "a"},  // creates
			{"a", 5, true, 5, "a"},  // equal: admitted, kept
			{"b", 7, true, 7, "b"},  // higher: raised
			{"a", 5, false, 7, "b"}, // lower: refused, reports the floor
			{"c", 7, true, 7, "c"},  // equal from another holder: admitted, holder taken
		}
		for _, s := range steps {
			r := raise(t, ex, sqlstore.FloorRaiseParams{Resource: "r", Holder: s.holder, Fence: s.fence})
			if !r.Issued || r.Admitted != s.admitted || r.Floor != s.floor || r.FloorHolder != s.floorHolder {
				t.Fatalf("FloorRaise(%s, %d) = %+v, want admitted %v at %d by %s", s.holder, s.fence, r, s.admitted, s.floor, s.floorHolder)
			}
		}
		if f := floor(t, ex, "r"); f.Floor != 7 || f.Holder != "c" || f.UpdatedAt.IsZero() {
			t.Fatalf("FloorGet = %+v", f)
		}
	})

	run("Executor/FloorRaiseVerified", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		p := sqlstore.FloorRaiseParams{Resource: "r", Holder: "a", Fence: 3, VerifyIssued: true}
		if r := raise(t, ex, p); r.Issued || r.Admitted {
			t.Fatalf("unissued fence: %+v", r)
		}
		if _, err := ex.FloorGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("unissued fence wrote a floor: %v", err)
		}
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 3, RequestID: "q", TTL: time.Minute})
		for range 2 { // creates, then keeps
			if r := raise(t, ex, p); !r.Issued || !r.Admitted || r.Floor != 3 {
				t.Fatalf("issued fence: %+v", r)
			}
		}
	})

	run("Executor/FloorList", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		for _, r := range []string{"b", "a", "c"} {
			raise(t, ex, sqlstore.FloorRaiseParams{Resource: r, Holder: "h", Fence: 1})
		}
		fs, err := ex.FloorList(ctx)
		if err != nil || len(fs) != 3 || fs[0].Resource != "a" || fs[2].Resource != "c" {
			t.Fatalf("FloorList = %+v, %v", fs, err)
		}
	})

	run("Executor/Rejections", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		var seqs []int64
		for i, res := range []string{"a", "b", "a"} {
			r, err := ex.RejectionInsert(ctx, sqlstore.Rejection{Resource: res, Fence: int64(i + 1), Holder: "old", Floor: 10, FloorHolder: "new", NotIssued: i == 2})
			if err != nil || r.Seq == 0 || r.At.IsZero() {
				t.Fatalf("RejectionInsert = %+v, %v", r, err)
			}
			seqs = append(seqs, r.Seq)
		}
		list := func(p sqlstore.RejectionListParams) []sqlstore.Rejection {
			t.Helper()
			rs, err := ex.RejectionList(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return rs
		}
		if rs := list(sqlstore.RejectionListParams{}); len(rs) != 3 || rs[0].Seq != seqs[0] || !rs[2].NotIssued || rs[1].FloorHolder != "new" {
			t.Fatalf("all: %+v", rs)
		}
		if rs := list(sqlstore.RejectionListParams{Resource: "a"}); len(rs) != 2 || rs[1].Seq != seqs[2] {
			t.Fatalf("resource a: %+v", rs)
		}
		if rs := list(sqlstore.RejectionListParams{AfterSeq: seqs[0], Limit: 1}); len(rs) != 1 || rs[0].Seq != seqs[1] {
			t.Fatalf("after the first, one: %+v", rs)
		}
		if rs := list(sqlstore.RejectionListParams{Newest: true}); len(rs) != 3 || rs[0].Seq != seqs[2] {
			t.Fatalf("newest first: %+v", rs)
		}
	})

	run("Executor/Fences", func(t *testing.T, d sqlstore.Driver[TTx]) {
		next := func() int64 {
			t.Helper()
			var f int64
			if err := d.InTx(ctx, func(ex sqlstore.Executor) (err error) { f, err = ex.FenceNext(ctx); return err }); err != nil {
				t.Fatal(err)
			}
			return f
		}
		if a, b := next(), next(); a < 1 || b <= a {
			t.Fatalf("fences %d then %d", a, b)
		}
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error { return ex.FenceAtLeast(ctx, 1000) }); err != nil {
			t.Fatal(err)
		}
		if f := next(); f != 1000 {
			t.Fatalf("after FenceAtLeast(1000): %d", f)
		}
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error { return ex.FenceAtLeast(ctx, 10) }); err != nil {
			t.Fatal(err)
		}
		if f := next(); f != 1001 {
			t.Fatalf("FenceAtLeast moved the sequence back: %d", f)
		}
	})

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
		if _, inserted, err := ex.LeaseGrant(ctx, sqlstore.LeaseGrantParams{Resource: "r", Holder: "b", Fence: 5, RequestID: "q2", TTL: time.Minute}); err != nil || inserted {
			t.Fatalf("second insert = %v, %v; want not inserted", inserted, err)
		}
		if got, err := ex.LeaseGet(ctx, "r"); err != nil || got.Holder != "a" || !got.Live() || got.Now.Before(got.GrantedAt) {
			t.Fatalf("LeaseGet = %+v, %v", got, err)
		}
		if _, err := ex.LeaseGet(ctx, "none"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("LeaseGet(none) = %v, want ErrNotFound", err)
		}
		if got, err := ex.LeaseRenew(ctx, sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 3, TTL: time.Hour}); err != nil || got.Found {
			t.Fatalf("renew of another fence = %+v, %v", got, err)
		}
		got, err := ex.LeaseRenew(ctx, sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Hour})
		if err != nil || !got.Found || got.ExpiresAt.Sub(got.Now) < 59*time.Minute || got.Fence != 4 {
			t.Fatalf("LeaseRenew = %+v, %v", got, err)
		}
		// A renewal never shortens the lease: a shorter ttl keeps the expiry.
		if kept, err := ex.LeaseRenew(ctx, sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Minute}); err != nil ||
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
			if ok, err := ex.LeaseRelease(ctx, "r", "b", fence); err != nil || ok != want {
				t.Fatalf("LeaseRelease #%d = %v, %v; want %v", i, ok, err, want)
			}
		}
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "a", Holder: "c", Fence: 7, RequestID: "q4", TTL: time.Minute})
		rows, err := ex.LeaseList(ctx)
		if err != nil || len(rows) != 2 || rows[0].Resource != "a" || rows[1].Live() || !rows[1].Released {
			t.Fatalf("LeaseList = %+v, %v", rows, err)
		}
	})

	// A driver that renews in batches keeps LeaseRenew's rules for each
	// lease; one that pins connections runs statements on them.
	run("Executor/LeaseRenewBatch", func(t *testing.T, d sqlstore.Driver[TTx]) {
		b, ok := d.Executor().(sqlstore.LeaseBatchRenewer)
		if !ok {
			t.Skip("the driver renews no batch in one statement")
		}
		ex := d.Executor()
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r1", Holder: "a", Fence: 4, RequestID: "q1", TTL: time.Minute})
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r2", Holder: "a", Fence: 5, RequestID: "q2", TTL: time.Minute})
		grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r3", Holder: "a", Fence: 6, RequestID: "q3", TTL: time.Minute})
		if ok, err := ex.LeaseRelease(ctx, "r3", "a", 6); err != nil || !ok {
			t.Fatalf("LeaseRelease = %v, %v", ok, err)
		}
		ps := []sqlstore.LeaseRenewParams{
			{Resource: "r1", Holder: "a", Fence: 4, TTL: time.Hour},
			{Resource: "r2", Holder: "a", Fence: 3, TTL: time.Hour}, // another fence
			{Resource: "r3", Holder: "a", Fence: 6, TTL: time.Hour}, // released
			{Resource: "none", Holder: "a", Fence: 1, TTL: time.Hour},
			{Resource: "r2", Holder: "a", Fence: 5, TTL: 2 * time.Hour},
			{Resource: "r4", Holder: "a", Fence: 7, TTL: time.Minute}, // shorter than its time left
		}
		r4 := grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r4", Holder: "a", Fence: 7, RequestID: "q4", TTL: time.Hour})
		rows, err := b.LeaseRenewBatch(ctx, ps)
		if err != nil || len(rows) != len(ps) {
			t.Fatalf("LeaseRenewBatch = %+v, %v", rows, err)
		}
		if r := rows[5]; !r.Found || !r.ExpiresAt.Equal(r4.ExpiresAt) {
			t.Errorf("r4 renewed with a shorter ttl as %+v, want its expiry kept at %v", r, r4.ExpiresAt)
		}
		for i, want := range []bool{true, false, false, false, true} {
			if rows[i].Found != want {
				t.Errorf("request %d: %+v, want Found %v", i, rows[i], want)
			}
		}
		if r := rows[0]; r.Resource != "r1" || r.Fence != 4 || r.ExpiresAt.Sub(r.Now) != time.Hour {
			t.Errorf("r1 renewed as %+v", r)
		}
		if r := rows[4]; r.Resource != "r2" || r.Fence != 5 || r.ExpiresAt.Sub(r.Now) != 2*time.Hour || !r.Now.Equal(rows[0].Now) {
			t.Errorf("r2 renewed as %+v, at another clock reading than r1 (%v)", r, rows[0].Now)
		}
		if got, err := ex.LeaseGet(ctx, "r3"); err != nil || got.Live() {
			t.Errorf("the released lease after the batch: %+v, %v", got, err)
		}
		if rows, err := b.LeaseRenewBatch(ctx, nil); err != nil || len(rows) != 0 {
			t.Errorf("an empty batch = %+v, %v", rows, err)
		}
	})

	// A one-statement acquisition keeps the coordinator's rules for a
	// request id: a copy of the request that made the live lease gets it
	// (retried), another holder sending that id is told the lease is held,
	// and once the lease is over the id is spent (request_expired).
	run("Executor/LeaseAcquire", func(t *testing.T, d sqlstore.Driver[TTx]) {
		a, ok := d.Executor().(sqlstore.LeaseAcquirer)
		if !ok {
			t.Skip("the driver acquires in no single statement")
		}
		acquire := func(holder, request string) sqlstore.LeaseAcquireResult {
			t.Helper()
			res, err := a.LeaseAcquire(ctx, sqlstore.LeaseAcquireParams{
				Resource: "r", Holder: holder, RequestID: request, TTL: time.Minute, LockTimeout: time.Second,
			})
			if err != nil {
				t.Fatalf("LeaseAcquire(%s, %s): %v", holder, request, err)
			}
			return res
		}
		granted := acquire("a", "q1")
		if granted.Status != sqlstore.AcquireGranted || granted.Lease.Holder != "a" {
			t.Fatalf("first acquisition = %+v", granted)
		}
		for _, c := range []struct {
			holder, request string
			want            sqlstore.AcquireStatus
		}{{"a", "q1", sqlstore.AcquireRetried}, {"b", "q1", sqlstore.AcquireHeld}, {"b", "q2", sqlstore.AcquireHeld}} {
			res := acquire(c.holder, c.request)
			if res.Status != c.want || res.Lease.Holder != "a" || res.Lease.Fence != granted.Lease.Fence {
				t.Errorf("LeaseAcquire(%s, %s) = %+v, want status %d for a's lease", c.holder, c.request, res, c.want)
			}
		}
		if ok, err := d.Executor().LeaseRelease(ctx, "r", "a", granted.Lease.Fence); err != nil || !ok {
			t.Fatalf("LeaseRelease = %v, %v", ok, err)
		}
		if res := acquire("a", "q1"); res.Status != sqlstore.AcquireRequestExpired || res.Fence != granted.Lease.Fence {
			t.Errorf("a late copy of q1 = %+v, want request_expired for fence %d", res, granted.Lease.Fence)
		}
	})

	run("OnConn", func(t *testing.T, d sqlstore.Driver[TTx]) {
		p, ok := any(d).(sqlstore.ConnPinner)
		if !ok {
			t.Skip("the driver pins no connection")
		}
		err := p.OnConn(ctx, func(ex sqlstore.Executor) error {
			grant(t, ex, sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 4, RequestID: "q1", TTL: time.Minute})
			got, err := ex.LeaseRenew(ctx, sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 4, TTL: time.Hour})
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

	run("WaiterQueue", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		var seqs []int64
		for _, h := range []string{"a", "b", "c"} {
			seq, err := ex.WaiterAdd(ctx, "r", h, time.Minute)
			if err != nil {
				t.Fatalf("WaiterAdd(%s): %v", h, err)
			}
			if len(seqs) > 0 && seq <= seqs[len(seqs)-1] {
				t.Fatalf("WaiterAdd gave place %d after %d", seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, seq)
		}
		other, err := ex.WaiterAdd(ctx, "other", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		first, kept, err := ex.WaiterTouch(ctx, "r", seqs[2], time.Minute)
		if err != nil || !kept || first != seqs[0] {
			t.Fatalf("WaiterTouch(last) = %d, %v, %v; want first %d", first, kept, err, seqs[0])
		}
		if err := ex.WaiterRemove(ctx, seqs[0]); err != nil {
			t.Fatal(err)
		}
		if err := ex.WaiterRemove(ctx, seqs[0]); err != nil {
			t.Fatalf("removing a removed waiter: %v", err)
		}
		if first, kept, err := ex.WaiterTouch(ctx, "r", seqs[0], time.Minute); err != nil || kept {
			t.Fatalf("WaiterTouch(removed) = %d, %v, %v; want not kept", first, kept, err)
		}
		if first, _, err := ex.WaiterTouch(ctx, "r", seqs[2], time.Minute); err != nil || first != seqs[1] {
			t.Fatalf("WaiterTouch after a removal = %d, %v; want %d", first, err, seqs[1])
		}
		ws, err := ex.WaiterList(ctx, "r")
		if err != nil || len(ws) != 2 || ws[0].Seq != seqs[1] || ws[0].Holder != "b" || ws[1].Seq != seqs[2] || !ws[0].ExpiresAt.After(time.Now().Add(-time.Hour)) {
			t.Fatalf("WaiterList = %+v, %v", ws, err)
		}
		if ws, err := ex.WaiterList(ctx, "other"); err != nil || len(ws) != 1 || ws[0].Seq != other {
			t.Fatalf("WaiterList(other) = %+v, %v", ws, err)
		}
	})
}
