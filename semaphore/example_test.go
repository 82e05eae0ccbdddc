package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/semaphore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// openExample opens a fresh, migrated SQLite database in a temporary
// directory, and returns a function that removes it.
func openExample(ctx context.Context) (*sqlite.Driver, func()) {
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "fencegate.db"))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	return store, func() { store.Close(); os.RemoveAll(dir) }
}

// Two permits on a pool of build runners: a third worker is told it must
// wait; each permit's token fences the writes of its own slot. (Fences
// come from one sequence, which the line's lease draws from too.)
func Example() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 10 * time.Second})

	worker := func(holder string) *semaphore.Semaphore {
		c, _ := lease.NewClient(&lease.ClientOptions{Holder: holder})
		s, err := semaphore.New(coord, c, "runners", 2)
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	a, b, c := worker("a"), worker("b"), worker("c")
	pa, _ := a.Acquire(ctx)
	pb, _ := b.Acquire(ctx)
	fmt.Println(pa, "/", pb)
	var held *lease.HeldError
	if _, err := c.TryAcquire(ctx); errors.As(err, &held) {
		fmt.Printf("c must wait: %s holds %s\n", held.HeldBy, held.Resource)
	}
	_ = pa.Release(ctx)
	pc, _ := c.Acquire(ctx)
	fmt.Println(pc, "writes as", pc.Token().Resource)

	_, err := c.Release(ctx, fence.Token{Resource: "other#0", Holder: "c", Fence: 1})
	fmt.Println(err)
	// Output:
	// runners permit 0 (fence 2) / runners permit 1 (fence 4)
	// c must wait: a holds runners#0
	// runners permit 0 (fence 6) writes as runners#0
	// fencegate: invalid token: resource "other#0" is not a permit of semaphore "runners"
}

// N lowered in the database while both permits are live: neither is
// revoked, and nothing is granted until fewer than the new N are live,
// whatever N each participant was built with.
func ExampleSemaphore_SetPermits() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 10 * time.Second})

	worker := func(holder string) *semaphore.Semaphore {
		c, _ := lease.NewClient(&lease.ClientOptions{Holder: holder})
		s, err := semaphore.New(coord, c, "runners", 2)
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	a, b, c := worker("a"), worker("b"), worker("c")
	pa, _ := a.Acquire(ctx)
	pb, _ := b.Acquire(ctx)
	if err := c.SetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	n, _, _ := a.StoredPermits(ctx)
	fmt.Println("N is now", n, "- a and b still hold theirs:", !pa.Lease().Expired(), !pb.Lease().Expired())
	_ = pa.Release(ctx)
	if _, err := c.TryAcquire(ctx); errors.Is(err, lease.ErrHeld) {
		fmt.Println("one live of one: c must wait")
	}
	_ = pb.Release(ctx)
	pc, _ := c.TryAcquire(ctx)
	fmt.Println(pc)
	fmt.Println(c.SetPermits(ctx, 0))
	// Output:
	// N is now 1 - a and b still hold theirs: true true
	// one live of one: c must wait
	// runners permit 0 (fence 6)
	// fencegate: invalid permits: must be 1 to 1024, got 0
}
