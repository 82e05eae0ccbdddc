package mysql_test

import (
	"context"
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// Two writers taking two floors in opposite orders deadlock; the victim's
// error is retryable (never a refusal), and so is the caller's own
// statement's error once ClassifyError has seen it.
func TestDeadlockIsRetryable(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	raise(t, d.Executor(), "r1", "h", 1, false)
	raise(t, d.Executor(), "r2", "h", 1, false)
	_, a := inTx(t, d)
	_, b := inTx(t, d)
	raise(t, a, "r1", "h", 2, false)
	raise(t, b, "r2", "h", 2, false)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := a.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r2", Holder: "h", Fence: 3})
		errc <- err
	}()
	waitForLockWait(t, d, done)
	_, errB := b.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r1", Holder: "h", Fence: 3})
	if errB == nil {
		// b won; a was the victim. Roll b back so that a's statement
		// returns even if a was not chosen.
		errB = <-errc
	}
	me, ok := errors.AsType[*gomysql.MySQLError](errB)
	if !ok || me.Number != 1213 {
		t.Fatalf("error = %v, want MySQL error 1213", errB)
	}
	if !sqlstore.IsRetryable(errB) {
		t.Fatalf("deadlock %v is not retryable", errB)
	}
	if !sqlstore.IsRetryable(d.ClassifyError(me)) || d.ClassifyError(nil) != nil {
		t.Fatal("ClassifyError does not mark a native deadlock")
	}
}

// A connection killed under a transaction: the error says the connection
// was lost, so a COMMIT's outcome would be unknown.
func TestKilledConnectionIsConnLost(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	tx, ex := inTx(t, d)
	var id int64
	if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB().ExecContext(ctx, `KILL ?`, id); err != nil {
		t.Fatal(err)
	}
	_, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
	if err == nil || !sqlstore.IsConnLost(err) || sqlstore.IsRetryable(err) {
		t.Fatalf("statement on a killed connection = %v, want a lost connection", err)
	}
	if err := d.Commit(ctx, tx); err == nil || !sqlstore.IsConnLost(err) {
		t.Fatalf("commit on a killed connection = %v, want a lost connection", err)
	}
	if _, err := d.Executor().FloorGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("the killed transaction wrote: %v", err)
	}
}

// The MySQL driver plugs into sqlstore.IsOutcomeUnknown through its
// classification: a connection that broke after a COMMIT was sent leaves
// its outcome unknown; a deadlock is a definite rollback.
func TestOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		err     error
		unknown bool
	}{
		{gomysql.ErrInvalidConn, true},
		{&gomysql.MySQLError{Number: 1053}, true}, // server shutdown
		{&gomysql.MySQLError{Number: 1213}, false},
		{&gomysql.MySQLError{Number: 1062}, false}, // duplicate key
	} {
		err := sqlstore.WithClass(c.err, mysql.Classify(c.err))
		if got := sqlstore.IsOutcomeUnknown(err); got != c.unknown {
			t.Errorf("%v: IsOutcomeUnknown = %v, want %v", c.err, got, c.unknown)
		}
	}
}
