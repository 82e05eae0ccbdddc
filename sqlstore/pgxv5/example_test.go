package pgxv5_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
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

// The driver's half of a one-round-trip fenced write, for a package that
// logs refusals its own way (gate/pgxgate's CommitBatch is the whole, with
// the gate's rejection log): the fence statement, the batch and COMMIT in
// one pipeline, answered as Executor.FloorRaise answers. (Not run: it needs
// a server.)
func ExampleFloorRaiseBatch() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	b := &pgx.Batch{}
	b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42)
	tx, res, err := pgxv5.FloorRaiseBatch(ctx, pool, sqlstore.FloorRaiseParams{Resource: "account/42", Holder: "worker-a", Fence: 7}, b)
	if tx != nil {
		defer tx.Rollback(ctx) // committed or not, this returns the pool's connection
	}
	switch {
	case err != nil:
		log.Fatal(err) // nothing of the batch committed
	case !res.Admitted:
		log.Printf("refused: floor %d held by %q; nothing ran", res.Floor, res.FloorHolder)
	}
}

// The driver's half of a fenced begin in one round trip (gate/pgxgate's
// BeginFenced is the whole): BEGIN and the fence together, the floor row
// locked until the transaction ends. (Not run: it needs a server.)
func ExampleBeginFloorRaise() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	tx, res, err := pgxv5.BeginFloorRaise(ctx, pool, sqlstore.FloorRaiseParams{Resource: "account/42", Holder: "worker-a", Fence: 7}, pgx.TxOptions{})
	if tx != nil {
		defer tx.Rollback(ctx) // a no-op after Commit
	}
	if err != nil || !res.Admitted {
		log.Fatalf("not admitted: %+v, %v", res, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
