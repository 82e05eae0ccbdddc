package sqlopen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

func TestOpenRejectsBadDSN(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, dsn := range []string{
		"", ":memory:", "file::memory:", "file:x.db?mode=memory", "redis://root@localhost/0",
		"mysql://root@localhost/db?clientFoundRows=true", "mysql://root@localhost",
		"file:" + filepath.Join(dir, "x.db") + "?_pragma=%zz", "a\x00b",
		"postgres://user@host:notaport/db",
	} {
		d, err := sqlopen.Open(ctx, dsn)
		if !errors.Is(err, sqlstore.ErrInvalidDSN) {
			t.Errorf("Open(%q) = %v, want ErrInvalidDSN", dsn, err)
		}
		if d != nil {
			t.Errorf("Open(%q) returned a driver", dsn)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad DSNs created files: %v", entries)
	}
}

func TestMigrateDownAndUp(t *testing.T) {
	for _, entry := range dbtest.Drivers() {
		if !entry.CLI {
			continue
		}
		t.Run(entry.Name, func(t *testing.T) {
			ctx := context.Background()
			d, err := sqlopen.Open(ctx, entry.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Migrations())
			if err != nil || len(st) == 0 || !st[0].Applied {
				t.Fatalf("status = %+v, %v", st, err)
			}
			if err := sqlstore.MigrateDown(ctx, d.DB(), d.Migrations()); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Executor().FloorList(ctx); err == nil {
				t.Fatal("tables survived the down migration")
			}
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if err := d.Migrate(ctx); err != nil { // idempotent
				t.Fatal(err)
			}
			if _, err := d.Executor().FloorList(ctx); err != nil {
				t.Fatal(err)
			}
			// fencegate's version table, not the host application's.
			var n int
			if err := d.DB().QueryRow(`SELECT count(*) FROM fencegate_goose_version`).Scan(&n); err != nil || n == 0 {
				t.Fatalf("fencegate_goose_version: %d rows, %v", n, err)
			}
		})
	}
}

func TestSQLiteFile(t *testing.T) {
	for dsn, want := range map[string]string{
		"/var/app.db":                        "/var/app.db",
		"file:/var/app.db?_txlock=immediate": "/var/app.db",
		"postgres://u:p@host/db":             "",
		"postgresql://host/db":               "",
		"mysql://u:p@host/db":                "",
	} {
		if got := sqlopen.SQLiteFile(dsn); got != filepath.FromSlash(want) {
			t.Errorf("SQLiteFile(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// A DSN that url.Parse refuses still has its password hidden in the error.
func TestBadDSNHidesPassword(t *testing.T) {
	for _, dsn := range []string{"postgres://u:hunter2@host:notaport/db", "mysql://u:hunter2@host:notaport/db"} {
		_, err := sqlopen.Open(context.Background(), dsn)
		if !errors.Is(err, sqlstore.ErrInvalidDSN) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) = %v; want ErrInvalidDSN without the password", dsn, err)
		}
	}
}

// go-sql-driver/mysql's own DSN form is refused, not opened as a SQLite
// file of that name, and the error names the mysql:// URL meant, without
// the password.
func TestNativeMySQLDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for dsn, want := range map[string]string{
		"root@tcp(127.0.0.1:3306)/db":                       "did you mean mysql://root@127.0.0.1:3306/db?",
		"app:hunter2@tcp(db.internal:3307)/orders?tls=true": "did you mean mysql://app:xxxxx@db.internal:3307/orders?tls=true?",
		"u:p@ss:hunter2@tcp6([::1]:3306)/db":                "did you mean mysql://u:xxxxx@[::1]:3306/db?",
		"tcp(localhost)/db":                                 "did you mean mysql://localhost/db?",
		"root@unix(/run/mysqld/mysqld.sock)/db":             "did you mean mysql://user:password@host:port/database?",
	} {
		d, err := sqlopen.Open(context.Background(), dsn)
		if d != nil {
			d.Close()
			t.Errorf("Open(%q) returned a driver", dsn)
		}
		if !errors.Is(err, sqlstore.ErrInvalidDSN) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v; want ErrInvalidDSN saying %q", dsn, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), ":p@ss")) {
			t.Errorf("Open(%q)'s error shows the password: %v", dsn, err)
		}
		if _, err := sqlopen.Resolve(dsn); !errors.Is(err, sqlstore.ErrInvalidDSN) {
			t.Errorf("Resolve(%q) = %v, want ErrInvalidDSN", dsn, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the DSNs became SQLite files: %v", entries)
	}
}
