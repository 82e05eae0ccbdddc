package pg

import (
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	migrations "github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/sqlstore"
)

// migrationLockID is fencegate's own goose advisory lock, so its migrations
// never wait on (or hold up) the host application's goose runs, which share
// goose's default id. "fencegat" in ASCII.
const migrationLockID = 0x66656e6365676174

// Migrations returns the Postgres migrations (package migrations/postgres)
// with fencegate's advisory lock.
func Migrations() sqlstore.Migrations {
	// Poll the lock every second (goose's default is every 5 s): the
	// migrations take milliseconds, so a waiter should not sleep long.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		panic(err) // unreachable: the options are constants
	}
	return sqlstore.Migrations{Dialect: goose.DialectPostgres, FS: migrations.FS(), Locker: locker}
}
