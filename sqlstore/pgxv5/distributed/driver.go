package distributed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is the profile's name: its SQL is Postgres's, but its schema is
// its own (migrations/postgresdist), so it must not be taken for the
// default Postgres driver's.
const Dialect sqlstore.Dialect = "postgres-distributed"

// Options configure a Driver. The zero value (or nil) is: no clock-offset
// margin, SERIALIZABLE transactions, 10 retries of a serialization
// failure.
type Options struct {
	// MaxClockOffset is the most the clocks of the engine's nodes may
	// differ (CockroachDB's --max-offset, 500 ms by default; YugabyteDB's
	// max_clock_skew_usec). A lease's grant and its expiry can be judged
	// by different nodes' clocks, so the driver adds it to ClockPrecision,
	// which the lease coordinator takes off every TTL it reports: a
	// holder told "you have 30 s" has at least that on every node's clock.
	// Zero means one clock (a single node, or plain Postgres). It must be
	// at least 0 and below 10 s.
	MaxClockOffset time.Duration
	// Isolation is the isolation level of Begin and InTx; empty means
	// SERIALIZABLE, the level at which the engines this profile is for
	// report conflicts (SQLSTATE 40001) instead of waiting, and at which
	// plain Postgres does too.
	Isolation pgx.TxIsoLevel
	// SerializationRetries is how many times InTx runs its function again
	// after a serialization failure (SQLSTATE 40001: the transaction was
	// rolled back and may simply be run again). Zero means 10; negative
	// means none.
	SerializationRetries int
}

// ErrBadOptions is returned by New for Options out of range.
var ErrBadOptions = errors.New("distributed: bad options")

// maxClockOffset bounds Options.MaxClockOffset: a larger offset would eat
// most of any lease.
const maxClockOffset = 10 * time.Second

// Driver runs fencegate through a pgx/v5 pool on a distributed SQL engine
// that speaks the Postgres protocol, with plain statements only: see the
// package doc for what it needs of the engine and what it costs.
//
// The zero value is not usable; create one with New.
type Driver struct {
	pool    *pgxpool.Pool
	offset  time.Duration
	txOpts  pgx.TxOptions
	retries int
}

var _ sqlstore.Driver[pgx.Tx] = (*Driver)(nil)

// New returns a driver over pool with opts (nil for the defaults). The
// pool stays the caller's to close. It fails with ErrBadOptions, and
// touches nothing, for a MaxClockOffset out of range.
func New(pool *pgxpool.Pool, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: the pool is nil", ErrBadOptions)
	}
	if o.MaxClockOffset < 0 || o.MaxClockOffset >= maxClockOffset {
		return nil, fmt.Errorf("%w: MaxClockOffset %v is not in [0, %v)", ErrBadOptions, o.MaxClockOffset, maxClockOffset)
	}
	d := &Driver{pool: pool, offset: o.MaxClockOffset, txOpts: pgx.TxOptions{IsoLevel: o.Isolation}, retries: o.SerializationRetries}
	if d.txOpts.IsoLevel == "" {
		d.txOpts.IsoLevel = pgx.Serializable
	}
	switch {
	case d.retries == 0:
		d.retries = 10
	case d.retries < 0:
		d.retries = 0
	}
	return d, nil
}

// Pool returns the pool the driver was made with.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Dialect returns "postgres-distributed".
func (d *Driver) Dialect() sqlstore.Dialect { return Dialect }

// ClockPrecision returns a microsecond, the tick of clock_timestamp(),
// plus Options.MaxClockOffset: the lease coordinator takes it off every TTL
// it reports.
func (d *Driver) ClockPrecision() time.Duration { return pg.ClockPrecision + d.offset }

// ClassifyError marks a Postgres error for sqlstore.IsRetryable and
// sqlstore.IsConnLost: a serialization failure (40001), a deadlock or a
// lock timeout is retryable.
func (d *Driver) ClassifyError(err error) error { return classify.Classify(err) }

var classify = sqlexec.Classifier(pg.Classify)

// Migrations returns the profile's migrations (package
// migrations/postgresdist) with a goose version table of the profile's own
// shape (no identity column), and no lock: run Migrate from one process,
// or again when two collide (its statements are idempotent).
func (d *Driver) Migrations() sqlstore.Migrations { return Migrations() }

