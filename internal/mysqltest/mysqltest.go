// Package mysqltest gives tests a fresh MySQL or MariaDB database each.
//
// The server comes from FENCEGATE_TEST_MYSQL_URL, a mysql:// URL without a
// database (the machine's MariaDB: mysql://root@127.0.0.1:3306/). Without
// it, tests that ask for a database skip with a loud message, or fail when
// FENCEGATE_REQUIRE_MYSQL is "true", as in CI.
package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// Environment variables read by this package.
const (
	EnvURL     = "FENCEGATE_TEST_MYSQL_URL"
	EnvRequire = "FENCEGATE_REQUIRE_MYSQL"
)

// ServerURL returns the server's URL, or skips t (fails it under
// FENCEGATE_REQUIRE_MYSQL=true) when there is none.
func ServerURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		msg := fmt.Sprintf("\n*** MYSQL TESTS SKIPPED: set %s (e.g. mysql://root@127.0.0.1:3306/) ***\n", EnvURL)
		if os.Getenv(EnvRequire) == "true" {
			t.Fatal(msg + "    and " + EnvRequire + "=true makes that a failure")
		}
		t.Skip(msg)
	}
	return base
}

// WithDatabase returns the server URL base naming database db.
func WithDatabase(t testing.TB, base, db string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("mysqltest: parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + db
	return u.String()
}

// prefix starts the name of every database DatabaseURL creates.
const prefix = "fgtest"

// swept holds a *sync.Once per server this process has swept.
var swept sync.Map

// DatabaseURL creates an empty database for t, dropped when t ends, and
// returns its URL. The first time in a process, it drops the databases a
// killed run left behind on the server first (DropLeftovers).
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	ctx := context.Background()
	name := leftover.Name(prefix, time.Now())
	admin := func(ctx context.Context, fn func(*sql.DB) error) error {
		d, err := mysql.Open(ctx, WithDatabase(t, base, "mysql"))
		if err != nil {
			return err
		}
		defer d.Close()
		return fn(d.DB())
	}
	exec := func(ctx context.Context, stmt string) error {
		return admin(ctx, func(db *sql.DB) error {
			_, err := db.ExecContext(ctx, stmt)
			return err
		})
	}
	once, _ := swept.LoadOrStore(base, new(sync.Once))
	once.(*sync.Once).Do(func() {
		err := admin(ctx, func(db *sql.DB) error { return DropLeftovers(ctx, db, prefix, time.Now()) })
		if err != nil {
			t.Logf("mysqltest: dropping a killed run's leftovers: %v", err) // they wait for the next run
		}
	})
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mysqltest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(context.WithoutCancel(ctx), "DROP DATABASE "+name); err != nil {
			t.Errorf("mysqltest: drop database: %v", err)
		}
	})
	return WithDatabase(t, base, name)
}

// DropLeftovers drops the databases on db's server that leftover.Name named
// with prefix and that are older than leftover.MaxAge (leftover.Stale) at
// now: a killed run's. Another run's fresher ones stay. It drops what it
// can and returns the errors.
func DropLeftovers(ctx context.Context, db *sql.DB, prefix string, now time.Time) error {
	rows, err := db.QueryContext(ctx, `SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?`, prefix+`\_%`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		names = append(names, name)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if !leftover.Stale(name, prefix, now) {
			continue
		}
		// Stale accepts only prefix_<digits>_<hex>: safe unquoted.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			errs = append(errs, fmt.Errorf("drop %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Rebind rewrites a query written with Postgres's numbered placeholders ($1,
// $2, …), as fencegate's shared tests write theirs, into MySQL's ?, with the
// arguments in the order the ? take them. It does not look inside string
// literals.
func Rebind(query string, args []any) (string, []any) {
	var b strings.Builder
	var out []any
	for i := 0; i < len(query); i++ {
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		if query[i] != '$' || j == i+1 {
			b.WriteByte(query[i])
			continue
		}
		n, _ := strconv.Atoi(query[i+1 : j])
		if n >= 1 && n <= len(args) {
			out = append(out, args[n-1])
		}
		b.WriteByte('?')
		i = j - 1
	}
	if out == nil {
		out = args // no placeholders: leave the arguments for the server to refuse
	}
	return b.String(), out
}
