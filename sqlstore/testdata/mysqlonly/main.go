// Command mysqlonly is a MySQL program using fencegate's gate and lease: it
// must link neither pgx nor SQLite. It prints the database/sql drivers
// registered.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

func main() {
	fmt.Println(sql.Drivers())
	if len(os.Args) < 2 {
		return
	}
	d, err := mysql.Open(context.Background(), os.Args[1])
	if err != nil {
		panic(err)
	}
	defer d.Close()
	_ = gate.New(d, nil)
	_ = lease.NewCoordinator(d, nil)
}
