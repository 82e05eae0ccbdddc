package sqlstoretest

import (
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseMigrations states Migrate.
func exerciseMigrations[TTx any](run runner[TTx]) {
	run("Store/Migrate", func(t *testing.T, d sqlstore.Driver[TTx]) {
		for range 2 { // idempotent
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Executor().FloorList(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
