package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

	migrations "github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/sqlstore"
)

// Migrations returns fencegate's MySQL and MariaDB migrations, embedded:
// package migrations/mysql, with goose's mysql dialect, under fencegate's
// GET_LOCK.
func Migrations() sqlstore.Migrations {
	return sqlstore.Migrations{Dialect: goose.DialectMySQL, FS: migrations.FS(), Locker: migrationLock{}}
}

// MigrationFS returns fencegate's goose migrations for MySQL and MariaDB,
// embedded, with the .sql files at the root as goose expects.
//
// Deprecated: use Migrations().FS, or the FS of package migrations/mysql.
func MigrationFS() fs.FS { return Migrations().FS }

// migrationLock serializes fencegate migrations of one database across
// processes with GET_LOCK, since goose's own session lock is Postgres-only.
// The lock belongs to the connection goose migrates on and is released
// with it, also when the process dies. GET_LOCK names are server-wide, so
// the name carries the database's.
type migrationLock struct{}

// migrationLockName names the lock for the current database, within
// MySQL's 64-character limit for lock names.
const migrationLockName = `CONCAT('fencegate_migrate:', SHA1(COALESCE(DATABASE(), '')))`

// migrationLockWaits bounds SessionLock's one-second waits, as goose's
// Postgres locker is bounded: five minutes.
const migrationLockWaits = 300

// SessionLock waits for the lock a second at a time, so that a cancelled
// ctx is noticed between waits.
func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	for range migrationLockWaits {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(`+migrationLockName+`, ?)`, 1).Scan(&got); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
	}
	return fmt.Errorf("take migration lock: another migration held it for %d s", migrationLockWaits)
}

// SessionUnlock releases the lock.
func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `DO RELEASE_LOCK(`+migrationLockName+`)`); err != nil {
		return fmt.Errorf("release migration lock: %w", err)
	}
	return nil
}
