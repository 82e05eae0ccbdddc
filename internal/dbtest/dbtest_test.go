package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/leftover"
)

// A killed run's schema and database (older than leftover.MaxAge) are
// dropped; a fresh one, which another run may be using right now, and one
// of the old shape, whose age is unknown, stay.
func TestDropLeftovers(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	// A prefix of this test's own, so that no other run's sweep (and no
	// other test) meets these names.
	const prefix = "fgsweeptest"
	now := time.Now()
	old, fresh := leftover.Name(prefix, now.Add(-leftover.MaxAge-time.Minute)), leftover.Name(prefix, now)
	oldDB, unknown := leftover.Name(prefix, now.Add(-3*leftover.MaxAge)), prefix+"_0a1b2c3d4e5f"
	for _, stmt := range []string{"CREATE SCHEMA " + old, "CREATE SCHEMA " + fresh, "CREATE SCHEMA " + unknown, "CREATE DATABASE " + oldDB} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, stmt := range []string{"DROP SCHEMA IF EXISTS " + old, "DROP SCHEMA IF EXISTS " + fresh, "DROP SCHEMA IF EXISTS " + unknown, "DROP DATABASE IF EXISTS " + oldDB} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Error(err)
			}
		}
	})

	if err := DropLeftovers(ctx, conn, prefix, now); err != nil {
		t.Fatal(err)
	}
	exists := func(catalog, column, name string) bool {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+catalog+" WHERE "+column+" = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if exists("pg_namespace", "nspname", old) || exists("pg_database", "datname", oldDB) {
		t.Errorf("a killed run's schema %s or database %s is still there", old, oldDB)
	}
	if !exists("pg_namespace", "nspname", fresh) || !exists("pg_namespace", "nspname", unknown) {
		t.Errorf("the sweep dropped a fresh schema %s or one of unknown age %s", fresh, unknown)
	}
}
