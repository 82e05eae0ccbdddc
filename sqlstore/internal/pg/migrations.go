package pg

import (
	"embed"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockID is fencegate's own goose advisory lock, so its migrations
// never wait on (or hold up) the host application's goose runs, which share
// goose's default id. "fencegat" in ASCII.
const migrationLockID = 0x66656e6365676174

// MigrationFS returns the Postgres migrations, with the .sql files at the
// root as goose expects. The goose command line applies them too, told
// fencegate's version table:
//
//	goose -dir sqlstore/internal/pg/migrations -table fencegate_goose_version postgres "$DSN" up
func MigrationFS() fs.FS {
	return sqlexec.Sub(migrationFiles, "migrations")
}

// Migrations returns the Postgres migrations with fencegate's advisory lock.
func Migrations() sqlstore.Migrations {
	// Poll the lock every second (goose's default is every 5 s): the
	// migrations take milliseconds, so a waiter should not sleep long.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		panic(err) // unreachable: the options are constants
	}
	return sqlstore.Migrations{Dialect: goose.DialectPostgres, FS: MigrationFS(), Locker: locker}
}
