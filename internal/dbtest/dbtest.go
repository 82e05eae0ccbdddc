// Package dbtest gives tests real, migrated, isolated fencegate databases
// (a SQLite file per test, a Postgres schema per test), and the one list of
// drivers every suite runs on (Drivers).
//
// Postgres comes from FENCEGATE_TEST_DATABASE_URL. Without it, a program may
// register a fallback (the integration module starts a testcontainers
// Postgres when Docker answers); otherwise Postgres tests skip with a loud
// message, or fail when FENCEGATE_REQUIRE_POSTGRES is "true", as in CI.
package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" database/sql driver

	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// Environment variables read by this package.
const (
	EnvDatabaseURL     = "FENCEGATE_TEST_DATABASE_URL"
	EnvRequirePostgres = "FENCEGATE_REQUIRE_POSTGRES"
)

// Fallback, when set (before any test runs), supplies a Postgres URL when
// the environment has none; it returns "" when it cannot (no Docker).
var Fallback func() (string, error)

var (
	baseOnce sync.Once
	baseURL  string
	baseErr  error
)

// PostgresURL returns the Postgres server URL tests use, or skips t (fails
// it under FENCEGATE_REQUIRE_POSTGRES=true) when there is none.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base, err := serverURL()
	if err != nil {
		t.Fatalf("dbtest: starting Postgres: %v", err)
	}
	if base == "" {
		if os.Getenv(EnvRequirePostgres) == "true" {
			t.Fatal(noPostgres("TESTS") + "    and " + EnvRequirePostgres + "=true makes that a failure")
		}
		t.Skip(noPostgres("TESTS"))
	}
	return base
}

// serverURL returns the environment's Postgres server URL, from
// FENCEGATE_TEST_DATABASE_URL or Fallback; "" when there is none.
func serverURL() (string, error) {
	baseOnce.Do(func() {
		baseURL = os.Getenv(EnvDatabaseURL)
		if baseURL == "" && Fallback != nil {
			baseURL, baseErr = Fallback()
		}
	})
	return baseURL, baseErr
}

// noPostgres is the loud message for what does not run without Postgres.
func noPostgres(what string) string {
	return fmt.Sprintf("\n*** POSTGRES %s SKIPPED: set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) or run Docker ***\n", what, EnvDatabaseURL)
}

// PostgresSchemaURL creates an empty schema for t, dropped when t ends, and
// returns a URL whose connections use it (search_path), unmigrated.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	return CreateSchema(t, PostgresURL(t), leftover.Name("fgtest", time.Now()), true)
}

// CreateSchema makes an empty schema on the server at base and returns a
// URL whose connections use it (search_path). With drop, the schema is
// dropped when t ends; a throwaway server may keep it. A schema named by
// leftover.Name is swept too: the first time this process creates one of
// its prefix on base, it first drops that prefix's leftovers there
// (DropLeftovers), which a run killed before its cleanups left behind.
func CreateSchema(t testing.TB, base, schema string, drop bool) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	// A throwaway server another test crashed on purpose answers "starting
	// up" (57P03) until its recovery ends: wait for it, boundedly.
	for end := time.Now().Add(30 * time.Second); startingUp(err) && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		conn, err = pgx.Connect(ctx, base)
	}
	if err != nil {
		t.Fatalf("dbtest: connect %s: %v", base, err)
	}
	defer conn.Close(ctx)
	if prefix, _, ok := strings.Cut(schema, "_"); ok && drop {
		sweepOnce(base+"\x00"+prefix, func() {
			if err := DropLeftovers(ctx, conn, prefix, time.Now()); err != nil {
				t.Logf("dbtest: dropping a killed run's leftovers: %v", err) // they wait for the next run
			}
		})
	}
	u, err := newSchema(ctx, conn, base, schema)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if drop {
		t.Cleanup(func() {
			ctx := context.WithoutCancel(ctx)
			conn, err := pgx.Connect(ctx, base)
			if err != nil {
				t.Errorf("dbtest: connect for cleanup: %v", err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("dbtest: drop schema: %v", err)
			}
		})
	}
	return u
}

