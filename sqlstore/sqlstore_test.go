package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

func TestOpenRejectsBadDSN(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, dsn := range []string{
		"", ":memory:", "file::memory:", "file:x.db?mode=memory", "mysql://root@localhost/db",
		"file:" + filepath.Join(dir, "x.db") + "?_pragma=%zz", "a\x00b",
		"postgres://user@host:notaport/db",
	} {
		d, err := sqlstore.Open(ctx, dsn)
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

// Only a durable file passes, decided on the decoded URI: a percent-escaped
// mode=memory or vfs=memdb once reopened empty and reissued fence 1.
func TestSQLiteDSNDurableFileOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.db")
	for _, tc := range []struct {
		dsn     string
		durable bool
	}{
		{file, true},
		{"file:" + file, true},
		{"file:" + file + "?mode=rwc&cache=shared", true},
		{"file:" + file + "?vfs=unix-excl", true},
		{"file:" + file + "?mode=memory&cache=shared", false},
		{"file:" + file + "?mode=memor%79&cache=shared", false},
		{"file:" + file + "?mod%65=memory&cache=shared", false},
		{"file:" + file + "?mode=MEMORY", false},
		{"file:" + file + "?mode=rw&mode=memory", false},
		{"file:" + file + "?mode=bogus", false},
		{"file:/x.db?vfs=memdb", false},
		{"file:/x.db?vf%73=memd%62", false},
		{"file:/x.db?vfs=", false},
		{"file:/x.db?vfs=myfs", false},
		{":memory:", false},
		{"file::memory:", false},
		{"file::memory:?cache=shared", false},
		{"file:%3Amemory%3A", false},
		{"file:%3amemory%3a?cache=shared", false},
		{"file:", false},
		{"file:?mode=rwc", false},
		{"", false},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			out, err := sqlstore.SQLiteDSN(tc.dsn)
			if !tc.durable {
				if !errors.Is(err, sqlstore.ErrInvalidDSN) {
					t.Fatalf("SQLiteDSN(%q) = %q, %v; want ErrInvalidDSN", tc.dsn, out, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SQLiteDSN(%q): %v", tc.dsn, err)
			}
			// Accepted means a fence survives closing and reopening.
			ctx := context.Background()
			for want := int64(1); want <= 2; want++ {
				d, err := sqlstore.Open(ctx, tc.dsn)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				got, err := d.Executor().FenceNext(ctx)
				d.Close()
				if err != nil || got < want {
					t.Fatalf("reopen %d: FenceNext = %d, %v; want at least %d", want, got, err, want)
				}
			}
		})
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}

func TestSQLiteDSNSettings(t *testing.T) {
	dsn, err := sqlstore.SQLiteDSN("file:/tmp/app.db?_pragma=busy_timeout(50)")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"busy_timeout%2850%29", "journal_mode%28WAL%29", "synchronous%28FULL%29", "_txlock=immediate"} {
		if !strings.Contains(dsn, want) {
			t.Errorf("%s lacks %s", dsn, want)
		}
	}
	if strings.Contains(dsn, "busy_timeout%2810000") {
		t.Errorf("%s overrides the caller's busy_timeout", dsn)
	}
}

func TestSQLiteOpenSettings(t *testing.T) {
	d := dbtest.SQLite(t)
	var mode string
	var sync int
	if err := d.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	if err := d.DB().QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
	// BEGIN takes the write lock: a second writer cannot begin while the
	// first is open, instead of failing later with SQLITE_BUSY half-way.
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open("sqlite", "file:"+dbFile(t, d)+"?_txlock=immediate&_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.BeginTx(ctx, nil)
	if !sqlstore.IsRetryable(err) {
		t.Fatalf("second BEGIN IMMEDIATE = %v, want a retryable busy error", err)
	}
}

func dbFile(t *testing.T, d *sqlstore.SQLDriver) string {
	var seq int
	var name, file string
	if err := d.DB().QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestMigrateDownAndUp(t *testing.T) {
	for name, open := range dbtest.Drivers() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			d := open(t) // migrated
			st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Dialect())
			if err != nil || len(st) == 0 || !st[0].Applied {
				t.Fatalf("status = %+v, %v", st, err)
			}
			if err := sqlstore.MigrateDown(ctx, d.DB(), d.Dialect()); err != nil {
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

func TestFenceSequence(t *testing.T) {
	for name, open := range dbtest.Stores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			next := func() int64 {
				var f int64
				if err := s.InTx(ctx, func(ex sqlstore.Executor) (err error) { f, err = ex.FenceNext(ctx); return err }); err != nil {
					t.Fatal(err)
				}
				return f
			}
			if a, b := next(), next(); a < 1 || b <= a {
				t.Fatalf("fences %d then %d", a, b)
			}
			if err := s.InTx(ctx, func(ex sqlstore.Executor) error { return ex.FenceAtLeast(ctx, 1000) }); err != nil {
				t.Fatal(err)
			}
			if f := next(); f != 1000 {
				t.Fatalf("after FenceAtLeast(1000): %d", f)
			}
			if err := s.InTx(ctx, func(ex sqlstore.Executor) error { return ex.FenceAtLeast(ctx, 10) }); err != nil {
				t.Fatal(err)
			}
			if f := next(); f != 1001 {
				t.Fatalf("FenceAtLeast moved the sequence back: %d", f)
			}
		})
	}
}

func TestIsRetryableAndConnLost(t *testing.T) {
	if sqlstore.IsRetryable(errors.New("x")) || sqlstore.IsRetryable(nil) {
		t.Fatal("plain errors are not retryable")
	}
	if sqlstore.IsConnLost(context.Canceled) || sqlstore.IsConnLost(nil) {
		t.Fatal("cancellation is not a lost connection")
	}
	if !sqlstore.IsConnLost(sql.ErrConnDone) {
		t.Fatal("sql.ErrConnDone is a lost connection")
	}
	// What pgx returns when the connection dies after COMMIT was sent (the
	// reliability suite saw such commits land).
	if !sqlstore.IsConnLost(fmt.Errorf("commit: %w", pgconn.ErrConnClosed)) {
		t.Fatal("pgconn.ErrConnClosed is a lost connection")
	}
	// A Postgres serialization failure, made for real.
	d := dbtest.Postgres(t)
	ctx := context.Background()
	db := d.DB()
	if _, err := db.Exec(`CREATE TABLE c (id int PRIMARY KEY, v int); INSERT INTO c VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	t1, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback()
	if _, err := t1.Exec(`SELECT v FROM c`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE c SET v = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = t1.Exec(`UPDATE c SET v = 2`)
	if !sqlstore.IsRetryable(err) || sqlstore.IsConnLost(err) {
		t.Fatalf("serialization failure %v: retryable %v", err, sqlstore.IsRetryable(err))
	}
}

func FuzzSQLiteDSN(f *testing.F) {
	for _, s := range []string{"app.db", "file:app.db?_pragma=busy_timeout(5)", ":memory:", "file:?", "x://y", "file:a%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		out, err := sqlstore.SQLiteDSN(dsn)
		if err != nil {
			if !errors.Is(err, sqlstore.ErrInvalidDSN) {
				t.Fatalf("SQLiteDSN(%q) error %v does not match ErrInvalidDSN", dsn, err)
			}
			return
		}
		if !strings.HasPrefix(out, "file:") || !strings.Contains(out, "_txlock=") {
			t.Fatalf("SQLiteDSN(%q) = %q lacks the required settings", dsn, out)
		}
	})
}

// The SQLite driver prepares its statements in the background; Close must
// wait for that, so no connection to the file is left open after it.
func TestCloseLeavesNoConnection(t *testing.T) {
	ctx := context.Background()
	for i := range 20 {
		d, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		err = d.InTx(ctx, func(ex sqlstore.Executor) error { // misses: prepares start
			_, err := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if n := d.DB().Stats().OpenConnections; n != 0 {
			t.Fatalf("round %d: %d connections open after Close", i, n)
		}
	}
}

// Processes starting together on a new SQLite file all migrate it: the
// losers of the race to create the tables try again and find them there.
func TestConcurrentFirstMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			d, err := sqlstore.Open(ctx, path) // its own *sql.DB, like another process
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			errs <- d.Migrate(ctx)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("concurrent migration: %v", err)
		}
	}
}

// A caller may begin its transaction on a *sql.DB of its own over the same
// SQLite file. That worked until the driver's statement cache was warm, then
// failed with "statement from different database used".
func TestSQLiteTxFromAnotherDB(t *testing.T) {
	ctx := context.Background()
	d := dbtest.SQLite(t)
	dsn, err := sqlstore.SQLiteDSN(dbtest.SQLiteFile(t, d))
	if err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for fence := int64(1); fence <= 3; fence++ {
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ex := d.UnwrapExecutor(tx)
		res, err := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: fence})
		if err != nil || !res.Admitted {
			t.Fatalf("fence %d: FloorRaise = %+v, %v", fence, res, err)
		}
		if _, err := ex.RejectionList(ctx, sqlstore.RejectionListParams{}); err != nil {
			t.Fatalf("fence %d: RejectionList: %v", fence, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sqlstore.WaitPrepared(d) // the cache is warm from the second round on
	}
	if f, err := d.Executor().FloorGet(ctx, "r"); err != nil || f.Floor != 3 {
		t.Fatalf("floor = %+v, %v; want 3", f, err)
	}
}

// An unmigrated store's errors named the missing table but never said to
// run Migrate.
func TestUnmigratedSaysMigrate(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) sqlstore.Store{
		"sqlite": func(t *testing.T) sqlstore.Store {
			d, err := sqlstore.Open(ctx, dbtest.SQLitePath(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return d
		},
		"postgres-sql": func(t *testing.T) sqlstore.Store {
			db, err := sql.Open("pgx", dbtest.PostgresSchemaURL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return sqlstore.NewSQL(db, sqlstore.Postgres)
		},
		"postgres-pgx": func(t *testing.T) sqlstore.Store {
			pool, err := pgxpool.New(ctx, dbtest.PostgresSchemaURL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return sqlstore.NewPgx(pool)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ex := open(t).Executor()
			_, err1 := ex.FenceNext(ctx)
			_, err2 := ex.FloorGet(ctx, "r")
			_, err3 := ex.LeaseList(ctx)
			_, err4 := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			for _, err := range []error{err1, err2, err3, err4} {
				if !errors.Is(err, sqlstore.ErrNotMigrated) || !strings.Contains(err.Error(), "fencegate migrate") {
					t.Errorf("error %v: want ErrNotMigrated saying to run fencegate migrate", err)
				}
			}
		})
	}
}
