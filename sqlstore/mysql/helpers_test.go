package mysql_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// databaseURL returns a fresh database's URL with params added.
func databaseURL(t testing.TB, params url.Values) string {
	t.Helper()
	u, err := url.Parse(mysqltest.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// openURL opens a driver on dsn, closed when t ends, unmigrated.
func openURL(t testing.TB, dsn string) *mysql.Driver {
	t.Helper()
	d, err := mysql.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// open returns a migrated driver on a fresh database.
func open(t testing.TB) *mysql.Driver {
	t.Helper()
	d := openURL(t, databaseURL(t, nil))
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}
