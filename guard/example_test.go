package guard_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/fencegate/fencegate/guard"
)

// Guard a table by a resource computed from each row, then print the same
// guard as a goose migration for a table not yet guarded. It needs a
// migrated Postgres database, so it is compiled, not run.
func ExampleAdmin_Install() {
	ctx := context.Background()
	var db *sql.DB // sql.Open("pgx", dsn), or stdlib.OpenDBFromPool(pool)
	admin, err := guard.New(db, "postgres")
	if err != nil {
		log.Fatal(err)
	}
	g, err := admin.Install(ctx, guard.Spec{Table: "orders", ResourceExpr: "'tenant:' || tenant_id"})
	if err != nil {
		log.Fatal(err) // errors.Is(err, guard.ErrNoTable), ErrAlreadyGuarded, ErrInvalidSpec, …
	}
	fmt.Println("guarded", g.Table)

	m, err := admin.SQL(ctx, guard.Spec{Table: "deploy_config", Resource: "deploy-config"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(m.Goose()) // -- +goose Up … -- +goose Down …
}

// A write the guard refused aborts its transaction; IsRefused tells it.
func ExampleIsRefused() {
	ctx := context.Background()
	var db *sql.DB
	_, err := db.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = 42`) // no fence
	if guard.IsRefused(err) {
		fmt.Println("refused:", err) // … no fence in this transaction
	}
}
