package pgsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// Postgres through database/sql: Open makes a pgx pool and a *sql.DB on
// it, Close releases both, and the transactions are *sql.Tx. A token the
// coordinator never issued commits nothing.
func ExampleOpen() {
	ctx := context.Background()
	d, err := pgsql.Open(ctx, os.Getenv("DATABASE_URL")) // postgres://user@host:5432/app
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, &gate.Options{VerifyIssued: true})
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "worker-a"})
	if err != nil {
		log.Fatal(err)
	}
	l, err := lease.NewCoordinator(d, nil).AcquireWait(ctx, client, "invoice-42")
	if err != nil {
		log.Fatal(err)
	}

	send := func(token fence.Token) error {
		return g.Do(ctx, token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE invoices SET state = 'sent' WHERE id = $1`, 42)
			return err
		})
	}
	fmt.Println("with the lease's token:", send(l.Token()))
	forged := fence.Token{Resource: "invoice-42", Holder: "mallory", Fence: 99}
	fmt.Println("forged token refused:", errors.Is(send(forged), gate.ErrStaleFence)) // logged and recorded
	// Output:
	// with the lease's token: <nil>
	// forged token refused: true
}
