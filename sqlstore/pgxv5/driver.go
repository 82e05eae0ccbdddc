package pgxv5

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is Postgres's name.
const Dialect = pg.Dialect

// Driver runs fencegate on Postgres through a pgx/v5 pool. Its
// transactions are pgx.Tx, so the gate takes the caller's pgx.Tx unwrapped.
//
// The zero value is not usable; create one with New.
type Driver struct {
	pool *pgxpool.Pool
	// The pool's settings, read once: pgxpool.Pool.Config and
	// pgx.Conn.Config return deep copies (about ten allocations each), too
	// dear for every statement.
	mode     pgx.QueryExecMode
	maxConns int
	exec     sqlstore.Executor // Executor's answer: stateless, made once
	modes    sync.Map          // weak.Pointer[pgx.Conn] → pgx.QueryExecMode, for UnwrapExecutor
}

var _ sqlstore.Driver[pgx.Tx] = (*Driver)(nil)

// New returns a driver over pool. The pool stays the caller's to close.
func New(pool *pgxpool.Pool) *Driver {
	cfg := pool.Config()
	d := &Driver{pool: pool, mode: cfg.ConnConfig.DefaultQueryExecMode, maxConns: int(cfg.MaxConns)}
	d.exec = sqlexec.New(newQuerier(d.pool, d.mode), pg.AutocommitQueries, classify, d.InTx)
	return d
}

// connMode is c's DefaultQueryExecMode, read once per connection: the
// entry goes when the connection is garbage.
func (d *Driver) connMode(c *pgx.Conn) pgx.QueryExecMode {
	key := weak.Make(c)
	if m, ok := d.modes.Load(key); ok {
		return m.(pgx.QueryExecMode)
	}
	m := c.Config().DefaultQueryExecMode
	if _, loaded := d.modes.LoadOrStore(key, m); !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[pgx.Conn]) { d.modes.Delete(k) }, key)
	}
	return m
}

// Pool returns the pool the driver was made with.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Dialect returns Postgres.
func (d *Driver) Dialect() sqlstore.Dialect { return Dialect }

// ClockPrecision returns a microsecond, the tick of clock_timestamp().
func (d *Driver) ClockPrecision() time.Duration { return pg.ClockPrecision }

// ClassifyError marks a Postgres error for sqlstore.IsRetryable and
// sqlstore.IsConnLost.
func (d *Driver) ClassifyError(err error) error { return classify.Classify(err) }

var classify = sqlexec.Classifier(pg.Classify)

// Migrations returns fencegate's Postgres migrations, embedded.
func (d *Driver) Migrations() sqlstore.Migrations { return pg.Migrations() }

// Begin starts a transaction at the pool's default isolation (normally READ
// COMMITTED, which the gate's statement is designed for).
func (d *Driver) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.pool.Begin(ctx)
	return tx, classify.Classify(err)
}

// Commit commits tx.
func (d *Driver) Commit(ctx context.Context, tx pgx.Tx) error {
	return classify.Classify(tx.Commit(ctx))
}

// Rollback rolls tx back; a transaction that already ended is not an error.
func (d *Driver) Rollback(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return classify.Classify(err)
	}
	return nil
}

// UnwrapExecutor runs fencegate statements inside tx.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) sqlstore.Executor {
	var mode pgx.QueryExecMode
	if c := tx.Conn(); c != nil {
		mode = d.connMode(c)
	}
	return sqlexec.New(newQuerier(tx, mode), pg.Queries, classify, nil)
}

// Executor runs fencegate statements on the pool, each in its own
// transaction.
func (d *Driver) Executor() sqlstore.Executor { return d.exec }

// OnConn takes a connection from the pool, then runs fn with an Executor on
// it, each statement on its own, and gives the connection back.
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", classify.Classify(err))
	}
	defer c.Release()
	return fn(sqlexec.New(newQuerier(c, d.mode), pg.AutocommitQueries, classify, d.InTx))
}

// MaxConns returns the pool's MaxConns.
func (d *Driver) MaxConns() int { return d.maxConns }

// InTx runs fn in a new transaction, committing if fn returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(d.UnwrapExecutor(tx)) })
	return classify.Classify(err)
}

// Migrate applies every pending fencegate migration (sqlstore.MigrateUp),
// through a *sql.DB over the pool for goose.
func (d *Driver) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(d.pool) // closing db leaves the pool open
	defer db.Close()
	return sqlstore.MigrateUp(ctx, db, pg.Migrations())
}

// conn is what pgx.Tx, *pgx.Conn and *pgxpool.Pool have in common.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier runs fencegate's statements on c in c's exec mode, except that
// describe_exec becomes exec: describe_exec spends a round trip describing
// every statement, and fencegate's statements need no description (their
// argument types follow from the Go values). Both run unnamed statements, so
// whatever a pooler allows the one it allows the other.
type querier struct {
	c    conn
	mode []any // the exec mode argument to put first, or none
}

func newQuerier(c conn, mode pgx.QueryExecMode) querier {
	if mode == pgx.QueryExecModeDescribeExec {
		return querier{c: c, mode: []any{pgx.QueryExecModeExec}}
	}
	return querier{c: c}
}

func (q querier) args(args []any) []any {
	if q.mode == nil {
		return args
	}
	return append(q.mode[:len(q.mode):len(q.mode)], args...)
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.c.Exec(ctx, sql, q.args(args)...)
	return tag.RowsAffected(), err
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlexec.Scanner {
	return q.c.QueryRow(ctx, sql, q.args(args)...)
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlexec.Rows, error) {
	rs, err := q.c.Query(ctx, sql, q.args(args)...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// Classify reads a Postgres error: a serialization failure, deadlock or lock
// timeout is retryable; a broken connection is a lost one. Driver's
// ClassifyError marks an error by it.
func Classify(err error) sqlstore.ErrorClass { return pg.Classify(err) }

// Migrations returns fencegate's Postgres migrations, embedded: package
// migrations/postgres, with goose's postgres dialect, under an advisory lock
// of fencegate's own.
func Migrations() sqlstore.Migrations { return pg.Migrations() }

// MigrationFS returns fencegate's Postgres migrations, embedded, with the
// .sql files at the root as goose expects.
//
// Deprecated: use Migrations().FS, or the FS of package migrations/postgres.
func MigrationFS() fs.FS { return Migrations().FS }

var _ sqlstore.Driver[pgx.Tx] = (*Driver)(nil)

// SupportsListener reports true: ListenLeases listens by LISTEN/NOTIFY.
func (d *Driver) SupportsListener() bool { return true }

// ListenLeases takes a connection out of the pool (the pool opens another
// when it needs one) and listens on it for lease changes until ctx ends or
// the connection fails; the connection is closed afterwards.
func (d *Driver) ListenLeases(ctx context.Context, ready func(), changed func(sqlstore.LeaseChange)) error {
	return d.WatchLeases(ctx, sqlstore.Watch{}, ready, changed)
}

// WatchLeases is ListenLeases with w registered as a watcher of the
// listening session (sqlstore.Store.WatchLeases).
func (d *Driver) WatchLeases(ctx context.Context, w sqlstore.Watch, ready func(), changed func(sqlstore.LeaseChange)) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("fencegate: listen for lease changes: %w", classify.Classify(err))
	}
	conn := c.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = conn.Close(cctx) // a broken connection has nothing left to say
	}()
	return pg.WatchLeases(ctx, conn, w, ready, changed)
}

// closeTimeout bounds the goodbye to the server on a listening connection's
// close.
const closeTimeout = time.Second
