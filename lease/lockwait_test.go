package lease

import (
	"context"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// A grant that waited for the lease row is dated after the wait. Postgres's
// one-statement grant (fencegate_grant) reads the clock in the UPDATE that
// writes the new generation; when another transaction changed the row
// while it waited, the UPDATE is evaluated again against the newest row,
// and the clock with it. Read once before the wait (an uncorrelated
// subquery is), the grant was dated before the end of the lease it
// replaced, which the reliability suite reported as granted-while-live.
func TestGrantAfterALockWaitIsDatedAfterIt(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Postgres(t)
	coord := NewCoordinator(d, nil)
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{})
	l := acquire(t, a, coord, "r")
	tok, _ := a.Release(l)
	if ok, err := coord.Release(ctx, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}

	// Another transaction changes the free row (as a late release or
	// renewal that finds nothing to do would not: this one writes a new
	// version) and holds it.
	blocker, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	var pid int
	if err := blocker.QueryRowContext(ctx,
		`UPDATE fencegate_lease SET request_id = request_id WHERE resource = 'r' RETURNING pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out AcquireOutcome
		err error
	}
	acquired := make(chan result, 1)
	go func() {
		req, err := b.BeginAcquire("r")
		if err != nil {
			acquired <- result{err: err}
			return
		}
		out, err := coord.Acquire(ctx, req)
		acquired <- result{out, err}
	}()
	// Wait until the acquisition queues on the row lock: the server says so.
	for {
		var waiting bool
		err := d.DB().QueryRowContext(ctx,
			`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case r := <-acquired:
			t.Fatalf("Acquire = %+v, %v without waiting for the locked row", r.out, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	var us int64
	if err := blocker.QueryRowContext(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-acquired
	if r.err != nil || !r.out.OK {
		t.Fatalf("Acquire after the wait = %+v, %v; want a grant", r.out, r.err)
	}
	st, err := coord.Status(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if end := time.UnixMicro(us); st.GrantedAt.Time().Before(end) {
		t.Errorf("granted at %v, %v before the transaction it waited for committed (%v)", st.GrantedAt, end.Sub(st.GrantedAt.Time()), end.UTC())
	}
}
