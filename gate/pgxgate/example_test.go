package pgxgate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// A fenced write in one round trip: the fence, the statements and the
// commit go as one pipeline, and a stale fence fails first, so Postgres
// runs none of them.
func ExampleCommitBatch() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	d := pgxv5.New(pool)
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, nil)

	for _, n := range []int64{7, 6} { // from the lease: 6 is an older holder's
		token := fence.Token{Resource: "account/42", Holder: "worker-a", Fence: n}
		b := &pgx.Batch{}
		b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42)
		b.Queue(`INSERT INTO ledger (account, amount) VALUES ($1, $2)`, 42, -10)
		err = pgxgate.CommitBatch(ctx, g, pool, token, b)
		if errors.Is(err, gate.ErrStaleFence) {
			fmt.Printf("fence %d superseded; nothing was written\n", n) // logged and recorded
		} else if err != nil {
			log.Fatal(err)
		} else {
			fmt.Printf("fence %d committed\n", n)
		}
	}
	var entries int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&entries); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger entries:", entries)
	// Output:
	// fence 7 committed
	// fence 6 superseded; nothing was written
	// ledger entries: 1
}

// A fenced transaction in the round trips of an unfenced one: BEGIN and
// the fence travel together, the writes follow, and COMMIT commits them
// with the floor raise. A stale token never gets a transaction.
func ExampleBeginFenced() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	d := pgxv5.New(pool)
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, nil)

	token := fence.Token{Resource: "account/43", Holder: "worker-a", Fence: 7} // from the lease
	tx, err := pgxgate.BeginFenced(ctx, g, pool, token, pgx.TxOptions{})
	if errors.Is(err, gate.ErrStaleFence) {
		log.Printf("superseded: %v", err) // logged and recorded; nothing was written
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	tag, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 43)
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed:", tag)
	// Output:
	// committed: UPDATE 1
}
