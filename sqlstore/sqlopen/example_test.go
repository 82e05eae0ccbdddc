package sqlopen_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// Open chooses the driver by the DSN's form: a path is a SQLite file, a
// postgres:// URL or libpq's key=value settings Postgres, a mysql:// URL
// MySQL or MariaDB. Any other form is refused, not taken for a file name.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	d, err := sqlopen.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Dialect(), d.ClockPrecision())

	_, err = sqlopen.Open(ctx, "redis://root:secret@localhost/0")
	fmt.Println(err)
	// Output:
	// sqlite 1ms
	// fencegate: invalid DSN: "redis://root:xxxxx@localhost/0": unsupported scheme "redis" (want postgres://, mysql://, file:, Postgres key=value settings or a path; a SQLite file whose name has ":" is written ./NAME or file:NAME)
}
