package sqlstoretest

import (
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

// exercisePrune states Executor.Prune's rejection retention and batch
// limit: the oldest go, the newest RejectionKeep stay, at most Limit per
// call, and floors are untouched. (Request and waiter pruning depend on
// the database's clock: lease's TestRetryAfterPruningIsNeverGrantedTwice.)
func exercisePrune[TTx any](run runner[TTx]) {
	run("PruneRejections", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		if _, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 9}); err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for i := range 5 {
			rej, err := ex.RejectionInsert(ctx, sqlstore.Rejection{Resource: "r", Fence: int64(i + 1), Holder: "old", Floor: 9, FloorHolder: "h"})
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, rej.Seq)
		}
		res, err := ex.Prune(ctx, &sqlstore.PruneParams{RejectionKeep: 2, Limit: 2})
		if err != nil || res.Rejections != 2 {
			t.Fatalf("Prune(keep 2, limit 2) = %+v, %v; want 2 rejections deleted", res, err)
		}
		if res, err = ex.Prune(ctx, &sqlstore.PruneParams{RejectionKeep: 2, Limit: 2}); err != nil || res.Rejections != 1 {
			t.Fatalf("second Prune = %+v, %v; want the third oldest deleted", res, err)
		}
		if res, err = ex.Prune(ctx, &sqlstore.PruneParams{RejectionKeep: 2, Limit: 2}); err != nil || res != (sqlstore.PruneResult{}) {
			t.Fatalf("third Prune = %+v, %v; want nothing left to delete", res, err)
		}
		left, err := ex.RejectionList(ctx, &sqlstore.RejectionListParams{})
		if err != nil || len(left) != 2 || left[0].Seq != seqs[3] || left[1].Seq != seqs[4] {
			t.Fatalf("rejections left = %+v, %v; want the newest two, %v", left, err, seqs[3:])
		}
		if f, err := ex.FloorGet(ctx, "r"); err != nil || f.Floor != 9 {
			t.Fatalf("floor after pruning = %+v, %v; want 9", f, err)
		}
	})
}
