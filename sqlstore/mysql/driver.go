package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is the dialect this package speaks.
const Dialect sqlstore.Dialect = "mysql"

// Driver runs fencegate on MySQL or MariaDB through database/sql and
// go-sql-driver/mysql. Its transactions are *sql.Tx. It is safe for
// concurrent use.
//
// Besides the methods of sqlstore.Driver[*sql.Tx] it has DB (the *sql.DB it
// runs on), Migrations (its embedded goose migrations, for
// sqlstore.MigrateDown and MigrateStatus), Close (what Open opened), and
// Confine (sqlstore.Confiner, for confined writes).
//
// The zero value is not usable; create one with New or Open.
type Driver struct {
	db     *sql.DB
	opened bool // set by Open: Close closes db

	// lockWait holds the transactions (*sql.Tx) whose session lock wait
	// timeout SetLockTimeout changed; Commit and Rollback put it back.
	lockWait sync.Map
}

var _ sqlstore.Driver[*sql.Tx] = (*Driver)(nil)

// New returns a driver over db, a *sql.DB opened with go-sql-driver/mysql
// on a database fencegate may create its tables in. The connections must
// keep the driver's defaults clientFoundRows=false (the floor upsert reads
// its outcome from the rows-affected count) and interpolateParams=false
// (arguments are bound by the server); Config arranges it. Open db with
// sql.OpenDB(NewConnector(cfg)) so each connection's session settings are
// checked as Open checks them. db stays the caller's to close.
func New(db *sql.DB) *Driver { return &Driver{db: db} }

// DB returns the *sql.DB the driver runs on.
func (d *Driver) DB() *sql.DB { return d.db }

// Dialect reports "mysql", for MySQL and MariaDB alike.
func (d *Driver) Dialect() sqlstore.Dialect { return Dialect }

// ClockPrecision is the tick of UTC_TIMESTAMP(6): one microsecond.
func (d *Driver) ClockPrecision() time.Duration { return time.Microsecond }

// ClassifyError marks a native error of go-sql-driver/mysql (a deadlock or
// lock wait timeout in the caller's own statements, say) so that
// sqlstore.IsRetryable and sqlstore.IsConnLost answer for it. nil stays nil.
func (d *Driver) ClassifyError(err error) error { return mark(err) }

// Begin starts a read-write transaction at the session's isolation level.
func (d *Driver) Begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	return tx, mark(err)
}

