package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// Every lock variant of scenarios 7 and fairness completes cycles, fenced
// write included, without error.
func TestLockVariantsCycle(t *testing.T) {
	ctx := context.Background()
	pg, err := NewPG(ctx, dbtest.PostgresURL(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })
	for _, v := range lockVariants {
		var cycles atomic.Int64
		err := runLockWorkers(ctx, pg, v, 2, 300*time.Millisecond, true, cycleHooks{released: func(int) { cycles.Add(1) }})
		if err != nil {
			t.Errorf("%s: %v", v, err)
		}
		if cycles.Load() == 0 {
			t.Errorf("%s: no cycle completed", v)
		}
	}
}
