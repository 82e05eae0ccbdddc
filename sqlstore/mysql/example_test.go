package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// Config maps a mysql:// URL onto go-sql-driver/mysql's configuration, for a
// program that opens the *sql.DB itself and hands it to New.
func ExampleConfig() {
	cfg, err := mysql.Config("mysql://app:s%40cret@db.internal/orders?timeout=5s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.User, cfg.Addr, cfg.DBName, cfg.Timeout, cfg.ParseTime, cfg.ClientFoundRows)

	_, err = mysql.Config("mysql://app:s%40cret@db.internal/orders?clientFoundRows=true")
	fmt.Println(err)
	// Output:
	// app db.internal:3306 orders 5s true false
	// fencegate: invalid DSN: "mysql://app:xxxxx@db.internal/orders?clientFoundRows=true": clientFoundRows=true would hide the floor upsert's outcome
}

// A fenced write on MySQL or MariaDB: the gate's check and the write commit
// together in the caller's *sql.Tx. (Not run: it needs a server.)
func ExampleNew() {
	ctx := context.Background()
	cfg, err := mysql.Config("mysql://app:secret@127.0.0.1:3306/orders")
	if err != nil {
		log.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg) // checks each connection's session
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	d := mysql.New(db)
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, nil)
	token := fence.Token{Resource: "invoice-42", Holder: "worker-a", Fence: 7}
	err = g.Do(ctx, token, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE invoices SET state = 'sent' WHERE id = ?`, 42)
		return err
	})
	if err != nil {
		log.Fatal(err) // a *gate.StaleFenceError if a newer holder got there
	}
}
