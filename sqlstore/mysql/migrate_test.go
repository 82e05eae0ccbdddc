package mysql_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// Processes that start together on a new database all migrate it: GET_LOCK
// and the retry make every one of them succeed, and the migration runs once.
func TestMigrateRace(t *testing.T) {
	dsn := databaseURL(t, nil)
	const n = 8
	drivers := make([]*mysql.Driver, n)
	for i := range drivers {
		drivers[i] = openURL(t, dsn) // one pool each, as separate processes have
	}
	ctx := context.Background()
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, d := range drivers {
		wg.Go(func() {
			<-start
			errs[i] = d.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	var applied, counters int
	db := drivers[0].DB()
	if err := db.QueryRow(`SELECT COUNT(*) FROM fencegate_goose_version WHERE version_id = 1`).Scan(&applied); err != nil || applied != 1 {
		t.Fatalf("version 1 recorded %d times, %v; want once", applied, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM fencegate_fence_seq`).Scan(&counters); err != nil || counters != 1 {
		t.Fatalf("%d counter rows, %v; want 1", counters, err)
	}
}

// MySQL commits each DDL statement on its own, so a first migration cut
// short leaves some tables behind; the next run finishes it.
func TestMigrateFinishesPartialRun(t *testing.T) {
	d := openURL(t, databaseURL(t, nil))
	ctx := context.Background()
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE fencegate_fence_seq (id TINYINT NOT NULL PRIMARY KEY, last BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Executor().FenceNext(ctx); err != nil || f != 1 {
		t.Fatalf("FenceNext = %d, %v", f, err)
	}
}

func TestMigrateDownAndUp(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	if err := sqlstore.MigrateDown(ctx, d.DB(), d.Migrations()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().FloorList(ctx); err == nil {
		t.Fatal("tables survived the down migration")
	}
	for range 2 { // idempotent
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Executor().FloorList(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestUnmigratedSaysSo(t *testing.T) {
	d := openURL(t, databaseURL(t, nil))
	_, err := d.Executor().FloorGet(context.Background(), "r")
	if !errors.Is(err, sqlstore.ErrNotMigrated) {
		t.Fatalf("FloorGet on an unmigrated database = %v, want ErrNotMigrated", err)
	}
}
