package dbtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
	"github.com/fencegate/fencegate/sqlstore/sqlstoretest"
)

// Drivers is the one list of drivers that the conformance suite
// (sqlstoretest), the gate's, the lease's and the command's tests run on.
// Adding a driver is one line here.
func Drivers() []Driver {
	return []Driver{
		sqlDriver("sqlite", SQLitePath, true, sqlite.Open),
		sqlDriver("postgres-sql", PostgresSchemaURL, true, pgsql.Open),
		sqlDriver("mysql", mysqltest.DatabaseURL, true, mysql.Open).rebinding(mysqltest.Rebind),
		pgxDriver("pgx-cache-statement", pgx.QueryExecModeCacheStatement),
		pgxDriver("pgx-cache-describe", pgx.QueryExecModeCacheDescribe),
		pgxDriver("pgx-describe-exec", pgx.QueryExecModeDescribeExec),
		pgxDriver("pgx-exec", pgx.QueryExecModeExec),
		pgxDriver("pgx-simple-protocol", pgx.QueryExecModeSimpleProtocol),
	}
}

// Profiles are the entries of driver profiles that keep the driver
// contract but not every driver's extras, so suites written for the
// drivers' own features (pgxv5's batch and guard tests) do not run them:
// the distributed-SQL profile of the pgx driver (sqlstore/pgxv5/distributed)
// on plain Postgres. The conformance suite and the lease coordinator's
// tests run them beside Drivers.
func Profiles() []Driver {
	return []Driver{distributedDriver("pgx-distributed")}
}

// Driver is one entry of Drivers. A Go function value cannot be generic, so
// an entry opens its harness in its own transaction type: exactly one of
// SQL and Pgx is set.
type Driver struct {
	Name string
	// DSN makes a fresh, unmigrated database and names it.
	DSN func(t testing.TB) string
	// CLI is true when sqlopen.Open (and so the fencegate command) opens
	// this driver from DSN's string.
	CLI bool
	// SQL and Pgx open a migrated harness on the database dsn names.
	SQL func(t testing.TB, dsn string) Harness[*sql.Tx]
	Pgx func(t testing.TB, dsn string) Harness[pgx.Tx]
	// Unmigrated opens the driver on the database dsn names, as it is;
	// closed when t ends.
	Unmigrated func(t testing.TB, dsn string) sqlstore.Store
	// Rebind, when set, rewrites a query written with $1 placeholders for
	// this database and orders its arguments (see rebinding).
	Rebind func(query string, args []any) (string, []any)
}

// Query returns q, written with $1 placeholders, as this driver's database
// takes it: for SQL a test hands to the fencegate command.
func (d Driver) Query(q string) string {
	if d.Rebind == nil {
		return q
	}
	q, _ = d.Rebind(q, nil)
	return q
}

// Harness is one driver on one migrated database, in its native transaction
// type, with the raw statements a test needs for its own tables, which the
// Executor (fencegate's statements only) does not offer. Queries use $1
// placeholders, which Postgres and SQLite both accept (and a driver's entry
// rewrites for a database that does not, see rebinding).
type Harness[TTx any] struct {
	Name   string
	Driver sqlstore.Driver[TTx]
	// Exec runs a statement in tx.
	Exec func(ctx context.Context, tx TTx, query string, args ...any) error
	// DBExec runs a statement on its own.
	DBExec func(ctx context.Context, query string, args ...any) error
	// QueryRow reads one row on its own.
	QueryRow func(ctx context.Context, query string, args ...any) Row
	// Reopen opens a new, independent connection to the same database,
	// migrating it (a no-op by then), and returns it with its closer: a
	// coordinator process starting and stopping.
	Reopen func(t testing.TB) (sqlstore.Store, func())
}

// Row is one row of Harness.QueryRow.
type Row interface{ Scan(dest ...any) error }

