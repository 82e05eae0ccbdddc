package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// isolationLevels are the caller isolation levels the driver must hold at.
var isolationLevels = []struct {
	name  string
	level sql.IsolationLevel
}{
	{"read-committed", sql.LevelReadCommitted},
	{"repeatable-read", sql.LevelRepeatableRead},
	{"serializable", sql.LevelSerializable},
}

func beginAt(t *testing.T, d *mysql.Driver, level sql.IsolationLevel) (*sql.Tx, sqlstore.Executor) {
	t.Helper()
	tx, err := d.DB().BeginTx(context.Background(), &sql.TxOptions{Isolation: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Rollback(context.Background(), tx) })
	return tx, d.UnwrapExecutor(tx)
}

// waitForLockWait returns once some transaction of d's database waits for a
// row lock: the observable state the next step depends on. It fails t if
// done is closed first: the statement expected to wait did not.
func waitForLockWait(t *testing.T, d *mysql.Driver, done <-chan struct{}) {
	t.Helper()
	for {
		select {
		case <-done:
			t.Fatal("the statement that should wait for a lock returned")
		default:
		}
		var n int
		err := d.DB().QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		// Polling an observed state, not a timed guess. InnoDB refreshes the
		// INNODB_TRX table only after it went unread for 100 ms, so polling
		// faster would read the same stale answer forever.
		time.Sleep(150 * time.Millisecond)
	}
}

// An equal fence changes nothing, yet holds the floor's record lock: a raise
// cannot commit while a writer at the floor's fence is in flight.
func TestEqualFenceBlocksRaise(t *testing.T) {
	for _, il := range isolationLevels {
		level := il.level
		t.Run(il.name, func(t *testing.T) {
			d := open(t)
			ctx := context.Background()
			raise(t, d.Executor(), "r", "a", 5, false)
			_, writer := beginAt(t, d, level)
			if got := raise(t, writer, "r", "a", 5, false); !got.Admitted {
				t.Fatalf("equal fence: %+v", got)
			}
			tx, raiser := beginAt(t, d, level)
			if err := raiser.SetLockTimeout(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
			_, err := raiser.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "b", Fence: 6})
			if !sqlstore.IsRetryable(err) {
				t.Fatalf("raise past an in-flight equal fence = %v, want a retryable lock wait timeout", err)
			}
			if me, ok := errors.AsType[*gomysql.MySQLError](err); !ok || me.Number != 1205 {
				t.Fatalf("error = %v, want MySQL error 1205", err)
			}
			_ = d.Rollback(ctx, tx)
		})
	}
}

// A writer that waited on a raise sees the raised floor once the raise
// commits, whatever its snapshot, and is refused.
func TestRaiseRefusesWaitingWriter(t *testing.T) {
	for _, il := range isolationLevels {
		level := il.level
		t.Run(il.name, func(t *testing.T) {
			d := open(t)
			ctx := context.Background()
			raise(t, d.Executor(), "r", "a", 5, false)
			tx, raiser := beginAt(t, d, level)
			raise(t, raiser, "r", "b", 6, false)

			_, writer := beginAt(t, d, level)
			if level != sql.LevelSerializable { // where reads lock, and would wait here
				// A snapshot from before the raise committed.
				if f, err := writer.FloorGet(ctx, "r"); err != nil || f.Floor != 5 {
					t.Fatalf("FloorGet = %+v, %v", f, err)
				}
			}
			var r sqlstore.FloorRaiseResult
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				r, err = writer.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "a", Fence: 5})
			}()
			waitForLockWait(t, d, done)
			if err := d.Commit(ctx, tx); err != nil {
				t.Fatal(err)
			}
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if want := (sqlstore.FloorRaiseResult{Issued: true, Floor: 6, FloorHolder: "b"}); r != want {
				t.Fatalf("waiting writer = %+v, want %+v", r, want)
			}
		})
	}
}

// SetLockTimeout changes the session only until the transaction ends: the
// pooled connection goes back as it came, after a commit and a rollback.
func TestSetLockTimeoutRestored(t *testing.T) {
	d := openURL(t, databaseURL(t, url.Values{"innodb_lock_wait_timeout": {"7"}}))
	d.DB().SetMaxOpenConns(1) // every statement on the one connection
	ctx := context.Background()
	session := func(c interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		var s int
		if err := c.QueryRowContext(ctx, `SELECT @@SESSION.innodb_lock_wait_timeout`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, commit := range []bool{true, false} {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.UnwrapExecutor(tx).SetLockTimeout(ctx, 2500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got := session(tx); got != 3 {
			t.Errorf("in the transaction: %d s, want 3 (2.5 s rounded up)", got)
		}
		if commit {
			err = d.Commit(ctx, tx)
		} else {
			err = d.Rollback(ctx, tx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := session(d.DB()); got != 7 {
			t.Errorf("after the transaction (commit %v): %d s, want the session's own 7", commit, got)
		}
	}
	// And through InTx, the coordinator's way in.
	err := d.InTx(ctx, func(ex sqlstore.Executor) error { return ex.SetLockTimeout(ctx, time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	if got := session(d.DB()); got != 7 {
		t.Errorf("after InTx: %d s, want 7", got)
	}
}

// A transaction rolled back after its context ended still puts the session
// back: the connection returns to the pool as it came.
func TestSetLockTimeoutRestoredAfterCancel(t *testing.T) {
	d := openURL(t, databaseURL(t, url.Values{"innodb_lock_wait_timeout": {"7"}}))
	d.DB().SetMaxOpenConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	tx, err := d.DB().BeginTx(context.Background(), nil) // lives past ctx
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UnwrapExecutor(tx).SetLockTimeout(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = d.Rollback(ctx, tx)
	var s int
	if err := d.DB().QueryRow(`SELECT @@SESSION.innodb_lock_wait_timeout`).Scan(&s); err != nil || s != 7 {
		t.Fatalf("after a cancelled rollback: %d s, %v; want 7", s, err)
	}
}
