package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// inTx runs fn in a transaction of d's that is rolled back when t ends.
func inTx(t *testing.T, d *mysql.Driver) (*sql.Tx, sqlstore.Executor) {
	t.Helper()
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Rollback(context.Background(), tx) })
	return tx, d.UnwrapExecutor(tx)
}

func raise(t *testing.T, ex sqlstore.Executor, resource, holder string, fence int64, verify bool) sqlstore.FloorRaiseResult {
	t.Helper()
	r, err := ex.FloorRaise(context.Background(), &sqlstore.FloorRaiseParams{Resource: resource, Holder: holder, Fence: fence, VerifyIssued: verify})
	if err != nil {
		t.Fatalf("FloorRaise(%s, %s, %d): %v", resource, holder, fence, err)
	}
	return r
}

func TestFloorRaiseOutcomes(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	ex := d.Executor()
	type want = sqlstore.FloorRaiseResult
	for _, step := range []struct {
		holder string
		fence  int64
		want   want
	}{
		{"a", 5, want{Issued: true, Admitted: true, Floor: 5, FloorHolder: "a"}}, // inserted
		{"a", 5, want{Issued: true, Admitted: true, Floor: 5, FloorHolder: "a"}}, // equal
		{"b", 7, want{Issued: true, Admitted: true, Floor: 7, FloorHolder: "b"}}, // raised
		{"a", 5, want{Issued: true, Floor: 7, FloorHolder: "b"}},                 // refused
		{"c", 7, want{Issued: true, Admitted: true, Floor: 7, FloorHolder: "c"}}, // equal fence, another holder
		{"b", 6, want{Issued: true, Floor: 7, FloorHolder: "c"}},                 // refused
	} {
		if got := raise(t, ex, "r", step.holder, step.fence, false); got != step.want {
			t.Errorf("raise(%s, %d) = %+v, want %+v", step.holder, step.fence, got, step.want)
		}
	}
	f, err := ex.FloorGet(ctx, "r")
	if err != nil || f.Floor != 7 || f.Holder != "c" || f.UpdatedAt.IsZero() {
		t.Fatalf("FloorGet = %+v, %v", f, err)
	}
	if _, err := ex.FloorGet(ctx, "R"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("FloorGet(R) = %v, want ErrNotFound (names are case-sensitive)", err)
	}
	raise(t, ex, "r ", "a", 1, false) // trailing space: another resource
	fs, err := ex.FloorList(ctx)
	if err != nil || len(fs) != 2 || fs[0].Resource != "r" || fs[1].Resource != "r " {
		t.Fatalf("FloorList = %+v, %v", fs, err)
	}
}

func TestFloorRaiseVerified(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	ex := d.Executor()
	if got := raise(t, ex, "r", "a", 3, true); got != (sqlstore.FloorRaiseResult{}) {
		t.Fatalf("unissued fence: %+v, want nothing", got)
	}
	if _, err := ex.FloorGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
		t.Fatalf("an unissued fence wrote a floor: %v", err)
	}
	grant(t, d, "r", "a")
	grant(t, d, "r", "b") // needs the first one expired: ttl is short
	// b holds fence 2; the floor is 2. a's fence 1 is no longer the lease.
	if got := raise(t, ex, "r", "b", 2, true); !got.Admitted || got.Floor != 2 {
		t.Fatalf("issued fence: %+v", got)
	}
	if got := raise(t, ex, "r", "a", 1, true); got.Issued {
		t.Fatalf("superseded lease verified: %+v", got)
	}
	if got := raise(t, ex, "r", "a", 2, true); got.Issued {
		t.Fatalf("fence of another holder verified: %+v", got)
	}
}

// grant grants holder a 1µs lease on resource through the executor's
// acquisition steps and returns its fence; the lease is expired at once.
func grant(t *testing.T, d *mysql.Driver, resource, holder string) int64 {
	t.Helper()
	ctx := context.Background()
	var fence int64
	err := d.InTx(ctx, func(ex sqlstore.Executor) error {
		row, err := ex.LeaseGetForUpdate(ctx, resource)
		if err != nil {
			return err
		}
		if fence, err = ex.FenceNext(ctx); err != nil {
			return err
		}
		got, ok, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource: resource, Holder: holder, Fence: fence, RequestID: "req-" + holder, TTL: time.Microsecond, Replace: row.Found,
		})
		if err != nil || !ok || got.Fence != fence || got.Holder != holder {
			t.Errorf("LeaseGrant = %+v, %v, %v", got, ok, err)
		}
		r, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: resource, Holder: holder, Fence: fence})
		if err == nil && !r.Admitted {
			t.Errorf("grant's floor raise: %+v", r)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fence
}

// An acquisition in a caller's transaction that fails part way (its floor
// raise waits past the lock timeout, after the lease row was written) leaves
// nothing of itself in the transaction: MySQL keeps a failed procedure's
// earlier writes, so a caller that went on or retried in it would commit a
// grant whose floor was never raised.
func TestFailedAcquireInCallersTxLeavesNothing(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	raise(t, d.Executor(), "r", "h0", 1, false)
	_, other := inTx(t, d)
	raise(t, other, "r", "h0", 1, false) // holds the floor row's lock
	tx, ex := inTx(t, d)
	_, err := ex.LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
		Resource: "r", Holder: "h", RequestID: "req-1", TTL: time.Minute, LockTimeout: time.Second,
	})
	if err == nil || !sqlstore.IsRetryable(err) {
		t.Fatalf("LeaseAcquire with the floor locked = %v, want a retryable lock wait timeout", err)
	}
	var leases, requests int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fencegate_lease WHERE resource = 'r'`).Scan(&leases); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fencegate_request WHERE request_id = 'req-1'`).Scan(&requests); err != nil {
		t.Fatal(err)
	}
	if leases != 0 || requests != 0 {
		t.Fatalf("the failed acquisition left %d lease and %d request rows in the caller's transaction", leases, requests)
	}
}

// The protocol's procedures SIGNAL SQLSTATE 40001 (error 1644) for "run
// the transaction again": retryable, as a deadlock is.
func TestSignalledSerializationFailureIsRetryable(t *testing.T) {
	me := &gomysql.MySQLError{Number: 1644, SQLState: [5]byte{'4', '0', '0', '0', '1'}, Message: "fencegate: run again"}
	if !sqlstore.IsRetryable(open(t).ClassifyError(me)) {
		t.Fatal("SQLSTATE 40001 from SIGNAL is not retryable")
	}
}
