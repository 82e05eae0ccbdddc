package lease

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// beforePaths is m without the migrations that brought path claims and
// every later one: the schema of a database written before sets and paths
// existed.
func beforePaths(t *testing.T, m sqlstore.Migrations) sqlstore.Migrations {
	t.Helper()
	files, err := fs.Glob(m.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	first := int64(-1) // the version of the path claims' migration
	for _, name := range files {
		if strings.Contains(name, "path_lock") {
			if first, err = goose.NumericComponent(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if first < 0 {
		return m // the dialect needed no migration for them (SQLite)
	}
	old := fstest.MapFS{}
	for _, name := range files {
		v, err := goose.NumericComponent(name)
		if err != nil {
			t.Fatal(err)
		}
		if v >= first {
			continue
		}
		b, err := fs.ReadFile(m.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		old[name] = &fstest.MapFile{Data: b}
	}
	m.FS = old
	return m
}

// A database migrated before sets and paths existed, with a lease granted
// and written under then, migrates forward: the old token (its text form,
// as a process kept it) parses, is admitted by Commit, renews and
// releases; and sets and paths work on the migrated database.
func TestOldTokensAfterMigrating(t *testing.T) {
	for _, d := range dbtest.Drivers() {
		if d.SQL == nil {
			continue // the pgx drivers share postgres-sql's schema
		}
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := d.DSN(t)
			raw := d.Unmigrated(t, dsn)
			m := raw.(interface{ Migrations() sqlstore.Migrations }).Migrations()
			db := raw.(interface{ DB() *sql.DB }).DB()
			if err := sqlstore.MigrateUp(ctx, db, beforePaths(t, m)); err != nil {
				t.Fatal(err)
			}
			coord := NewCoordinator(raw, &CoordinatorOptions{TTL: time.Minute})
			a := newClient(t, "a", ClientOptions{})
			text := acquire(t, a, coord, "orders/42").Token().String()

			if err := raw.Migrate(ctx); err != nil {
				t.Fatalf("migrate forward: %v", err)
			}
			h := d.SQL(t, dsn) // the migrated database, through the usual harness
			tok, err := gate.Parse(text)
			if err != nil {
				t.Fatalf("old token %q: %v", text, err)
			}
			g := gate.New(h.Driver, &gate.Options{VerifyIssued: true})
			if err := g.Do(ctx, tok, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatalf("old token after migrating: %v", err)
			}
			coord = NewCoordinator(h.Driver, &CoordinatorOptions{TTL: time.Minute})
			out, err := coord.Renew(ctx, &RenewRequest{Resource: tok.Resource, Holder: tok.Holder, Fence: tok.Fence, RequestID: "renew-after-migrate"})
			if err != nil || !out.OK {
				t.Fatalf("renew: %+v, %v", out, err)
			}
			if ok, err := coord.Release(ctx, tok); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			if l, _ := acquireSet(t, a, coord, "orders/42", path(t, "src/")); l == nil {
				t.Fatal("a set after migrating was denied")
			}
		})
	}
}
