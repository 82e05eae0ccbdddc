package sqlstore_test

import (
	"io/fs"
	"slices"
	"testing"

	"github.com/pressly/goose/v3"

	mysqlmigrations "github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/migrations/postgres"
	sqlitemigrations "github.com/fencegate/fencegate/migrations/sqlite"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
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