// ForEach runs a test written once over TTx on every driver of Drivers, as
// sequential subtests named after the driver. Go has no generic function
// values, so the caller passes the body instantiated for both transaction
// types: ForEach(t, body[*sql.Tx], body[pgx.Tx]). A nil body skips the
// drivers of its transaction type.
func ForEach(t *testing.T, sqlBody func(*testing.T, Harness[*sql.Tx]), pgxBody func(*testing.T, Harness[pgx.Tx])) {
	t.Helper()
	forEach(t, Drivers(), false, sqlBody, pgxBody)
}

// ForEachWithProfiles is ForEach over Drivers and Profiles.
func ForEachWithProfiles(t *testing.T, sqlBody func(*testing.T, Harness[*sql.Tx]), pgxBody func(*testing.T, Harness[pgx.Tx])) {
	t.Helper()
	forEach(t, append(Drivers(), Profiles()...), false, sqlBody, pgxBody)
}

// ForEachWithProfilesParallel is ForEachWithProfiles in parallel subtests:
// each makes and migrates its database after t.Parallel, so that one
// test's databases are set up together.
func ForEachWithProfilesParallel(t *testing.T, sqlBody func(*testing.T, Harness[*sql.Tx]), pgxBody func(*testing.T, Harness[pgx.Tx])) {
	t.Helper()
	forEach(t, append(Drivers(), Profiles()...), true, sqlBody, pgxBody)
}

// ForEachStore runs fn, in parallel with the other tests that use it, on a
// fresh database of every driver and profile (ForEachWithProfilesParallel),
// and once more on Postgres acquiring one statement at a time
// (sqlstoretest.Stepwise: the shared step-by-step rules of SQLite and MySQL
// under Postgres's concurrency). Each subtest has its own database.
func ForEachStore(t *testing.T, fn func(t *testing.T, store sqlstore.Store)) {
	t.Helper()
	t.Parallel()
	ForEachWithProfilesParallel(t,
		func(t *testing.T, h Harness[*sql.Tx]) { fn(t, h.Driver) },
		func(t *testing.T, h Harness[pgx.Tx]) { fn(t, h.Driver) })
	t.Run("postgres-stepwise", func(t *testing.T) {
		t.Parallel()
		fn(t, sqlstoretest.Stepwise(Postgres(t)))
	})
}

func forEach(t *testing.T, drivers []Driver, parallel bool, sqlBody func(*testing.T, Harness[*sql.Tx]), pgxBody func(*testing.T, Harness[pgx.Tx])) {
	t.Helper()
	for _, d := range drivers {
		if (d.SQL == nil || sqlBody == nil) && (d.Pgx == nil || pgxBody == nil) {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			if d.SQL != nil {
				sqlBody(t, d.SQL(t, d.DSN(t)))
			} else {
				pgxBody(t, d.Pgx(t, d.DSN(t)))
			}
		})
	}
}

// Find returns the driver of Drivers called name.
func Find(t testing.TB, name string) Driver {
	t.Helper()
	for _, d := range Drivers() {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("dbtest: no driver %q", name)
	return Driver{}
}

// sqlDB is what a database/sql driver's entry needs of the driver.
type sqlDB interface {
	sqlstore.Driver[*sql.Tx]
	DB() *sql.DB
	Close() error
}

// sqlDriver is a database/sql driver's entry: open opens it on a DSN.
func sqlDriver[D sqlDB](name string, dsn func(testing.TB) string, cli bool, open func(context.Context, string) (D, error)) Driver {
	unmigrated := func(t testing.TB, url string) (D, func()) {
		t.Helper()
		d, err := open(context.Background(), url)
		if err != nil {
			t.Fatalf("dbtest: open %s: %v", name, err)
		}
		return d, func() { _ = d.Close() }
	}
	return Driver{Name: name, DSN: dsn, CLI: cli, Unmigrated: cleanedUp(unmigrated), SQL: func(t testing.TB, url string) Harness[*sql.Tx] {
		opened := func(t testing.TB) (D, func()) {
			t.Helper()
			d, closeDB := unmigrated(t, url)
			migrate(t, d)
			return d, closeDB
		}
		d, closeDB := opened(t)
		t.Cleanup(closeDB)
		db := d.DB()
		return Harness[*sql.Tx]{
			Name: name, Driver: d, Reopen: func(t testing.TB) (sqlstore.Store, func()) { return opened(t) },
			Exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, q, args...)
				return err
			},
			DBExec: func(ctx context.Context, q string, args ...any) error {
				_, err := db.ExecContext(ctx, q, args...)
				return err
			},
			QueryRow: func(ctx context.Context, q string, args ...any) Row { return db.QueryRowContext(ctx, q, args...) },
		}
	}}
}

