package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// forEachStore is dbtest.ForEachStore: every driver and profile, and
// Postgres acquiring one statement at a time, in parallel subtests.
func forEachStore(t *testing.T, fn func(t *testing.T, store sqlstore.Store)) {
	t.Helper()
	dbtest.ForEachStore(t, fn)
}

// harness gives a test the driver in its native transaction type TTx, and
// the raw statements a test needs for its own data tables.
type harness[TTx any] = dbtest.Harness[TTx]

// forEachDriver runs a test written once over TTx on every driver, in
// parallel subtests, and on every profile (dbtest.Profiles):
// forEachDriver(t, body[*sql.Tx], body[pgx.Tx]). The test itself runs in
// parallel with the others that use it (or forEachStore): each has
// databases of its own, and none touches the package's state.
func forEachDriver(t *testing.T, sqlBody func(*testing.T, harness[*sql.Tx]), pgxBody func(*testing.T, harness[pgx.Tx])) {
	t.Helper()
	t.Parallel()
	dbtest.ForEachWithProfilesParallel(t, sqlBody, pgxBody)
}

// newClient returns a client for holder on the system clock.
func newClient(t *testing.T, holder string, opts ClientOptions) *Client {
	t.Helper()
	opts.Holder = holder
	c, err := NewClient(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquire runs the whole acquisition and fails the test on an error or a
// denial.
func acquire(t *testing.T, c *Client, coord *Coordinator, resource string) *Lease {
	t.Helper()
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%s by %s): %v", resource, c.Holder(), err)
	}
	if !out.OK {
		t.Fatalf("Acquire(%s by %s) denied: held by %q (fence %d)", resource, c.Holder(), out.HeldBy, out.Fence)
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitUntilFree blocks until the coordinator no longer holds a live lease on
// resource. Expiry is in the database's clock, which a test cannot advance,
// so this waits (on a timer, for the time the database itself reports) rather
// than synchronising with another goroutine.
func waitUntilFree(t *testing.T, coord *Coordinator, resource string) {
	t.Helper()
	for {
		st, err := coord.Status(context.Background(), resource)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held {
			return
		}
		<-time.After(st.Remaining + time.Millisecond)
	}
}

// renewed waits until l has been renewed n times (its deadline moved), or
// ctx ends: the proof that a kept lease outlived its terms, where waiting
// for so many terms of wall-clock time bets on renewals that a loaded
// machine may have delayed. An error says l ran out first, or ctx ended.
func renewed(ctx context.Context, l *Lease, n int) error {
	for deadline, seen := l.Deadline(), 0; seen < n; {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond): // watching l's deadline move
		}
		if d := l.Deadline(); d != deadline {
			deadline, seen = d, seen+1
		} else if l.Expired() {
			return fmt.Errorf("%v ran out after %d renewals", l.Token(), seen)
		}
	}
	return nil
}

// floorOf reads the gate's floor for resource (0 if it has none).
func floorOf(t *testing.T, store sqlstore.Store, resource string) sqlstore.Floor {
	t.Helper()
	f, err := store.Executor().FloorGet(context.Background(), resource)
	if errors.Is(err, sqlstore.ErrNotFound) {
		return sqlstore.Floor{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mustStale asserts err is the gate's refusal of token, and returns it.
func mustStale(t *testing.T, err error, token fence.Token) *gate.StaleFenceError {
	t.Helper()
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) {
		t.Fatalf("gate accepted or failed otherwise for %v: %v", token, err)
	}
	if stale.Fence != token.Fence || stale.Holder != token.Holder {
		t.Fatalf("refusal %+v is not about %v", stale, token)
	}
	return stale
}
