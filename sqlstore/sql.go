package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SQLDriver runs fencegate through database/sql: SQLite (modernc.org/sqlite)
// or Postgres (pgx's stdlib). Its transactions are *sql.Tx.
//
// For SQLite the *sql.DB must take the write lock at BEGIN
// (_txlock=immediate) and should use WAL and a busy timeout; Open and
// SQLiteDSN arrange all of it.
//
// The zero value is not usable; create one with NewSQL or Open.
type SQLDriver struct {
	db        *sql.DB
	dialect   Dialect
	sql       *queries
	opened    bool   // set by Open: Close closes db
	closePool func() // set by Open for Postgres
}

var _ Driver[*sql.Tx] = (*SQLDriver)(nil)

// NewSQL returns a driver over db, which speaks dialect. It panics on a
// dialect other than Postgres or SQLite, which is a programming error. The
// *sql.DB stays the caller's to close.
func NewSQL(db *sql.DB, dialect Dialect) *SQLDriver {
	d := &SQLDriver{db: db, dialect: dialect}
	switch dialect {
	case Postgres:
		d.sql = postgresQueries
	case SQLite:
		d.sql = sqliteQueries
	default:
		panic(fmt.Sprintf("fencegate: unknown dialect %q", dialect))
	}
	return d
}

// DB returns the *sql.DB the driver runs on.
func (d *SQLDriver) DB() *sql.DB { return d.db }

// Dialect reports which SQL dialect the database speaks.
func (d *SQLDriver) Dialect() Dialect { return d.dialect }

// Begin starts a read-write transaction.
func (d *SQLDriver) Begin(ctx context.Context) (*sql.Tx, error) { return d.db.BeginTx(ctx, nil) }

// Commit commits tx.
func (d *SQLDriver) Commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

// Rollback rolls tx back; a transaction that already ended is not an error.
func (d *SQLDriver) Rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// UnwrapExecutor runs fencegate statements inside tx.
func (d *SQLDriver) UnwrapExecutor(tx *sql.Tx) Executor {
	return &executor{q: sqlQuerier{tx}, sql: d.sql}
}

// Executor runs fencegate statements on the pool, each on its own.
func (d *SQLDriver) Executor() Executor { return &executor{q: sqlQuerier{d.db}, sql: d.sql} }

// InTx runs fn in a new transaction, committing if fn returns nil.
func (d *SQLDriver) InTx(ctx context.Context, fn func(Executor) error) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(d.UnwrapExecutor(tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Migrate applies every pending fencegate migration (see MigrateUp).
func (d *SQLDriver) Migrate(ctx context.Context) error { return MigrateUp(ctx, d.db, d.dialect) }

// Close closes what Open opened. A driver made with NewSQL leaves the
// caller's *sql.DB open and Close does nothing.
func (d *SQLDriver) Close() error {
	if !d.opened {
		return nil
	}
	err := d.db.Close()
	if d.closePool != nil {
		d.closePool()
	}
	return err
}

// sqlConn is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type sqlQuerier struct{ c sqlConn }

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	return q.c.QueryRowContext(ctx, query, args...)
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	rs, err := q.c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

// sqlRows adapts *sql.Rows, whose Close returns an error that Err repeats.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }
