package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/fencegate/fencegate/migrations"
)

// migrationLockID is fencegate's own goose advisory lock on Postgres, so its
// migrations never wait on (or hold up) the host application's goose runs,
// which share goose's default id. "fencegat" in ASCII.
const migrationLockID = 0x66656e6365676174

// MigrationStatus is one migration's state, as MigrateStatus reports it.
type MigrationStatus struct {
	Version int64
	Source  string // file name
	Applied bool
}

// provider builds a goose provider over fencegate's own migrations and
// version table, ignoring any Go migrations the host program registered.
// Provider.Close would close db, so callers do not call it.
func provider(db *sql.DB, dialect Dialect) (*goose.Provider, error) {
	var (
		gd   goose.Dialect
		fsys fs.FS
		opts = []goose.ProviderOption{
			goose.WithTableName(migrations.TableName),
			goose.WithDisableGlobalRegistry(true),
		}
	)
	switch dialect {
	case Postgres:
		gd, fsys = goose.DialectPostgres, migrations.Postgres()
		// Poll the lock every second (goose's default is every 5 s): the
		// migrations take milliseconds, so a waiter should not sleep long.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case SQLite:
		gd, fsys = goose.DialectSQLite3, migrations.SQLite()
	default:
		return nil, fmt.Errorf("fencegate: unknown dialect %q", dialect)
	}
	return goose.NewProvider(gd, db, fsys, opts...)
}

// MigrateUp applies every pending fencegate migration to db. It is
// idempotent, and cheap on an up-to-date database: goose looks for pending
// migrations before taking any lock.
//
// Processes that start together on a new database can collide: both can
// race to create goose's version table before any lock is taken, and SQLite
// has no migration lock at all, so one process creates a table that the
// other then fails to create. Each migration runs in a transaction, so the
// loser changed nothing; MigrateUp tries again a few times and finds the
// work done.
func MigrateUp(ctx context.Context, db *sql.DB, dialect Dialect) error {
	p, err := provider(db, dialect)
	if err != nil {
		return fmt.Errorf("fencegate: migrate: %w", err)
	}
	const attempts = 5
	for i := range attempts {
		if _, err = p.Up(ctx); err == nil {
			return nil
		}
		if i == attempts-1 {
			break
		}
		t := time.NewTimer(time.Duration(i+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fencegate: migrate up: %w", errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
	return fmt.Errorf("fencegate: migrate up: %w", err)
}

// MigrateDown rolls back every fencegate migration, dropping its tables and
// everything in them.
func MigrateDown(ctx context.Context, db *sql.DB, dialect Dialect) error {
	p, err := provider(db, dialect)
	if err != nil {
		return fmt.Errorf("fencegate: migrate: %w", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("fencegate: migrate down: %w", err)
	}
	return nil
}

// MigrateStatus lists fencegate's migrations and whether each is applied.
func MigrateStatus(ctx context.Context, db *sql.DB, dialect Dialect) ([]MigrationStatus, error) {
	p, err := provider(db, dialect)
	if err != nil {
		return nil, fmt.Errorf("fencegate: migrate: %w", err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("fencegate: migration status: %w", err)
	}
	out := make([]MigrationStatus, len(st))
	for i, s := range st {
		out[i] = MigrationStatus{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied}
	}
	return out, nil
}
