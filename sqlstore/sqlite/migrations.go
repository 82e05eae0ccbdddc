package sqlite

import (
	"io/fs"

	migrations "github.com/fencegate/fencegate/migrations/sqlite"
)

// MigrationFS returns the SQLite migrations (package migrations/sqlite),
// with the .sql files at the root as goose expects.
func MigrationFS() fs.FS { return migrations.FS() }
