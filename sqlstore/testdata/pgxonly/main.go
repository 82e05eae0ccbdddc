// Command pgxonly is a pgx program using fencegate's gate and lease: it
// must link no SQLite and register no database/sql driver but pgx's own. It
// prints the database/sql drivers registered.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

func main() {
	fmt.Println(sql.Drivers())
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	d := pgxv5.New(pool)
	_ = gate.New(d, nil)
	_ = lease.NewCoordinator(d, nil)
}
