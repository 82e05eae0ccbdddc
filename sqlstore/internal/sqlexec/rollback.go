package sqlexec

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
)

// Rollback rolls tx back and returns only once tx can no longer commit:
// when the rollback has returned, or, when ctx ends first, as soon as
// database/sql has marked tx finished, leaving the rollback's round trip
// to end in the background. before, when set, runs in tx first (MySQL puts
// back a session setting); it bounds itself, and Rollback waits for it.
// A transaction that already ended is not an error. classify marks the
// rollback's own error.
//
// database/sql's Tx.Rollback takes no context, so it runs in a goroutine.
// It marks tx finished first thing, before any lock or I/O, but only once
// that goroutine runs: returning at ctx's end alone would let the caller's
// tx.Commit, called next, get there first and commit (issue 36).
func Rollback(ctx context.Context, tx *sql.Tx, before func() error, classify func(error) error) error {
	rolling := make(chan struct{}) // closed just before tx.Rollback
	done := make(chan error, 1)
	go func() {
		var beforeErr error
		if before != nil {
			beforeErr = before()
		}
		close(rolling)
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			done <- fmt.Errorf("rollback: %w", classify(err))
			return
		}
		if errors.Is(beforeErr, sql.ErrTxDone) {
			beforeErr = nil
		}
		done <- beforeErr
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-rolling:
	}
	for !finished(tx) {
		runtime.Gosched() // the goroutine is a few instructions from marking tx
	}
	return fmt.Errorf("rollback: the database did not answer: %w", ctx.Err())
}

// finished reports whether database/sql has marked tx committed or rolled
// back, without touching its connection: Tx.StmtContext returns
// sql.ErrTxDone for a finished tx before it looks at the statement, and a
// statement of no *sql.DB stops it there, with foreignStmt.
// TestFinished keeps this true across Go releases.
func finished(tx *sql.Tx) bool {
	return errors.Is(tx.StmtContext(context.Background(), new(sql.Stmt)).Close(), sql.ErrTxDone)
}
