package pgsql

import (
	"context"
	"database/sql"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// The methods of sqlstore.Driver[*sql.Tx], and the
// driver's own, declared here so that its documentation shows them all.

// DB returns the *sql.DB the driver runs on.
func (d *Driver) DB() *sql.DB { return d.impl.DB() }

// Dialect reports Dialect.
func (d *Driver) Dialect() sqlstore.Dialect { return d.impl.Dialect() }

// ClockPrecision reports the tick of Postgres's clock, one microsecond.
func (d *Driver) ClockPrecision() time.Duration { return d.impl.ClockPrecision() }

// ClassifyError marks a pgx error of your own statements by Classify, so
// that sqlstore.IsRetryable, sqlstore.IsConnLost and
// sqlstore.IsOutcomeUnknown answer for it. nil stays nil.
func (d *Driver) ClassifyError(err error) error { return d.impl.ClassifyError(err) }

// Migrations returns the driver's embedded goose migrations, for
// sqlstore.MigrateDown and sqlstore.MigrateStatus.
func (d *Driver) Migrations() sqlstore.Migrations { return d.impl.Migrations() }

// Migrate applies every pending fencegate migration (sqlstore.MigrateUp).
// Run it against the server, not through a transaction pooler: goose holds
// a session lock while it migrates.
func (d *Driver) Migrate(ctx context.Context) error { return d.impl.Migrate(ctx) }

// Begin starts a read-write transaction at the session's isolation level.
func (d *Driver) Begin(ctx context.Context) (*sql.Tx, error) { return d.impl.Begin(ctx) }

// Commit commits tx. After a lost connection or reply its outcome is
// unknown (sqlstore.IsOutcomeUnknown).
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

// OnConn takes a connection from the *sql.DB, runs fn with an Executor on
// it, each statement on its own, and gives the connection back
// (sqlstore.Store).
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return d.impl.OnConn(ctx, fn)
}

// MaxConns returns the *sql.DB's MaxOpenConnections, 0 for no limit
// (sqlstore.Store).
func (d *Driver) MaxConns() int { return d.impl.MaxConns() }

// Close ends the driver's listening sessions (ListenLeases, WatchLeases)
// and closes what Open opened (the *sql.DB and its pgx pool). A driver made
// with New leaves the caller's *sql.DB open; call Close before closing that
// *sql.DB.
func (d *Driver) Close() error {
	d.endListens()
	return d.impl.Close()
}
