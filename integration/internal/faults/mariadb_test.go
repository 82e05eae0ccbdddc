package faults

import (
	"context"
	"os"
	"testing"

	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// TestMariaDBCrash: a row committed before the SIGKILL is there after the
// restart on the same data directory, and one left uncommitted is not.
func TestMariaDBCrash(t *testing.T) {
	skipWithoutMariaDB(t)
	ctx := context.Background()
	m, err := StartMariaDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	url, err := m.CreateDatabase(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	d, err := mysql.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	db := d.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INT PRIMARY KEY) ENGINE = InnoDB`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if err := m.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback() // its connection died with the server
	var n, sum int
	for range 3 { // the pool's connections died too: database/sql retries a bad one
		if err = db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(id), 0) FROM t`).Scan(&n, &sum); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || sum != 1 {
		t.Errorf("after the crash: %d rows summing to %d, want only the committed row 1", n, sum)
	}
}

// skipWithoutMariaDB skips t loudly where no throwaway MariaDB can be made,
// or fails it under FENCEGATE_REQUIRE_MYSQL=true.
func skipWithoutMariaDB(t *testing.T) {
	t.Helper()
	if err := CanMariaDB(); err != nil {
		if os.Getenv(mysqltest.EnvRequire) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, mysqltest.EnvRequire)
		}
		t.Skipf("\n*** MARIADB TEST SKIPPED: %v ***\n", err)
	}
}
