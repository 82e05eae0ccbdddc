package sqlstoretest

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseWaiters states the waiters' queue.
func exerciseWaiters[TTx any](run runner[TTx]) {
	run("WaiterQueue", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		var seqs []int64
		for _, h := range []string{"a", "b", "c"} {
			seq, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: "r", Holder: h, TTL: time.Minute})
			if err != nil {
				t.Fatalf("WaiterAdd(%s): %v", h, err)
			}
			if len(seqs) > 0 && seq <= seqs[len(seqs)-1] {
				t.Fatalf("WaiterAdd gave place %d after %d", seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, seq)
		}
		other, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: "other", Holder: "a", TTL: time.Minute})
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
