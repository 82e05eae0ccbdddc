package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

func TestDSNSettings(t *testing.T) {
	dsn, err := sqlite.DSN("file:/tmp/app.db?_pragma=busy_timeout(50)")
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

func TestOpenSettings(t *testing.T) {
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
	if !sqlstore.IsRetryable(d.ClassifyError(err)) {
		t.Fatalf("second BEGIN IMMEDIATE = %v, want a retryable busy error", err)
	}
}

func dbFile(t *testing.T, d *sqlite.Driver) string {
	var seq int
	var name, file string
	if err := d.DB().QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	return file
}

func FuzzDSN(f *testing.F) {
	for _, s := range []string{"app.db", "file:app.db?_pragma=busy_timeout(5)", ":memory:", "file:?", "x://y", "file:a%zz",
		"file:a.db?nolock=1", "file:a.db?vfs=unix-none", "file:a.db?immutable=yes&nolock=0", "file:0?Vfs", "file:a.db?VFS=memdb&Mode=memory"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		out, err := sqlite.DSN(dsn)
		if err != nil {
			if !errors.Is(err, sqlstore.ErrInvalidDSN) {
				t.Fatalf("DSN(%q) error %v does not match ErrInvalidDSN", dsn, err)
			}
			return
		}
		if !strings.HasPrefix(out, "file:") || !strings.Contains(out, "_txlock=") {
			t.Fatalf("DSN(%q) = %q lacks the required settings", dsn, out)
		}
		// What SQLite will read from the output locks the file.
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("DSN(%q) = %q: %v", dsn, out, err)
		}
		for key, values := range u.Query() {
			for _, v := range values {
				switch key = strings.ToLower(key); {
				case key == "vfs" && v != "unix" && v != "unix-excl" && v != "win32" && v != "win32-longpath",
					(key == "nolock" || key == "immutable") && !slices.Contains([]string{"0", "no", "off", "false"}, strings.ToLower(v)):
					t.Fatalf("DSN(%q) = %q keeps %s=%s", dsn, out, key, v)
				}
			}
		}
	})
}

