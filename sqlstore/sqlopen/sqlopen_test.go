package sqlopen_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
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

// The command's DSNs go through the drivers' checks: a SQLite file without
// locking, or one whose journal is off, is refused before anything runs.
func TestOpenRefusesUnsafeSettings(t *testing.T) {
	dir := t.TempDir()
	for _, dsn := range []string{
		"file:" + filepath.Join(dir, "a.db") + "?nolock=1",
		"file:" + filepath.Join(dir, "b.db") + "?_pragma=journal_mode(off)",
	} {
		d, err := sqlopen.Open(context.Background(), dsn)
		if err == nil {
			d.Close()
			t.Errorf("Open(%s) opened", dsn)
		} else if !errors.Is(err, sqlstore.ErrUnsafeSettings) {
			t.Errorf("Open(%s) = %v, want ErrUnsafeSettings", dsn, err)
		}
	}
}

// Issue 36, item 2: a libpq keyword/value DSN opened as a SQLite file named
// after it, password and all, and the claim on it succeeded. Every DSN goes
// to the database its form names, or is refused without a file or its
// password in the error.
func TestDSNForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const pw = "SeCrEt123"
	refused := errors.New("refused")
	for _, tc := range []struct {
		dsn  string
		want any // a form, or refused
	}{
		{"host=db.internal user=app password=" + pw + " dbname=app", sqlexec.Postgres},
		{"host=db.internal user=app dbname=app", sqlexec.Postgres},
		{" dbname = app  password = '" + pw + " x' ", sqlexec.Postgres},
		{"host=10.0.0.1,10.0.0.2 port=5432,5432 dbname=app target_session_attrs=read-write", sqlexec.Postgres},
		{"postgres://app:" + pw + "@db.internal/app", sqlexec.Postgres},
		{"postgresql://db.internal/app", sqlexec.Postgres},
		{"mysql://app:" + pw + "@db.internal:3306/app", sqlexec.MySQL},
		{"file:x.db", sqlexec.SQLite},
		{"./x.db", sqlexec.SQLite},
		{"x.db", sqlexec.SQLite},
		{"/abs/x.db", sqlexec.SQLite},
		{"./x=1.db", sqlexec.SQLite},
		{"/data/host=a/x.db", sqlexec.SQLite},
		{"app:" + pw + "@tcp(db.internal:3306)/app", refused},
		{"app:" + pw + "@tcp(db.internal:3306)", refused},
		{"redis://:" + pw + "@cache/0", refused},
		{"sqlite://x.db", refused},
		{"sqlite:x.db", refused},
		{"app:" + pw + "@db.internal/app", refused},
		{"x=1.db", refused},
		{"mode=rw cache=shared", refused},
		{"x.db password=" + pw, sqlexec.Postgres}, // pgx refuses it, as below
	} {
		form, err := sqlexec.FormOf(tc.dsn)
		switch {
		case tc.want == refused && !errors.Is(err, sqlstore.ErrInvalidDSN):
			t.Errorf("FormOf(%q) = %v, %v; want ErrInvalidDSN", tc.dsn, form, err)
		case tc.want != refused && (err != nil || form != tc.want):
			t.Errorf("FormOf(%q) = %v, %v; want %v", tc.dsn, form, err, tc.want)
		}
		if tc.want == sqlexec.SQLite {
			continue
		}
		// Refused, or a server that is not there: either way no file, and
		// no password in what Open and Resolve say.
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := sqlopen.Open(cancelled, tc.dsn)
		if err == nil {
			d.Close()
			t.Errorf("Open(%q) opened", tc.dsn)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("Open(%q)'s error shows the password: %v", tc.dsn, err)
		}
		if _, err := sqlopen.Resolve(tc.dsn); err != nil && strings.Contains(err.Error(), pw) {
			t.Errorf("Resolve(%q)'s error shows the password: %v", tc.dsn, err)
		}
		if f := sqlopen.SQLiteFile(tc.dsn); f != "" {
			t.Errorf("SQLiteFile(%q) = %q, want none", tc.dsn, f)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("DSNs of other databases became SQLite files: %v", entries)
	}
}

// A keyword/value DSN reaches Postgres.
func TestKeywordValueDSNOpensPostgres(t *testing.T) {
	u, err := url.Parse(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn := dbtest.KeywordValue(u)
	ctx := context.Background()
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open(%q): %v", dsn, err)
	}
	defer d.Close()
	if d.Dialect() != pgsql.Dialect {
		t.Fatalf("Open(%q) is %s", dsn, d.Dialect())
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := sqlopen.Resolve(dsn); got != dsn || err != nil {
		t.Errorf("Resolve(%q) = %q, %v", dsn, got, err)
	}
}
