package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// The methods of sqlstore.Driver[*sql.Tx], and the
// driver's own, declared here so that its documentation shows them all.

// DB returns the *sql.DB the driver runs on.
func (d *Driver) DB() *sql.DB { return d.impl.DB() }

// Dialect reports Dialect.
func (d *Driver) Dialect() sqlstore.Dialect { return d.impl.Dialect() }

// ClockPrecision reports ClockPrecision, one millisecond.
func (d *Driver) ClockPrecision() time.Duration { return d.impl.ClockPrecision() }

// ClassifyError marks a modernc.org/sqlite error of your own statements by
// Classify, so that sqlstore.IsRetryable and sqlstore.IsOutcomeUnknown
// answer for it. nil stays nil.
func (d *Driver) ClassifyError(err error) error { return d.impl.ClassifyError(err) }

// Migrations returns the driver's embedded goose migrations (the package's
// Migrations), for sqlstore.MigrateDown and sqlstore.MigrateStatus.
func (d *Driver) Migrations() sqlstore.Migrations { return d.impl.Migrations() }

// Migrate applies every pending fencegate migration (sqlstore.MigrateUp).
func (d *Driver) Migrate(ctx context.Context) error { return d.impl.Migrate(ctx) }

// Begin starts a read-write transaction. On a *sql.DB opened with DSN (as
// Open does) it begins IMMEDIATE: it takes the file's write lock at once,
// waiting for it up to the busy timeout.
func (d *Driver) Begin(ctx context.Context) (*sql.Tx, error) { return d.impl.Begin(ctx) }

// Commit commits tx. After an I/O error its outcome is unknown
// (sqlstore.IsOutcomeUnknown): it may survive recovery.
func (d *Driver) Commit(ctx context.Context, tx *sql.Tx) error { return d.impl.Commit(ctx, tx) }

// Rollback rolls tx back; a transaction that already ended is not an error.
// database/sql's Rollback takes no context, so Rollback waits for it at most
// until ctx ends, then returns ctx's error and leaves the rollback running.
// Either way tx can no longer commit when Rollback returns: a later
// tx.Commit fails with sql.ErrTxDone.
func (d *Driver) Rollback(ctx context.Context, tx *sql.Tx) error { return d.impl.Rollback(ctx, tx) }

// UnwrapExecutor runs fencegate's statements inside tx (gate.Commit does).
func (d *Driver) UnwrapExecutor(tx *sql.Tx) sqlstore.Executor { return d.impl.UnwrapExecutor(tx) }

// Executor runs fencegate's statements on the *sql.DB, each on its own.
func (d *Driver) Executor() sqlstore.Executor { return d.impl.Executor() }

// InTx runs fn in a new transaction, committing if fn returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return d.impl.InTx(ctx, fn)
}

// OnConn runs fn with Executor (sqlstore.Store): the driver's
// statements are prepared per pool, and a waiter waits for the file's write
// lock, not for a connection.
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return d.impl.OnConn(ctx, fn)
}

// MaxConns returns the *sql.DB's MaxOpenConnections, 0 for no limit
// (sqlstore.Store).
func (d *Driver) MaxConns() int { return d.impl.MaxConns() }

// Close releases the driver's prepared statements and closes what Open
// opened. A driver made with New leaves the caller's *sql.DB open; call
// Close before closing that *sql.DB.
func (d *Driver) Close() error { return d.impl.Close() }

// SupportsListener reports false: SQLite cannot announce a change to
// another connection, so waiters are woken by their own process and by
// timers.
func (d *Driver) SupportsListener() bool { return false }

// ListenLeases returns sqlstore.ErrNotSupported at once (see
// SupportsListener).
func (d *Driver) ListenLeases(context.Context, func(), func(sqlstore.LeaseChange)) error {
	return fmt.Errorf("fencegate: listen for lease changes: %w", sqlstore.ErrNotSupported)
}

// WatchLeases returns sqlstore.ErrNotSupported at once, as ListenLeases.
func (d *Driver) WatchLeases(context.Context, sqlstore.Watch, func(), func(sqlstore.LeaseChange)) error {
	return fmt.Errorf("fencegate: listen for lease changes: %w", sqlstore.ErrNotSupported)
}
