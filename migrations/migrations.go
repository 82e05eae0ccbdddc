// Package migrations holds fencegate's schema as goose SQL migrations, one
// folder per dialect, embedded so that programs need no files at run time.
//
// sqlstore applies them (sqlstore.MigrateUp); the same folders work with the
// goose command line, as long as it is told fencegate's version table:
//
//	goose -dir migrations/postgres -table fencegate_goose_version postgres "$DSN" up
//	goose -dir migrations/sqlite   -table fencegate_goose_version sqlite3 ./app.db up
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// TableName is the goose version table fencegate uses, kept apart from the
// host application's own goose_db_version.
const TableName = "fencegate_goose_version"

// Postgres returns the Postgres migrations, with the .sql files at the root
// as goose expects.
func Postgres() fs.FS { return sub("postgres") }

// SQLite returns the SQLite migrations, with the .sql files at the root.
func SQLite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // unreachable: dir is a constant embedded above
	}
	return f
}
