package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// MigrationTable is the goose version table fencegate uses on every
// dialect, kept apart from the host application's own goose_db_version.
const MigrationTable = "fencegate_goose_version"

// Migrations are one dialect's goose migrations, as its driver embeds them.
type Migrations struct {
	// Dialect is goose's name for the SQL dialect.
	Dialect goose.Dialect
	// FS holds the .sql files at its root, as goose expects.
	FS fs.FS
	// Locker, when set, keeps concurrent migrations from running together
	// (on Postgres an advisory lock of fencegate's own). Defaults to none.
	Locker lock.SessionLocker
	// Store, when set, keeps goose's version table in statements of the
	// driver's own instead of goose's for Dialect (which is then ignored):
	// the distributed profile's table has no identity column. Its
	// Tablename must be MigrationTable.
	Store database.Store
}

// MigrationStatus is one migration's state, as MigrateStatus reports it.
type MigrationStatus struct {
	Version int64
	Source  string // file name
	Applied bool
}

// provider builds a goose provider over fencegate's own migrations and
// version table, ignoring any Go migrations the host program registered.
// Provider.Close would close db, so callers do not call it.
func provider(db *sql.DB, m Migrations) (*goose.Provider, error) {
	dialect := m.Dialect
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if m.Store != nil {
		// goose takes the table's name from the store then.
		if m.Store.Tablename() != MigrationTable {
			return nil, fmt.Errorf("the migrations' version table is %q, want %q", m.Store.Tablename(), MigrationTable)
		}
		dialect = goose.DialectCustom
		opts = append(opts, goose.WithStore(m.Store))
	} else {
		opts = append(opts, goose.WithTableName(MigrationTable))
	}
	if m.Locker != nil {
		opts = append(opts, goose.WithSessionLocker(m.Locker))
	}
	return goose.NewProvider(dialect, db, m.FS, opts...)
}

// MigrateUp applies every pending migration of m to db. It is
// idempotent, and cheap on an up-to-date database: goose looks for pending
// migrations before taking any lock.
//
// Processes that start together on a new database can collide: both can
// race to create goose's version table before any lock is taken, and SQLite
// has no migration lock at all, so one process creates a table that the
// other then fails to create. Each migration runs in a transaction, so the
// loser changed nothing; MigrateUp tries again a few times and finds the
// work done.
func MigrateUp(ctx context.Context, db *sql.DB, m Migrations) error {
	p, err := provider(db, m)
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

// MigrateDown rolls back every migration of m, dropping fencegate's tables
// and everything in them.
func MigrateDown(ctx context.Context, db *sql.DB, m Migrations) error {
	p, err := provider(db, m)
	if err != nil {
		return fmt.Errorf("fencegate: migrate: %w", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("fencegate: migrate down: %w", err)
	}
	return nil
}

// MigrateStatus lists the migrations of m and whether each is applied.
func MigrateStatus(ctx context.Context, db *sql.DB, m Migrations) ([]MigrationStatus, error) {
	p, err := provider(db, m)
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
