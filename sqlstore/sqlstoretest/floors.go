package sqlstoretest

import (
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseFloors states the gate's floors, the rejection log and the
// fence sequence.
func exerciseFloors[TTx any](run runner[TTx]) {
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
		if f := floorOf(t, ex, "r"); f.Floor != 7 || f.Holder != "c" || f.UpdatedAt.IsZero() {
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
			rs, err := ex.RejectionList(ctx, &p)
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
}
