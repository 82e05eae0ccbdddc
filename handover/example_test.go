package handover_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/handover"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// openExample opens a migrated SQLite database in a temporary directory and
// returns it with the function that removes it.
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

// A turn of a contended lock in one commit: alice's last write, her
// release and bob's grant commit together, and bob, waiting his turn,
// returns with the next fence without sending an acquisition.
func ExampleDo() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
	g := gate.New(store, nil)
	alice, _ := lease.NewClient(&lease.ClientOptions{Holder: "alice"})
	bob, _ := lease.NewClient(&lease.ClientOptions{Holder: "bob"})

	held, err := coord.AcquireWait(ctx, alice, "deploy-slot")
	if err != nil {
		log.Fatal(err)
	}
	granted := make(chan *lease.Lease)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := coord.AcquireWait(ctx, bob, "deploy-slot")
		if err != nil {
			log.Fatal(err)
		}
		granted <- l
	}()
	for ws, _ := coord.Waiters(ctx, "deploy-slot"); len(ws) == 0; ws, _ = coord.Waiters(ctx, "deploy-slot") {
		time.Sleep(time.Millisecond) // bob is not in the queue yet
	}

	off, err := handover.Do(ctx, g, coord, held, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS deploys (version TEXT)`)
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO deploys VALUES ('v2')`)
		}
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	next := <-granted
	fmt.Println("handed to", off.To, "with fence", off.Fence)
	fmt.Println(next.Token().Holder, "holds fence", next.Token().Fence)
	// Its first term lasts no longer than its place in the queue would
	// have (WaiterTTL, 3 s): a renewal (Renew, Keep, Hold) extends it.
	fmt.Println("first term within the WaiterTTL:", next.Remaining() <= 3*time.Second)
	token, _ := bob.Release(next)
	if _, err := coord.Release(ctx, token); err != nil {
		log.Fatal(err)
	}

	// Output:
	// handed to bob with fence 2
	// bob holds fence 2
	// first term within the WaiterTTL: true
}
