package pgsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is Postgres's name.
const Dialect = pg.Dialect

// Driver runs fencegate on Postgres through database/sql and pgx's stdlib.
// Its transactions are *sql.Tx. Close it before the *sql.DB it runs on.
//
// Besides the methods of sqlstore.Driver[*sql.Tx] it has DB (the *sql.DB it
// runs on), Migrations (its embedded goose migrations, for
// sqlstore.MigrateDown and MigrateStatus), Close (its prepared statements,
// and what Open opened), and Confine (sqlstore.Confiner, for confined
// writes).
//
// The zero value is not usable; create one with New or Open.
type Driver struct {
	impl *sqlexec.Driver
	// closing ends when Close is called, and with it every listening
	// session (WatchLeases): each holds a connection of the pool, and
	// Open's pool.Close waits for them all, so a Coordinator's listener
	// lingering after its last waiter left delayed the close by its linger.
	closing    context.Context
	endListens context.CancelFunc
}

func newDriver(db *sql.DB, onClose func() error) *Driver {
	closing, end := context.WithCancel(context.Background())
	return &Driver{impl: sqlexec.NewDriver(db, dialect, onClose), closing: closing, endListens: end}
}

var _ sqlstore.Driver[*sql.Tx] = (*Driver)(nil)

// DurabilityWarnings reports the settings under which the database can lose
// a commit it acknowledged (see sqlstore.Store.DurabilityWarnings).
func (d *Driver) DurabilityWarnings(ctx context.Context) ([]string, error) {
	rows, err := d.DB().QueryContext(ctx, pg.DurabilitySQL)
	if err != nil {
		return nil, fmt.Errorf("fencegate: read durability settings: %w", d.ClassifyError(err))
	}
	defer rows.Close()
	var warnings []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, fmt.Errorf("fencegate: read durability settings: %w", d.ClassifyError(err))
		}
		warnings = append(warnings, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fencegate: read durability settings: %w", d.ClassifyError(err))
	}
	return warnings, nil
}

// New returns a driver over db, a *sql.DB of pgx's stdlib ("pgx" driver, or
// stdlib.OpenDBFromPool). The *sql.DB stays the caller's to close.
func New(db *sql.DB) *Driver { return newDriver(db, nil) }

var dialect = sqlexec.Dialect{
	Name:           Dialect,
	Queries:        pg.Queries, // pgx's stdlib caches prepared statements itself
	Migrations:     pg.Migrations,
	Classify:       pg.Classify,
	ClockPrecision: pg.ClockPrecision,
}

// Open connects to the Postgres database a "postgres://" or
// "postgresql://" URL (or a pgx key=value string) names, through a pgx pool
// and database/sql on top of it, and returns a driver that owns both (Close
// releases them). Open does not migrate; call Migrate. A DSN pgx cannot
// parse returns an error matching sqlstore.ErrInvalidDSN.
func Open(ctx context.Context, dsn string) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, sqlexec.InvalidDSN(dsn, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fencegate: open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("fencegate: connect to postgres: %w", sqlexec.Classifier(pg.Classify).Classify(err))
	}
	db := stdlib.OpenDBFromPool(pool)
	return newDriver(db, func() error {
		err := db.Close()
		pool.Close()
		return err
	}), nil
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

// SupportsListener reports true: ListenLeases listens by LISTEN/NOTIFY.
func (d *Driver) SupportsListener() bool { return true }

// ListenLeases takes a connection of the *sql.DB and listens on it for lease
// changes until ctx ends, the connection fails or the driver is closed; the
// connection is closed afterwards, never handed back to the pool listening.
func (d *Driver) ListenLeases(ctx context.Context, ready func(), changed func(sqlstore.LeaseChange)) error {
	return d.WatchLeases(ctx, sqlstore.Watch{}, ready, changed)
}

// WatchLeases is ListenLeases with w registered as a watcher of the
// listening session (sqlstore.Store.WatchLeases).
func (d *Driver) WatchLeases(ctx context.Context, w sqlstore.Watch, ready func(), changed func(sqlstore.LeaseChange)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.closing, cancel)()
	c, err := d.DB().Conn(ctx)
	if err != nil {
		return fmt.Errorf("fencegate: listen for lease changes: %w", d.ClassifyError(err))
	}
	defer c.Close()
	var listenErr error
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			listenErr = fmt.Errorf("fencegate: listen for lease changes: the *sql.DB is not pgx's stdlib (its connections are %T)", dc)
			return nil
		}
		listenErr = pg.WatchLeases(ctx, sc.Conn(), w, ready, changed)
		return driver.ErrBadConn // a listening connection must not serve queries: close it
	})
	if listenErr == nil {
		listenErr = fmt.Errorf("fencegate: listen for lease changes: %w", err)
	}
	return listenErr
}
