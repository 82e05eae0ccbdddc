package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/fencegate/fencegate/migrations/sqlite"
)

// An application's own goose flow runs fencegate's migrations in a
// provider of their own: fencegate's version table, and no Go migrations
// from goose's global registry, which are the application's.
func ExampleFS() {
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	fg, err := goose.NewProvider(goose.DialectSQLite3, db, sqlite.FS(),
		goose.WithTableName("fencegate_goose_version"),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := fg.Up(ctx); err != nil {
		log.Fatal(err)
	}
	var floors int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM fencegate_floor`).Scan(&floors); err != nil {
		log.Fatal(err)
	}
	fmt.Println("fencegate_floor rows:", floors)
	// Output: fencegate_floor rows: 0
}
