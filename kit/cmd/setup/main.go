// Command setup makes a fresh, migrated schema (Postgres), database
// (MariaDB/MySQL) or file (SQLite, in the temporary directory) for one run
// of a conformance kit runner, and prints its name (SQLite: its path);
// with -drop it drops one it made.
//
//	go run ./kit/cmd/setup postgres        # prints fgkit_<time>_<hex>
//	go run ./kit/cmd/setup -drop NAME mysql
//	go run ./kit/cmd/setup sqlite          # prints $TMPDIR/fgkit_<time>_<hex>.db
//
// The servers come from FENCEGATE_TEST_DATABASE_URL and
// FENCEGATE_TEST_MYSQL_URL; one that is unset or unreachable is an error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fencegate/fencegate/kit/kitdb"
)

func main() {
	drop := flag.String("drop", "", "drop this schema or database instead of making one")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: setup [-drop NAME] postgres|mysql|sqlite")
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if *drop != "" {
		if err := kitdb.Drop(ctx, flag.Arg(0), *drop); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	name, err := kitdb.Create(ctx, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(name)
}