// The SQLite driver prepares its statements in the background; Close must
// wait for that, so no connection to the file is left open after it.
func TestCloseLeavesNoConnection(t *testing.T) {
	ctx := context.Background()
	for i := range 20 {
		d, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		err = d.InTx(ctx, func(ex sqlstore.Executor) error { // misses: prepares start
			_, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
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

// Processes starting together on a new SQLite file all open and migrate it:
// the losers of the race to put it in WAL mode, and of the race to create
// the tables, try again and find it done.
func TestConcurrentFirstMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			d, err := sqlite.Open(ctx, path) // its own *sql.DB, like another process
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

// Only a durable file passes, decided on the decoded URI: a percent-escaped
// mode=memory or vfs=memdb once reopened empty and reissued fence 1.
func TestDSNDurableFileOnly(t *testing.T) {
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
			out, err := sqlite.DSN(tc.dsn)
			if !tc.durable {
				if !errors.Is(err, sqlstore.ErrInvalidDSN) {
					t.Fatalf("DSN(%q) = %q, %v; want ErrInvalidDSN", tc.dsn, out, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DSN(%q): %v", tc.dsn, err)
			}
			// Accepted means a fence survives closing and reopening.
			ctx := context.Background()
			for want := int64(1); want <= 2; want++ {
				d, err := sqlite.Open(ctx, tc.dsn)
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

// A caller may begin its transaction on a *sql.DB of its own over the same
// SQLite file. That worked until the driver's statement cache was warm, then
// failed with "statement from different database used".
func TestTxFromAnotherDB(t *testing.T) {
	ctx := context.Background()
	d := dbtest.SQLite(t)
	dsn, err := sqlite.DSN(dbFile(t, d))
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
		res, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: fence})
		if err != nil || !res.Admitted {
			t.Fatalf("fence %d: FloorRaise = %+v, %v", fence, res, err)
		}
		if _, err := ex.RejectionList(ctx, &sqlstore.RejectionListParams{}); err != nil {
			t.Fatalf("fence %d: RejectionList: %v", fence, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sqlite.WaitPrepared(d) // the cache is warm from the second round on
	}
	if f, err := d.Executor().FloorGet(ctx, "r"); err != nil || f.Floor != 3 {
		t.Fatalf("floor = %+v, %v; want 3", f, err)
	}
}

// An I/O error leaves a COMMIT's outcome unknown (a COMMIT that returned
// SQLITE_IOERR_FSYNC kept its row through recovery); busy is retryable, a
// constraint a definite refusal.
func TestClassifyOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		name    string
		code    int
		unknown bool
	}{
		{"SQLITE_IOERR_FSYNC", sqlite3.SQLITE_IOERR_FSYNC, true},
		{"SQLITE_IOERR_WRITE", sqlite3.SQLITE_IOERR_WRITE, true},
		{"SQLITE_IOERR", sqlite3.SQLITE_IOERR, true},
		{"SQLITE_BUSY", sqlite3.SQLITE_BUSY, false},
		{"SQLITE_CONSTRAINT_PRIMARYKEY", sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, false},
		{"SQLITE_FULL", sqlite3.SQLITE_FULL, false},
	} {
		err := sqlstore.WithClass(errors.New(c.name), sqlite.ClassifyCode(c.code))
		if got := sqlstore.IsOutcomeUnknown(err); got != c.unknown {
			t.Errorf("%s: IsOutcomeUnknown = %v, want %v", c.name, got, c.unknown)
		}
		if sqlstore.IsConnLost(err) {
			t.Errorf("%s: SQLite has no connection to lose", c.name)
		}
	}
	// A real refusal through the driver: a constraint error is known.
	d := dbtest.SQLite(t)
	ctx := context.Background()
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE u (id INTEGER PRIMARY KEY); INSERT INTO u VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	_, err := d.DB().ExecContext(ctx, `INSERT INTO u VALUES (1)`)
	if err == nil || sqlstore.IsOutcomeUnknown(d.ClassifyError(err)) {
		t.Fatalf("duplicate key %v: want a known failure", err)
	}
}

// Settings that switch off SQLite's locking, its journal or its fsync are
// refused, however the DSN spells them. Unlocked, two stores on one file let
// writes commit past higher fences and lost acknowledged ones;
// journal_mode=off let a refused transaction that spilled pages corrupt the
// file. modernc sorts _pragma values and applies _journal and _sync after
// them, so only what the connection reads back counts.
func TestOpenRefusesUnsafeSettings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for i, q := range []string{
		"vfs=unix-none",
		"vfs=unix-dotfile",
		"vf%73=unix-non%65",
		"nolock=1",
		"nolock=true",
		"NOLOCK=on",
		"immutable=1",
		"_pragma=journal_mode(off)",
		"_pragma=journal_mode=off",
		"_pragma=journal_mode%20%3D%20OFF",
		"_pragma=main.journal_mode(off)",
		"_pragma=journal_mode(MEMORY)",
		"_pragma=temp_store(0)%3B%20PRAGMA%20journal_mode%3Doff",
		"_journal=OFF",
		"_journal_mode=memory",
		"_pragma=journal_mode(WAL)&_journal=OFF",
		"_sync=OFF",
		"_synchronous=0",
		"_pragma=synchronous(0)",
		"_pragma=synchronous=off",
		"_pragma=locking_mode(exclusive)",
		"_pragma=locking_mode=EXCLUSIVE",
	} {
		t.Run(q, func(t *testing.T) {
			d, err := sqlite.Open(ctx, "file:"+filepath.Join(dir, strconv.Itoa(i)+".db")+"?"+q)
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, sqlstore.ErrUnsafeSettings) {
				t.Fatalf("Open = %v, want ErrUnsafeSettings", err)
			}
		})
	}
}

// Two stores on one file, the second without locking: it is refused, and
// the first goes on, on a sound file.
func TestOpenRefusesUnlockedSecondStore(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "a.db")
	first, err := sqlite.Open(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"nolock=1", "vfs=unix-none", "immutable=1"} {
		d, err := sqlite.Open(ctx, "file:"+file+"?"+q)
		if err == nil {
			d.Close()
			t.Errorf("%s: a second store opened", q)
		} else if !errors.Is(err, sqlstore.ErrUnsafeSettings) {
			t.Errorf("%s: Open = %v, want ErrUnsafeSettings", q, err)
		}
	}
	if _, err := first.Executor().FenceNext(ctx); err != nil {
		t.Fatal(err)
	}
	var ok string
	if err := first.DB().QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
}

// A locking setting SQLite would act on is refused by DSN itself; one that
// says "off" is kept.
func TestDSNRefusesUnlocked(t *testing.T) {
	for _, q := range []string{"vfs=unix-none", "vfs=win32-none", "nolock=1", "immutable=yes", "nolock=0&nolock=1"} {
		_, err := sqlite.DSN("file:/x.db?" + q)
		if !errors.Is(err, sqlstore.ErrInvalidDSN) || !errors.Is(err, sqlstore.ErrUnsafeSettings) {
			t.Errorf("DSN(%s) = %v, want ErrInvalidDSN and ErrUnsafeSettings", q, err)
		}
	}
	for _, q := range []string{"nolock=0", "immutable=false", "vfs=unix-excl"} {
		if _, err := sqlite.DSN("file:/x.db?" + q); err != nil {
			t.Errorf("DSN(%s): %v", q, err)
		}
	}
}

// The user's own legal settings are kept; synchronous=NORMAL, which can
// lose a commit acknowledged before an OS crash, is a durability warning,
// as Postgres's synchronous_commit=off is.
func TestSettingsKeptAndWarned(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		q       string
		journal string
		warned  bool
	}{
		{"", "wal", false},
		{"_pragma=busy_timeout(50)&nolock=0", "wal", false},
		{"_pragma=journal_mode(DELETE)", "delete", false},
		{"_journal=TRUNCATE", "truncate", false},
		{"_sync=EXTRA", "wal", false},
		{"_sync=NORMAL", "wal", true},
		{"_pragma=synchronous(NORMAL)", "wal", true},
		{"_pragma=synchronous=1", "wal", true},
	} {
		t.Run(tc.q, func(t *testing.T) {
			d, err := sqlite.Open(ctx, "file:"+filepath.Join(dir, strings.NewReplacer("=", "", "&", "", "(", "", ")", "").Replace(tc.q)+"x.db")+"?"+tc.q)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var journal string
			if err := d.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil || journal != tc.journal {
				t.Errorf("journal_mode = %q, %v; want %q", journal, err, tc.journal)
			}
			warnings, err := d.DurabilityWarnings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(warnings) > 0; got != tc.warned || tc.warned && !strings.Contains(warnings[0], "synchronous=NORMAL") {
				t.Errorf("warnings = %q, want warned %v", warnings, tc.warned)
			}
		})
	}
}

// A *sql.DB opened without NewConnector's checks: DurabilityWarnings, which
// `fencegate status` calls, refuses what it finds.
func TestDurabilityWarningsRefusesUnsafe(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "a.db")+"?_pragma=journal_mode(off)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := sqlite.New(db)
	defer d.Close()
	if _, err := d.DurabilityWarnings(context.Background()); !errors.Is(err, sqlstore.ErrUnsafeSettings) {
		t.Fatalf("DurabilityWarnings = %v, want ErrUnsafeSettings", err)
	}
}
