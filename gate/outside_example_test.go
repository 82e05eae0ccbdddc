package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// A fence from a lock service outside the database (an etcd revision, say)
// is admitted the moment the lock is granted, before the holder reads what
// its write depends on. Worker A was granted the lock at revision 10 and
// stalled past its lease; B was granted it at revision 15 and admitted 15,
// so A's late increment is refused and B's is not lost.
func ExampleGate_Admit() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fencegate-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := store.DB().Exec(`CREATE TABLE counter (n INTEGER); INSERT INTO counter VALUES (0)`); err != nil {
		log.Fatal(err)
	}
	g := gate.New(store, nil)

	// granted is what a holder does when its lock service grants the lock:
	// build the token and admit it, before reading anything.
	granted := func(holder string, revision int64) fence.Token {
		token, err := fence.NewToken("counter", holder, revision)
		if err != nil {
			log.Fatal(err)
		}
		if err := g.Admit(ctx, token); err != nil {
			log.Fatal(err)
		}
		return token
	}
	read := func() (n int) {
		_ = store.DB().QueryRow(`SELECT n FROM counter`).Scan(&n)
		return n
	}
	write := func(token fence.Token, n int) error {
		tx, err := store.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := g.Commit(ctx, tx, token); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE counter SET n = ?`, n); err != nil {
			return err
		}
		return tx.Commit()
	}

	a := granted("worker-a", 10)
	seenByA := read() // then A stalls past its lease
	b := granted("worker-b", 15)
	seenByB := read()
	fmt.Println("A refused:", errors.Is(write(a, seenByA+1), gate.ErrStaleFence))
	fmt.Println("B writes:", write(b, seenByB+1))
	fmt.Println("counter:", read())
	// Output:
	// A refused: true
	// B writes: <nil>
	// counter: 1
}