// newSchema creates schema through conn, a connection to the server at
// base, and returns a URL whose connections use it (search_path).
func newSchema(ctx context.Context, conn *pgx.Conn, base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", base, err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", fmt.Errorf("create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sweeps holds a *sync.Once per server and prefix swept by this process.
var sweeps sync.Map

// sweepOnce runs sweep the first time it is called with key in this process.
func sweepOnce(key string, sweep func()) {
	once, _ := sweeps.LoadOrStore(key, new(sync.Once))
	once.(*sync.Once).Do(sweep)
}

// DropLeftovers drops the schemas in conn's database, and the databases on
// its server, that leftover.Name named with prefix and that are older than
// leftover.MaxAge (leftover.Stale) at now: a killed run's. Another run's
// fresher ones stay. It drops what it can and returns the errors.
func DropLeftovers(ctx context.Context, conn *pgx.Conn, prefix string, now time.Time) error {
	var errs []error
	for _, kind := range []struct{ list, drop string }{
		{`SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname::text, $1)`, "DROP SCHEMA IF EXISTS %s CASCADE"},
		{`SELECT datname::text FROM pg_database WHERE starts_with(datname::text, $1)`, "DROP DATABASE IF EXISTS %s WITH (FORCE)"},
	} {
		rows, err := conn.Query(ctx, kind.list, prefix+"_")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if !leftover.Stale(name, prefix, now) {
				continue
			}
			// Stale accepts only prefix_<digits>_<hex>: safe unquoted.
			if _, err := conn.Exec(ctx, fmt.Sprintf(kind.drop, name)); err != nil {
				errs = append(errs, fmt.Errorf("drop %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// openPgx opens a pool on url in exec mode, and a driver over it.
func openPgx(t testing.TB, url string, mode pgx.QueryExecMode) (*pgxv5.Driver, func()) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("dbtest: parse %s: %v", url, err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	return pgxv5.New(pool), pool.Close
}

// Postgres returns a migrated database/sql driver on a fresh schema.
func Postgres(t testing.TB) *pgsql.Driver {
	t.Helper()
	db, err := sql.Open("pgx", PostgresSchemaURL(t))
	if err != nil {
		t.Fatalf("dbtest: open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	d := pgsql.New(db)
	migrate(t, d)
	return d
}

// SQLitePath returns the path of a fresh, unmigrated SQLite file for t.
func SQLitePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "fencegate.db")
}

// SQLite returns a migrated driver on a fresh SQLite file, opened with
// sqlite.Open's settings.
func SQLite(t testing.TB) *sqlite.Driver {
	t.Helper()
	d, err := sqlite.Open(context.Background(), SQLitePath(t))
	if err != nil {
		t.Fatalf("dbtest: open sqlite: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	migrate(t, d)
	return d
}

// migrate applies s's migrations to its database, which is this test's
// own, so without the driver's migration lock: Postgres's is one advisory
// lock per database and MySQL's one GET_LOCK per server, which every test
// on the server (in every package's process of a go test run, and every
// other run beside it) would otherwise queue on, polled once a second.
func migrate(t testing.TB, s sqlstore.Store) {
	t.Helper()
	ctx := context.Background()
	ms, ok := s.(interface{ Migrations() sqlstore.Migrations })
	if !ok {
		t.Fatalf("dbtest: %T does not say its migrations", s)
	}
	m := ms.Migrations()
	m.Locker = nil
	var db *sql.DB
	switch d := s.(type) {
	case interface{ DB() *sql.DB }:
		db = d.DB()
	case interface{ Pool() *pgxpool.Pool }:
		db = stdlib.OpenDBFromPool(d.Pool()) // closing it leaves the pool open
		defer db.Close()
	default:
		t.Fatalf("dbtest: %T has no *sql.DB to migrate through", s)
	}
	if err := sqlstore.MigrateUp(ctx, db, m); err != nil {
		t.Fatalf("dbtest: migrate: %v", err)
	}
}

// startingUp reports whether err is the server saying it cannot accept
// connections yet (SQLSTATE 57P03: starting up, in recovery).
func startingUp(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03"
}

// KeywordValue writes a Postgres URL in libpq's keyword/value form, its
// query parameters as settings: host=127.0.0.1 port=5432 user=postgres
// dbname=test sslmode=disable.
func KeywordValue(u *url.URL) string {
	kv := []string{"host=" + u.Hostname()}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if name := u.User.Username(); name != "" {
		kv = append(kv, "user="+name)
	}
	if pw, ok := u.User.Password(); ok {
		kv = append(kv, "password="+pw)
	}
	kv = append(kv, "dbname="+strings.TrimPrefix(u.Path, "/"))
	for _, k := range slices.Sorted(maps.Keys(u.Query())) {
		kv = append(kv, k+"="+u.Query().Get(k))
	}
	return strings.Join(kv, " ")
}
