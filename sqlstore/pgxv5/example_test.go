package pgxv5_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// A fenced write on a pgx pool: the driver's transactions are pgx.Tx, and
// g.Do begins, checks the fence, runs the function and commits. (Not run:
// it needs a server.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close() // the driver has no Close: the pool stays the caller's
	d := pgxv5.New(pool)
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, &gate.Options{VerifyIssued: true})

	token := gate.Token{Resource: "account/42", Holder: "worker-a", Fence: 7} // from the lease
	err = g.Do(ctx, token, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42)
		return err
	})
	if errors.Is(err, gate.ErrStaleFence) {
		log.Printf("superseded: %v", err) // logged and recorded; nothing was written
	} else if err != nil {
		log.Fatal(err)
	}
}
