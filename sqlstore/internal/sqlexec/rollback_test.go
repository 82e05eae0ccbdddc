package sqlexec

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

func openSQLite(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "a.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// finished reads database/sql's own mark, with no I/O, on a Go release
// that may reorder Tx.StmtContext's checks.
func TestFinished(t *testing.T) {
	db := openSQLite(t)
	for _, end := range []func(*sql.Tx) error{(*sql.Tx).Commit, (*sql.Tx).Rollback} {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if finished(tx) {
			t.Fatal("finished before the transaction ended")
		}
		if _, err := tx.Exec(`SELECT 1`); err != nil {
			t.Fatalf("the transaction after finished: %v", err)
		}
		if err := end(tx); err != nil {
			t.Fatal(err)
		}
		if !finished(tx) {
			t.Fatal("not finished after the transaction ended")
		}
	}
}

// Issue 36, item 1: Rollback returned at ctx's end while tx.Rollback had
// not yet run, and the caller's tx.Commit committed.
func TestRollbackFinishesTxBeforeReturning(t *testing.T) {
	db := openSQLite(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := Rollback(ended, tx, nil, func(err error) error { return err }); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Rollback = %v", err)
		}
		if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("tx.Commit after Rollback = %v, want sql.ErrTxDone", err)
		}
	}
}
