package distributed

import (
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/database/dialect"

	migrations "github.com/fencegate/fencegate/migrations/postgresdist"
	"github.com/fencegate/fencegate/sqlstore"
)

// Migrations returns the profile's migrations (package
// migrations/postgresdist), embedded, with a goose version table of the
// profile's own shape and no migration lock (advisory locks are a Postgres
// feature the engines lack).
func Migrations() sqlstore.Migrations {
	store, err := database.NewStoreFromQuerier(sqlstore.MigrationTable, versionTable{})
	if err != nil {
		panic(err) // unreachable: the name and querier are constants
	}
	return sqlstore.Migrations{Dialect: goose.DialectPostgres, FS: migrations.FS(), Store: store}
}

// versionTable is goose's version table without goose's identity column
// (a sequence): the version is the key. Migrations are never applied
// twice, so a version is never inserted twice.
type versionTable struct{}

var _ dialect.QuerierExtender = versionTable{}

func (versionTable) CreateTable(table string) string {
	return fmt.Sprintf(`CREATE TABLE %s (
  version_id bigint      PRIMARY KEY,
  is_applied boolean     NOT NULL,
  tstamp     timestamptz NOT NULL DEFAULT now()
)`, table)
}

func (versionTable) InsertVersion(table string) string {
	return fmt.Sprintf(`INSERT INTO %s (version_id, is_applied) VALUES ($1, $2)`, table)
}

func (versionTable) DeleteVersion(table string) string {
	return fmt.Sprintf(`DELETE FROM %s WHERE version_id = $1`, table)
}

func (versionTable) GetMigrationByVersion(table string) string {
	return fmt.Sprintf(`SELECT tstamp, is_applied FROM %s WHERE version_id = $1`, table)
}

func (versionTable) ListMigrations(table string) string {
	return fmt.Sprintf(`SELECT version_id, is_applied FROM %s ORDER BY version_id DESC`, table)
}

func (versionTable) GetLatestVersion(table string) string {
	return fmt.Sprintf(`SELECT max(version_id) FROM %s`, table)
}

// TableExists looks in information_schema, which the engines share, for
// the table in the session's current schema.
func (versionTable) TableExists(table string) string {
	return fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM information_schema.tables
 WHERE table_schema = current_schema() AND table_name = '%s')`, table)
}
