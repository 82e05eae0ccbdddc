package lease

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// migrateMu serialises opening (and so migrating) databases within this
// test binary. Migrations on Postgres take goose's session advisory lock,
// which is server-wide, and a migration that finds it taken retries only
// after 5s: parallel subtests would spend most of their time waiting.
var migrateMu sync.Mutex

// opened calls open with migrateMu held.
func opened[T any](t *testing.T, open func(testing.TB) T) T {
	t.Helper()
	migrateMu.Lock()
	defer migrateMu.Unlock()
	return open(t)
}

// forEachStore runs fn on a fresh database of every kind: SQLite, Postgres
// through database/sql, and Postgres through pgx. The subtests run in
// parallel; each has its own database (a file, or a schema).
func forEachStore(t *testing.T, fn func(t *testing.T, store sqlstore.Store)) {
	t.Helper()
	for name, open := range dbtest.Stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, opened(t, open))
		})
	}
}

// harness gives a test the driver in its native transaction type TTx, and
// the raw statements a test needs for its own data tables, which the
// Executor (fencegate's statements only) does not offer. Queries use $1
// placeholders, which both Postgres and SQLite accept.
type harness[TTx any] struct {
	driver sqlstore.Driver[TTx]
	// exec runs a statement in tx.
	exec func(ctx context.Context, tx TTx, query string, args ...any) error
	// dbExec runs a statement on its own.
	dbExec func(ctx context.Context, query string, args ...any) error
	// queryRow reads one row on its own.
	queryRow func(ctx context.Context, query string, args ...any) interface{ Scan(...any) error }
}

func sqlHarness(d *sqlstore.SQLDriver) harness[*sql.Tx] {
	db := d.DB()
	return harness[*sql.Tx]{
		driver: d,
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
		dbExec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
		queryRow: func(ctx context.Context, q string, args ...any) interface{ Scan(...any) error } {
			return db.QueryRowContext(ctx, q, args...)
		},
	}
}

func pgxHarness(d *sqlstore.PgxDriver) harness[pgx.Tx] {
	pool := d.Pool()
	return harness[pgx.Tx]{
		driver: d,
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		dbExec: func(ctx context.Context, q string, args ...any) error {
			_, err := pool.Exec(ctx, q, args...)
			return err
		},
		queryRow: func(ctx context.Context, q string, args ...any) interface{ Scan(...any) error } {
			return pool.QueryRow(ctx, q, args...)
		},
	}
}

// forEachDriver runs a test written once over TTx on every driver. Go has
// no generic function values, so the caller passes the body instantiated
// for both transaction types: forEachDriver(t, body[*sql.Tx], body[pgx.Tx]).
func forEachDriver(t *testing.T, sqlBody func(*testing.T, harness[*sql.Tx]), pgxBody func(*testing.T, harness[pgx.Tx])) {
	t.Helper()
	for name, open := range dbtest.Drivers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sqlBody(t, sqlHarness(opened(t, open)))
		})
	}
	t.Run("postgres-pgx", func(t *testing.T) {
		t.Parallel()
		pgxBody(t, pgxHarness(opened(t, dbtest.PostgresPgx)))
	})
}

// reopener opens a new, independent connection to one database each time it
// is called, migrating it (a no-op after the first time), and returns a
// function that closes it: a coordinator process starting and stopping.
type reopener func(t *testing.T) (sqlstore.Store, func())

// forEachReopenable runs fn with a reopener for a fresh database of every
// kind.
func forEachReopenable(t *testing.T, fn func(t *testing.T, open reopener)) {
	t.Helper()
	openDSN := func(dsn string) reopener {
		return func(t *testing.T) (sqlstore.Store, func()) {
			d, err := sqlstore.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			migrateOrFatal(t, d)
			return d, func() { _ = d.Close() }
		}
	}
	cases := map[string]func(t *testing.T) reopener{
		"sqlite":       func(t *testing.T) reopener { return openDSN(dbtest.SQLitePath(t)) },
		"postgres-sql": func(t *testing.T) reopener { return openDSN(dbtest.PostgresSchemaURL(t)) },
		"postgres-pgx": func(t *testing.T) reopener {
			url := dbtest.PostgresSchemaURL(t)
			return func(t *testing.T) (sqlstore.Store, func()) {
				pool, err := pgxpool.New(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				d := sqlstore.NewPgx(pool)
				migrateOrFatal(t, d)
				return d, pool.Close
			}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, mk(t))
		})
	}
}

func migrateOrFatal(t *testing.T, s sqlstore.Store) {
	t.Helper()
	migrateMu.Lock()
	defer migrateMu.Unlock()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// newClient returns a client for holder on the system clock.
func newClient(t *testing.T, holder string, opts ClientOptions) *Client {
	t.Helper()
	opts.Holder = holder
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquire runs the whole acquisition and fails the test on an error or a
// denial.
func acquire(t *testing.T, c *Client, coord *Coordinator, resource string) *Lease {
	t.Helper()
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%s by %s): %v", resource, c.Holder(), err)
	}
	if !out.OK {
		t.Fatalf("Acquire(%s by %s) denied: held by %q (fence %d)", resource, c.Holder(), out.HeldBy, out.Fence)
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitUntilFree blocks until the coordinator no longer holds a live lease on
// resource. Expiry is in the database's clock, which a test cannot advance,
// so this waits (on a timer, for the time the database itself reports) rather
// than synchronising with another goroutine.
func waitUntilFree(t *testing.T, coord *Coordinator, resource string) {
	t.Helper()
	for {
		st, err := coord.Status(context.Background(), resource)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held {
			return
		}
		<-time.After(st.Remaining + time.Millisecond)
	}
}

// floorOf reads the gate's floor for resource (0 if it has none).
func floorOf(t *testing.T, store sqlstore.Store, resource string) sqlstore.Floor {
	t.Helper()
	f, err := store.Executor().FloorGet(context.Background(), resource)
	if errors.Is(err, sqlstore.ErrNotFound) {
		return sqlstore.Floor{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mustStale asserts err is the gate's refusal of token, and returns it.
func mustStale(t *testing.T, err error, token gate.Token) *gate.StaleFenceError {
	t.Helper()
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) {
		t.Fatalf("gate accepted or failed otherwise for %v: %v", token, err)
	}
	if stale.Fence != token.Fence || stale.Holder != token.Holder {
		t.Fatalf("refusal %+v is not about %v", stale, token)
	}
	return stale
}
