package lease

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// beforePaths is m without the migrations that brought path claims: the
// schema of a database written before sets and paths existed.
func beforePaths(t *testing.T, m sqlstore.Migrations) sqlstore.Migrations {
	t.Helper()
	old := fstest.MapFS{}
	err := fs.WalkDir(m.FS, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(name, "path_lock") {
			return err
		}
		b, err := fs.ReadFile(m.FS, name)
		old[name] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
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
