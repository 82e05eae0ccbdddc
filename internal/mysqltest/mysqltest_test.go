package mysqltest

import (
	"context"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// A killed run's database (older than leftover.MaxAge) is dropped; a fresh
// one, which another run may be using right now, and one of the old shape,
// whose age is unknown, stay.
func TestDropLeftovers(t *testing.T) {
	ctx := context.Background()
	d, err := mysql.Open(ctx, WithDatabase(t, ServerURL(t), "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	db := d.DB()
	// A prefix of this test's own, so that no other run's sweep (and no
	// other test) meets these names.
	const prefix = "fgsweeptest"
	now := time.Now()
	old, fresh, unknown := leftover.Name(prefix, now.Add(-leftover.MaxAge-time.Minute)), leftover.Name(prefix, now), prefix+"_0a1b2c3d4e5f"
	for _, name := range []string{old, fresh, unknown} {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
				t.Error(err)
			}
		})
	}

	if err := DropLeftovers(ctx, db, prefix, now); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if exists(old) {
		t.Errorf("a killed run's database %s is still there", old)
	}
	if !exists(fresh) || !exists(unknown) {
		t.Errorf("the sweep dropped a fresh database %s or one of unknown age %s", fresh, unknown)
	}
}
