package sqlstore_test

import (
	"context"
	"database/sql"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/internal/dbtest"
	mysqlmigrations "github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/migrations/postgres"
	sqlitemigrations "github.com/fencegate/fencegate/migrations/sqlite"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// Every driver package exports Migrations, of one type: its dialect's
// migrations package with goose's dialect; the deprecated MigrationFS is
// the same files.
func TestDriversExportMigrations(t *testing.T) {
	for _, c := range []struct {
		name        string
		migrations  func() sqlstore.Migrations
		migrationFS func() fs.FS
		dialect     goose.Dialect
		files       fs.FS
	}{
		{"pgxv5", pgxv5.Migrations, pgxv5.MigrationFS, goose.DialectPostgres, postgres.FS()},
		{"pgsql", pgsql.Migrations, pgsql.MigrationFS, goose.DialectPostgres, postgres.FS()},
		{"sqlite", sqlite.Migrations, sqlite.MigrationFS, goose.DialectSQLite3, sqlitemigrations.FS()},
		{"mysql", mysql.Migrations, mysql.MigrationFS, goose.DialectMySQL, mysqlmigrations.FS()},
	} {
		m := c.migrations()
		if m.Dialect != c.dialect {
			t.Errorf("%s.Migrations().Dialect = %q, want %q", c.name, m.Dialect, c.dialect)
		}
		want := sqlFiles(t, c.files)
		for what, fsys := range map[string]fs.FS{"Migrations().FS": m.FS, "MigrationFS()": c.migrationFS()} {
			if got := sqlFiles(t, fsys); !slices.Equal(got, want) {
				t.Errorf("%s.%s holds %v, want %v", c.name, what, got, want)
			}
		}
	}
}

func sqlFiles(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	return files
}

// appMigrations are an application's own goose files: its version 1, in SQL
// every dialect takes.
var appMigrations = fstest.MapFS{"00001_app_init.sql": {Data: []byte(`-- +goose Up
CREATE TABLE app_item (id INTEGER PRIMARY KEY, name VARCHAR(64) NOT NULL);
-- +goose Down
DROP TABLE app_item;
`)}}

// registerAppGoMigration registers the application's version 2 in goose's
// global registry, as goose.AddMigration in an application's init does:
// were it in fencegate's flow, it would clash with fencegate's version 2
// (Postgres) or run there, before its table exists (elsewhere).
func registerAppGoMigration(t *testing.T) {
	t.Helper()
	goose.AddNamedMigrationContext("00002_app_seed.go",
		func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO app_item (id, name) VALUES (1, 'seed')`)
			return err
		},
		func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM app_item WHERE id = 1`)
			return err
		})
	t.Cleanup(goose.ResetGlobalMigrations)
}

// migrationsFS are the migrations packages, by driver dialect.
var migrationsFS = map[sqlstore.Dialect]fs.FS{
	pgsql.Dialect:  postgres.FS(),
	sqlite.Dialect: sqlitemigrations.FS(),
	mysql.Dialect:  mysqlmigrations.FS(),
}

// cliDrivers opens, for each database/sql dialect, a driver on a fresh,
// unmigrated database of its own.
func cliDrivers(t *testing.T, fn func(t *testing.T, d sqlopen.Driver)) {
	for _, entry := range dbtest.Drivers() {
		if !entry.CLI {
			continue
		}
		t.Run(entry.Name, func(t *testing.T) {
			d, err := sqlopen.Open(context.Background(), entry.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			fn(t, d)
		})
	}
}

// An application that runs goose itself puts fencegate's migrations into
// its own flow, as docs/MIGRATIONS.md shows: a second provider over the
// migrations package, with fencegate's version table and without goose's global
// registry, so the application's version 1 and its Go migration (version 2)
// meet neither of fencegate's.
func TestAppGooseFlow(t *testing.T) {
	registerAppGoMigration(t)
	cliDrivers(t, func(t *testing.T, d sqlopen.Driver) {
		ctx := context.Background()
		app, err := goose.NewProvider(d.Migrations().Dialect, d.DB(), appMigrations)
		if err != nil {
			t.Fatal(err)
		}
		fg, err := goose.NewProvider(d.Migrations().Dialect, d.DB(), migrationsFS[d.Dialect()],
			goose.WithTableName(sqlstore.MigrationTable),
			goose.WithDisableGlobalRegistry(true),
		)
		if err != nil {
			t.Fatal(err)
		}
		fgSources := fg.ListSources()
		fgLast := fgSources[len(fgSources)-1].Version

		if _, err := fg.Up(ctx); err != nil {
			t.Fatalf("fencegate up: %v", err)
		}
		if _, err := app.Up(ctx); err != nil {
			t.Fatalf("app up: %v", err)
		}
		if v, err := app.GetDBVersion(ctx); err != nil || v != 2 {
			t.Fatalf("app at version %d, %v; want 2", v, err)
		}
		if v, err := fg.GetDBVersion(ctx); err != nil || v != fgLast {
			t.Fatalf("fencegate at version %d, %v; want %d", v, err, fgLast)
		}
		var seeded int
		if err := d.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM app_item`).Scan(&seeded); err != nil || seeded != 1 {
			t.Fatalf("app_item: %d rows, %v; want the Go migration's one", seeded, err)
		}
		// The driver finds its schema complete, and works on it.
		st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Migrations())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if !s.Applied {
				t.Errorf("fencegate's %s not applied by the app's flow", s.Source)
			}
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if f, err := d.Executor().FenceNext(ctx); err != nil || f != 1 {
			t.Fatalf("FenceNext = %d, %v", f, err)
		}

		if _, err := app.DownTo(ctx, 0); err != nil {
			t.Fatalf("app down: %v", err)
		}
		if _, err := fg.DownTo(ctx, 0); err != nil {
			t.Fatalf("fencegate down: %v", err)
		}
		for _, p := range []*goose.Provider{app, fg} {
			if v, err := p.GetDBVersion(ctx); err != nil || v != 0 {
				t.Errorf("version %d after down, %v", v, err)
			}
		}
		if _, err := d.DB().ExecContext(ctx, `SELECT COUNT(*) FROM app_item`); err == nil {
			t.Error("app_item survived the app's down")
		}
		if _, err := d.Executor().FloorList(ctx); err == nil {
			t.Error("fencegate's tables survived its down")
		}
	})
}

// fencegate's own runner ignores the Go migrations an application
// registered with goose: the application's version 2 neither clashes with
// fencegate's nor runs in fencegate's flow.
func TestMigrateIgnoresGlobalGoMigrations(t *testing.T) {
	registerAppGoMigration(t)
	cliDrivers(t, func(t *testing.T, d sqlopen.Driver) {
		ctx := context.Background()
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Migrations())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if !strings.HasSuffix(s.Source, ".sql") {
				t.Errorf("fencegate's migrations include %s", s.Source)
			}
		}
		if err := sqlstore.MigrateDown(ctx, d.DB(), d.Migrations()); err != nil {
			t.Fatal(err)
		}
	})
}
