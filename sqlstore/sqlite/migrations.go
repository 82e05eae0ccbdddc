package sqlite

import (
	"embed"
	"io/fs"

	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationFS returns the SQLite migrations, with the .sql files at the root
// as goose expects.
func MigrationFS() fs.FS {
	return sqlexec.Sub(migrationFiles, "migrations")
}
