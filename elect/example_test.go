package elect_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/elect"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
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

// Two schedulers stand for election; the first leads and writes under its
// term's fence and resigns; the second takes over. The first's
// late write is refused by the gate.
func Example() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 10 * time.Second})
	g := gate.New(store, nil)

	elector := func(holder string) *elect.Elector {
		c, _ := lease.NewClient(&lease.ClientOptions{Holder: holder})
		e, err := elect.New(coord, c, &elect.Options{Name: "scheduler"})
		if err != nil {
			log.Fatal(err)
		}
		return e
	}
	a, b := elector("sched-a"), elector("sched-b")

	term, err := a.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := b.Leader(ctx) // any participant can ask
	fmt.Printf("%s leads with fence %d\n", leader.Identity, leader.Fence)
	write := func(tok fence.Token) error {
		return g.Do(ctx, tok, func(context.Context, *sql.Tx) error { return nil })
	}
	fmt.Println("a's write:", write(term.Token()))

	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	bTerm, err := b.Campaign(ctx) // would wait in line while a led
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("b leads with fence %d\n", bTerm.Fence())
	fmt.Println("a's late write refused:", write(term.Token()) != nil)
	fmt.Println("a resigns again:", a.Resign(ctx))
	_ = bTerm.Resign(ctx)
	// Output:
	// sched-a leads with fence 1
	// a's write: <nil>
	// b leads with fence 2
	// a's late write refused: true
	// a resigns again: fencegate: not the leader
}
