package sqlite

import "io/fs"

// MigrationFS returns the SQLite migrations, with the .sql files at the root
// as goose expects.
//
// Deprecated: use Migrations().FS, or the FS of package migrations/sqlite.
func MigrationFS() fs.FS { return Migrations().FS }