// Begin starts a transaction at Options.Isolation (SERIALIZABLE unless
// set). A commit that fails with a serialization failure committed nothing
// and is retryable (sqlstore.IsRetryable), which gate.Gate.Do acts on.
func (d *Driver) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.pool.BeginTx(ctx, d.txOpts)
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
func (d *Driver) UnwrapExecutor(tx pgx.Tx) sqlstore.Executor { return newExecutor(querier{tx}, nil) }

// Executor runs fencegate statements on the pool, each in its own
// transaction; a lease acquisition or a batch renewal runs its steps in a
// transaction of InTx.
func (d *Driver) Executor() sqlstore.Executor { return newExecutor(querier{d.pool}, d.InTx) }

// OnConn takes a connection from the pool, then runs fn with an Executor on
// it, each statement on its own, and gives the connection back. A lease
// acquisition or batch renewal there runs in a transaction on that
// connection, retried as InTx's, so it never waits for a second one.
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", classify.Classify(err))
	}
	defer c.Release()
	return fn(newExecutor(querier{c}, func(ctx context.Context, fn func(sqlstore.Executor) error) error {
		return d.inTx(ctx, c, fn)
	}))
}

// MaxConns returns the pool's MaxConns.
func (d *Driver) MaxConns() int { return int(d.pool.Config().MaxConns) }

// InTx runs fn in a new transaction at Options.Isolation, committing if fn
// returns nil. When a statement or the commit fails with a serialization
// failure (SQLSTATE 40001, so nothing was committed), it runs fn again in a
// new transaction, up to Options.SerializationRetries times, after a short
// random pause (at most 100 ms) that ctx cuts short; fn must be safe to run
// again (the lease coordinator's are). Any other error ends it.
func (d *Driver) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return d.inTx(ctx, d.pool, fn)
}

// beginner is what *pgxpool.Pool and *pgxpool.Conn have in common for a
// transaction.
type beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// inTx is InTx on db: the pool, or a connection taken from it.
func (d *Driver) inTx(ctx context.Context, db beginner, fn func(sqlstore.Executor) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, db, d.txOpts, func(tx pgx.Tx) error { return fn(d.UnwrapExecutor(tx)) })
		if err == nil || attempt >= d.retries || !serializationFailure(err) {
			return classify.Classify(err)
		}
		if werr := pause(ctx, attempt); werr != nil {
			return fmt.Errorf("%w (retrying after: %w)", werr, classify.Classify(err))
		}
	}
}

// serializationFailure reports whether err is SQLSTATE 40001.
func serializationFailure(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "40001"
}

// pause waits a random time below min(1 ms << attempt, 100 ms), so that
// transactions that conflicted do not meet again in step, or until ctx
// ends.
func pause(ctx context.Context, attempt int) error {
	ceiling := min(time.Millisecond<<min(attempt, 7), 100*time.Millisecond)
	t := time.NewTimer(rand.N(ceiling) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SupportsListener reports false: the engines this profile is for have no
// LISTEN/NOTIFY, so a waiting acquisition is handed the lease by its own
// polling of its place (and by its own process's releases).
func (d *Driver) SupportsListener() bool { return false }

// ListenLeases returns sqlstore.ErrNotSupported at once (see
// SupportsListener).
func (d *Driver) ListenLeases(context.Context, func(), func(sqlstore.LeaseChange)) error {
	return fmt.Errorf("fencegate: listen for lease changes: %w", sqlstore.ErrNotSupported)
}

// WatchLeases answers sqlstore.ErrNotSupported, as ListenLeases: the
// profile has no listener, and observers look by their timers.
func (d *Driver) WatchLeases(context.Context, sqlstore.Watch, func(), func(sqlstore.LeaseChange)) error {
	return fmt.Errorf("fencegate: watch lease changes: %w", sqlstore.ErrNotSupported)
}

// DurabilityWarnings returns none: the engines replicate by consensus, and
// the settings Postgres's report reads (synchronous_commit, the standbys of
// pg_stat_replication) are not theirs to read. Check the engine's own
// replication settings.
func (d *Driver) DurabilityWarnings(context.Context) ([]string, error) { return nil, nil }

// Migrate applies every pending migration of the profile
// (sqlstore.MigrateUp), through a *sql.DB over the pool for goose.
func (d *Driver) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(d.pool) // closing db leaves the pool open
	defer db.Close()
	return sqlstore.MigrateUp(ctx, db, Migrations())
}
