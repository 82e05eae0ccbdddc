package sqlstoretest

import (
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseSemaphores states the stored number of a semaphore's permits.
func exerciseSemaphores[TTx any](run runner[TTx]) {
	run("SemaphorePermits", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		if n, found, err := ex.SemaphorePermits(ctx, "s"); err != nil || found {
			t.Fatalf("SemaphorePermits before any = %d, %v, %v; want none", n, found, err)
		}
		for _, n := range []int{3, 1} { // stored, then replaced
			if err := ex.SetSemaphorePermits(ctx, "s", n); err != nil {
				t.Fatalf("SetSemaphorePermits(%d): %v", n, err)
			}
			if got, found, err := ex.SemaphorePermits(ctx, "s"); err != nil || !found || got != n {
				t.Fatalf("SemaphorePermits = %d, %v, %v; want %d", got, found, err, n)
			}
		}
		if _, found, err := ex.SemaphorePermits(ctx, "other"); err != nil || found {
			t.Fatalf("another semaphore's permits = %v, %v; want none", found, err)
		}
		if err := ex.SetSemaphorePermits(ctx, "s", 0); err == nil {
			t.Fatal("SetSemaphorePermits(0) stored a semaphore with no permits")
		}
		if got, _, err := ex.SemaphorePermits(ctx, "s"); err != nil || got != 1 {
			t.Fatalf("after a refused store, permits = %d, %v; want 1 unchanged", got, err)
		}
	})
}
