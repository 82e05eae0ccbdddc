// Package mysqltest gives tests a fresh MySQL or MariaDB database each.
//
// The server comes from FENCEGATE_TEST_MYSQL_URL, a mysql:// URL without a
// database (the machine's MariaDB: mysql://root@127.0.0.1:3306/). Without
// it, tests that ask for a database skip with a loud message, or fail when
// FENCEGATE_REQUIRE_MYSQL is "true", as in CI.
package mysqltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

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

// DatabaseURL creates an empty database for t, dropped when t ends, and
// returns its URL.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "fgtest_" + hex.EncodeToString(b)
	admin := func(ctx context.Context, stmt string) error {
		d, err := mysql.Open(ctx, WithDatabase(t, base, "mysql"))
		if err != nil {
			return err
		}
		defer d.Close()
		_, err = d.DB().ExecContext(ctx, stmt)
		return err
	}
	if err := admin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mysqltest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := admin(context.WithoutCancel(ctx), "DROP DATABASE "+name); err != nil {
			t.Errorf("mysqltest: drop database: %v", err)
		}
	})
	return WithDatabase(t, base, name)
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
