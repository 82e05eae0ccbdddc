package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// Open a SQLite file (WAL, synchronous=FULL, a busy timeout, BEGIN
// IMMEDIATE), migrate it, and write through the gate: a newer fence
// raises the floor, an older one is then refused and nothing of its
// transaction commits.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	d, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE deploys (slot TEXT PRIMARY KEY, version TEXT)`); err != nil {
		log.Fatal(err)
	}
	g := gate.New(d, nil) // fences from another coordinator: see gate.Options.VerifyIssued

	deploy := func(n int64, version string) error {
		token := fence.Token{Resource: "deploy-slot", Holder: "agent-" + version, Fence: n}
		return g.Do(ctx, token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO deploys VALUES ('web', ?) ON CONFLICT (slot) DO UPDATE SET version = excluded.version`, version)
			return err
		})
	}
	fmt.Println("fence 2:", deploy(2, "v2"))
	err = deploy(1, "v1") // a stale holder, late
	fmt.Println("fence 1 refused:", errors.Is(err, gate.ErrStaleFence))
	var version string
	if err := d.DB().QueryRowContext(ctx, `SELECT version FROM deploys`).Scan(&version); err != nil {
		log.Fatal(err)
	}
	fmt.Println("deployed:", version)

	// Output:
	// fence 2: <nil>
	// fence 1 refused: true
	// deployed: v2
}

// NewConnector opens a *sql.DB of the program's own for New, each
// connection checked as it opens: synchronous=NORMAL is kept and reported
// as a durability warning, journal_mode=OFF refused.
func ExampleNewConnector() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	conn, err := sqlite.NewConnector("file:" + filepath.Join(dir, "app.db") + "?_pragma=synchronous(NORMAL)")
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	d := sqlite.New(db)
	defer d.Close()
	warnings, err := d.DurabilityWarnings(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(warnings), "warning")

	conn, err = sqlite.NewConnector("file:" + filepath.Join(dir, "off.db") + "?_pragma=journal_mode(off)")
	if err != nil {
		log.Fatal(err)
	}
	off := sql.OpenDB(conn)
	defer off.Close()
	err = off.PingContext(ctx)
	fmt.Println(errors.Is(err, sqlstore.ErrUnsafeSettings))
	// Output:
	// 1 warning
	// true
}