// Commit commits tx, first putting back a lock wait timeout that
// SetLockTimeout changed. If that fails, tx is rolled back and the error
// returned: nothing committed.
//
// database/sql's Tx.Commit takes no context, so a COMMIT whose reply is
// lost would wait as long as the network lets it. Commit sends COMMIT as a
// statement under ctx instead: when ctx ends first, go-sql-driver closes
// the connection, and Commit returns an error that
// sqlstore.IsOutcomeUnknown reports (the server may have committed). Only
// then does tx.Commit hand the connection back to the pool (its own COMMIT
// finds nothing left to commit, one more round trip); Commit does not wait
// for that past ctx. A ctx that never ends (context.Background) commits
// with tx.Commit alone.
func (d *Driver) Commit(ctx context.Context, tx *sql.Tx) error {
	if err := d.restoreLockWait(ctx, tx); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("fencegate: commit: %w", err)
	}
	if ctx.Done() == nil {
		return mark(tx.Commit())
	}
	if _, err := tx.ExecContext(ctx, commit); err != nil {
		_ = tx.Rollback() // on a connection ctx cut, no round trip
		if ctx.Err() != nil {
			return sqlstore.WithClass(fmt.Errorf("COMMIT's reply did not come before ctx ended, "+
				"so the transaction may or may not have been applied: %w", err), sqlstore.ErrorClass{OutcomeUnknown: true})
		}
		return mark(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tx.Commit() // committed already: this only returns the connection
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// Rollback rolls tx back, first putting back a lock wait timeout that
// SetLockTimeout changed; a transaction that already ended is not an error.
// database/sql's Rollback takes no context, so Rollback waits for it at most
// until ctx ends (and for the timeout's restore, which bounds itself), then
// returns ctx's error and leaves the rollback running. Either way tx can no
// longer commit when Rollback returns: a later tx.Commit fails with
// sql.ErrTxDone.
func (d *Driver) Rollback(ctx context.Context, tx *sql.Tx) error {
	// A restore that fails leaves the connection's timeout changed (or, far
	// likelier, the connection broke and was dropped): that is the error.
	restore := func() error { return d.restoreLockWait(ctx, tx) }
	if err := sqlexec.Rollback(ctx, tx, restore, mark); err != nil {
		return fmt.Errorf("fencegate: %w", err)
	}
	return nil
}

// restoreTimeout bounds the statement that puts a session's lock wait
// timeout back.
const restoreTimeout = 5 * time.Second

// restoreLockWait puts back the session's lock wait timeout if
// SetLockTimeout changed it in tx.
func (d *Driver) restoreLockWait(ctx context.Context, tx *sql.Tx) error {
	if _, changed := d.lockWait.LoadAndDelete(tx); !changed {
		return nil
	}
	// Even when ctx has ended: else the connection would go back to the
	// pool changed. Bounded, for a server that stopped answering.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	if _, err := tx.ExecContext(ctx, lockTimeoutRestore); err != nil {
		return fmt.Errorf("restore lock wait timeout: %w", mark(err))
	}
	return nil
}

// UnwrapExecutor runs fencegate statements inside tx. End tx with the
// driver's Commit or Rollback (gate.Do does) when SetLockTimeout ran in it,
// so the connection's lock wait timeout is put back.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) sqlstore.Executor {
	return &executor{d: d, c: tx, tx: tx}
}

// Executor runs fencegate statements on the pool, each on its own.
// Methods that take more than one statement run them in a transaction of
// their own.
func (d *Driver) Executor() sqlstore.Executor { return &executor{d: d, c: d.db} }

// InTx runs fn in a new transaction at READ COMMITTED, committing if fn
// returns nil. fencegate's own transactions only lock and write by primary
// key; READ COMMITTED keeps InnoDB from adding gap locks to that, which
// would make two first grants of a resource deadlock.
func (d *Driver) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("begin: %w", mark(err))
	}
	if err := fn(d.UnwrapExecutor(tx)); err != nil {
		_ = d.Rollback(ctx, tx)
		return err
	}
	if err := d.Commit(ctx, tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Migrate applies every pending fencegate migration (sqlstore.MigrateUp).
// MySQL commits each DDL statement on its own, so the migrations are written
// to be re-run: a first migration cut short is finished by the next, and
// processes that migrate a new database together take turns on GET_LOCK.
func (d *Driver) Migrate(ctx context.Context) error {
	return sqlstore.MigrateUp(ctx, d.db, Migrations())
}

// Migrations returns the driver's embedded goose migrations, for
// sqlstore.MigrateDown and sqlstore.MigrateStatus.
func (d *Driver) Migrations() sqlstore.Migrations { return Migrations() }

// Close closes the *sql.DB if Open opened it; a driver made with New leaves
// the caller's *sql.DB open.
func (d *Driver) Close() error {
	if !d.opened {
		return nil
	}
	return d.db.Close()
}

// SupportsListener reports false: waiters on MySQL are woken by their own
// process and by timers.
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

// DurabilityWarnings checks nothing and reports none.
func (d *Driver) DurabilityWarnings(context.Context) ([]string, error) { return nil, nil }

// OnConn runs fn on Executor: the driver takes no connection first.
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return fn(d.Executor())
}

// MaxConns reports 0: the lease coordinator does not bound its
// acquisitions and releases on MySQL.
func (d *Driver) MaxConns() int { return 0 }
