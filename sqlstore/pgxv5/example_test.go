package pgxv5_test

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
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// A fenced write on a pgx pool: the driver's transactions are pgx.Tx, and
// g.Do begins, checks the fence, runs the function and commits. A token
// the coordinator never issued commits nothing.
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
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "worker-a"})
	if err != nil {
		log.Fatal(err)
	}
	l, err := lease.NewCoordinator(d, nil).AcquireWait(ctx, client, "account/42")
	if err != nil {
		log.Fatal(err)
	}

	withdraw := func(token fence.Token) error {
		return g.Do(ctx, token, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42)
			return err
		})
	}
	fmt.Println("with the lease's token:", withdraw(l.Token()))
	forged := fence.Token{Resource: "account/42", Holder: "mallory", Fence: 99}
	fmt.Println("forged token refused:", errors.Is(withdraw(forged), gate.ErrStaleFence)) // logged and recorded

	var balance int
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 42`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// with the lease's token: <nil>
	// forged token refused: true
	// balance: 90
}

// The driver's half of a one-round-trip fenced write, for a package that
// logs refusals its own way (gate/pgxgate's CommitBatch is the whole, with
// the gate's rejection log): the fence statement, the batch and COMMIT in
// one pipeline, answered as Executor.FloorRaise answers.
func ExampleFloorRaiseBatch() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgxv5.New(pool).Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	for _, fence := range []int64{7, 6} {
		b := &pgx.Batch{}
		b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 43)
		tx, res, err := pgxv5.FloorRaiseBatch(ctx, pool, sqlstore.FloorRaiseParams{Resource: "account/43", Holder: "worker-a", Fence: fence}, b)
		if tx != nil {
			tx.Rollback(ctx) // committed or not, this returns the pool's connection
		}
		switch {
		case err != nil:
			log.Fatal(err) // nothing of the batch committed
		case !res.Admitted:
			fmt.Printf("fence %d refused: floor %d held by %q; nothing ran\n", fence, res.Floor, res.FloorHolder)
		default:
			fmt.Printf("fence %d admitted, and the batch committed\n", fence)
		}
	}
	// Output:
	// fence 7 admitted, and the batch committed
	// fence 6 refused: floor 7 held by "worker-a"; nothing ran
}

// The driver's half of a fenced begin in one round trip (gate/pgxgate's
// BeginFenced is the whole): BEGIN and the fence together, the floor row
// locked until the transaction ends.
func ExampleBeginFloorRaise() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgxv5.New(pool).Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	tx, res, err := pgxv5.BeginFloorRaise(ctx, pool, sqlstore.FloorRaiseParams{Resource: "account/44", Holder: "worker-a", Fence: 7}, pgx.TxOptions{})
	if tx != nil {
		defer tx.Rollback(ctx) // a no-op after Commit
	}
	if err != nil || !res.Admitted {
		log.Fatalf("not admitted: %+v, %v", res, err)
	}
	tag, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 44)
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
