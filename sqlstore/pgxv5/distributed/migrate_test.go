package distributed_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3/database"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
)

// The profile's migrations run through goose with its own version table:
// status, down (every table dropped) and up again; a store whose table is
// not fencegate's is refused before anything runs.
func TestMigrationsUpDownUp(t *testing.T) {
	ctx := context.Background()
	d := open(t, "", nil, nil)
	db := stdlib.OpenDBFromPool(d.Pool())
	defer db.Close()
	m := distributed.Migrations()
	st, err := sqlstore.MigrateStatus(ctx, db, m)
	if err != nil || len(st) == 0 || !st[len(st)-1].Applied {
		t.Fatalf("status = %+v, %v", st, err)
	}
	if err := sqlstore.MigrateDown(ctx, db, m); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().FloorList(ctx); !errors.Is(err, sqlstore.ErrNotMigrated) {
		t.Fatalf("after down: %v, want ErrNotMigrated", err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Executor().FenceNext(ctx); err != nil || f != 1 {
		t.Fatalf("first fence after up again = %d, %v", f, err)
	}

	other, err := database.NewStore("postgres", "goose_db_version")
	if err != nil {
		t.Fatal(err)
	}
	m.Store = other
	if err := sqlstore.MigrateUp(ctx, db, m); err == nil {
		t.Fatal("a store with another version table was taken")
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
 WHERE table_schema = current_schema() AND table_name = 'goose_db_version'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("goose_db_version tables: %d, %v; want none", n, err)
	}
}

// Without a migration lock, processes migrating a new database together
// collide; MigrateUp's retries and the migration's idempotent statements
// get every one of them through, and the schema is migrated once.
func TestConcurrentMigrate(t *testing.T) {
	ctx := context.Background()
	url := dbtest.PostgresSchemaURL(t)
	const n = 4
	drivers := make([]*distributed.Driver, n)
	for i := range drivers {
		d, err := distributed.New(openPool(t, url, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		drivers[i] = d
	}
	errs := make(chan error, n)
	start := make(chan struct{})
	for _, d := range drivers {
		go func() {
			<-start
			errs <- d.Migrate(ctx)
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Migrate: %v", err)
		}
	}
	files, err := fs.Glob(distributed.Migrations().FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var versions, counters int
	err = drivers[0].Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM fencegate_goose_version WHERE version_id > 0),
  (SELECT count(*) FROM fencegate_counter)`).Scan(&versions, &counters)
	if err != nil || versions != len(files) || counters != 3 {
		t.Fatalf("versions %d, counters %d, %v; want %d and 3", versions, counters, err, len(files))
	}
}