// rebinding makes a database/sql driver's harness run queries written with
// $1 placeholders on a database that takes others: rebind rewrites each
// query and orders its arguments.
func (d Driver) rebinding(rebind func(query string, args []any) (string, []any)) Driver {
	d.Rebind = rebind
	open := d.SQL
	d.SQL = func(t testing.TB, dsn string) Harness[*sql.Tx] {
		h := open(t, dsn)
		exec, dbExec, queryRow := h.Exec, h.DBExec, h.QueryRow
		h.Exec = func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			q, args = rebind(q, args)
			return exec(ctx, tx, q, args...)
		}
		h.DBExec = func(ctx context.Context, q string, args ...any) error {
			q, args = rebind(q, args)
			return dbExec(ctx, q, args...)
		}
		h.QueryRow = func(ctx context.Context, q string, args ...any) Row {
			q, args = rebind(q, args)
			return queryRow(ctx, q, args...)
		}
		return h
	}
	return d
}

// pgxDriver is the pgx driver's entry with its pools in exec mode.
func pgxDriver(name string, mode pgx.QueryExecMode) Driver {
	return pgxEntry(name, func(t testing.TB, url string) (pgxStore, func()) { return openPgx(t, url, mode) })
}

// distributedDriver is the entry of the pgx driver's distributed-SQL
// profile (sqlstore/pgxv5/distributed) on plain Postgres, at its defaults:
// SERIALIZABLE, no clock-offset margin.
func distributedDriver(name string) Driver {
	return pgxEntry(name, func(t testing.TB, url string) (pgxStore, func()) {
		t.Helper()
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatalf("dbtest: open pool: %v", err)
		}
		d, err := distributed.New(pool, nil)
		if err != nil {
			pool.Close()
			t.Fatalf("dbtest: %v", err)
		}
		return d, pool.Close
	})
}

// pgxStore is what a pgx driver's entry needs of the driver.
type pgxStore interface {
	sqlstore.Driver[pgx.Tx]
	Pool() *pgxpool.Pool
}

// pgxEntry is the entry of a driver over a pgx pool that open opens.
func pgxEntry(name string, open func(t testing.TB, url string) (pgxStore, func())) Driver {
	unmigrated := open
	return Driver{Name: name, DSN: PostgresSchemaURL, Unmigrated: cleanedUp(unmigrated), Pgx: func(t testing.TB, url string) Harness[pgx.Tx] {
		opened := func(t testing.TB) (pgxStore, func()) {
			t.Helper()
			d, closePool := open(t, url)
			migrate(t, d)
			return d, closePool
		}
		d, closePool := opened(t)
		t.Cleanup(closePool)
		pool := d.Pool()
		return Harness[pgx.Tx]{
			Name: name, Driver: d, Reopen: func(t testing.TB) (sqlstore.Store, func()) { return opened(t) },
			Exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
				_, err := tx.Exec(ctx, q, args...)
				return err
			},
			DBExec: func(ctx context.Context, q string, args ...any) error {
				_, err := pool.Exec(ctx, q, args...)
				return err
			},
			QueryRow: func(ctx context.Context, q string, args ...any) Row { return pool.QueryRow(ctx, q, args...) },
		}
	}}
}

// cleanedUp turns an open that returns its closer into one closed when t
// ends.
func cleanedUp[D sqlstore.Store](open func(testing.TB, string) (D, func())) func(testing.TB, string) sqlstore.Store {
	return func(t testing.TB, url string) sqlstore.Store {
		t.Helper()
		d, closeIt := open(t, url)
		t.Cleanup(closeIt)
		return d
	}
}
