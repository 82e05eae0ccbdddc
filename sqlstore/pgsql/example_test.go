package pgsql_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// Postgres through database/sql: Open makes a pgx pool and a *sql.DB on
// it, Close releases both, and the transactions are *sql.Tx. (Not run: it
// needs a server.)
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

	token := gate.Token{Resource: "invoice-42", Holder: "worker-a", Fence: 7} // from the lease
	err = g.Do(ctx, token, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE invoices SET state = 'sent' WHERE id = $1`, 42)
		return err
	})
	if errors.Is(err, gate.ErrStaleFence) {
		log.Printf("superseded: %v", err) // logged and recorded; nothing was written
	} else if err != nil {
		log.Fatal(err)
	}
}
