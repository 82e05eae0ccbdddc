package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// Every lock variant of scenarios 7 and fairness (its bound included) completes cycles, fenced
// write included, without error.
func TestLockVariantsCycle(t *testing.T) {
	ctx := context.Background()
	pg, err := NewPG(ctx, dbtest.PostgresURL(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })
	for _, v := range fairVariants {
		// The run ends once a few cycles are done, however long a loaded
		// machine takes to get there, or at a bound far past that: a fixed
		// 300 ms run could end before the first cycle did.
		const enough = 4
		run, done := context.WithCancel(ctx)
		var cycles atomic.Int64
		_, err := runLockWorkers(run, pg, v, 2, 30*time.Second, true, cycleHooks{released: func(int) {
			if cycles.Add(1) == enough {
				done()
			}
		}})
		done()
		if err != nil {
			t.Errorf("%s: %v", v, err)
		}
		if cycles.Load() == 0 {
			t.Errorf("%s: no cycle completed", v)
		}
	}
}
