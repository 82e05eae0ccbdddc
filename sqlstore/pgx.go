package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// PgxDriver runs fencegate on Postgres through a pgx/v5 pool. Its
// transactions are pgx.Tx, so the gate takes the caller's pgx.Tx unwrapped.
//
// The zero value is not usable; create one with NewPgx.
type PgxDriver struct {
	pool *pgxpool.Pool
}

var _ Driver[pgx.Tx] = (*PgxDriver)(nil)

// NewPgx returns a driver over pool. The pool stays the caller's to close.
func NewPgx(pool *pgxpool.Pool) *PgxDriver { return &PgxDriver{pool: pool} }

// Pool returns the pool the driver was made with.
func (d *PgxDriver) Pool() *pgxpool.Pool { return d.pool }

// Dialect returns Postgres.
func (d *PgxDriver) Dialect() Dialect { return Postgres }

// Begin starts a transaction at the pool's default isolation (normally READ
// COMMITTED, which the gate's statement is designed for).
func (d *PgxDriver) Begin(ctx context.Context) (pgx.Tx, error) { return d.pool.Begin(ctx) }

// Commit commits tx.
func (d *PgxDriver) Commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

// Rollback rolls tx back; a transaction that already ended is not an error.
func (d *PgxDriver) Rollback(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

// UnwrapExecutor runs fencegate statements inside tx.
func (d *PgxDriver) UnwrapExecutor(tx pgx.Tx) Executor {
	return &executor{q: pgxQuerier{tx}, sql: postgresQueries}
}

// Executor runs fencegate statements on the pool, each in its own
// transaction.
func (d *PgxDriver) Executor() Executor {
	return &executor{q: pgxQuerier{d.pool}, sql: postgresQueries}
}

// InTx runs fn in a new transaction, committing if fn returns nil.
func (d *PgxDriver) InTx(ctx context.Context, fn func(Executor) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(d.UnwrapExecutor(tx)) })
}

// Migrate applies every pending fencegate migration (see MigrateUp).
func (d *PgxDriver) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(d.pool) // closing db leaves the pool open
	defer db.Close()
	return MigrateUp(ctx, db, Postgres)
}

// pgxConn is what pgx.Tx, *pgx.Conn and *pgxpool.Pool have in common.
type pgxConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgxQuerier struct{ c pgxConn }

func (q pgxQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.c.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) queryRow(ctx context.Context, sql string, args ...any) scanner {
	return q.c.QueryRow(ctx, sql, args...)
}

func (q pgxQuerier) query(ctx context.Context, sql string, args ...any) (rows, error) {
	rs, err := q.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// openPostgres opens a pool for dsn and a *sql.DB over it.
func openPostgres(ctx context.Context, dsn string) (*SQLDriver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, invalidDSN(dsn, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fencegate: open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("fencegate: connect to postgres: %w", err)
	}
	d := NewSQL(stdlib.OpenDBFromPool(pool), Postgres)
	d.opened, d.closePool = true, pool.Close
	return d, nil
}
