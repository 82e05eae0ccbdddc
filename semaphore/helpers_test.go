package semaphore

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// harness gives a test the driver in its native transaction type TTx.
type harness[TTx any] = dbtest.Harness[TTx]

// forEachDriver runs a test written once over TTx on every driver and
// profile, in parallel subtests, itself in parallel with the others.
func forEachDriver(t *testing.T, sqlBody func(*testing.T, harness[*sql.Tx]), pgxBody func(*testing.T, harness[pgx.Tx])) {
	t.Helper()
	t.Parallel()
	dbtest.ForEachWithProfilesParallel(t, sqlBody, pgxBody)
}

// newClient returns a client for holder (on the system clock unless opts
// names one).
func newClient(t *testing.T, holder string, opts lease.ClientOptions) *lease.Client {
	t.Helper()
	opts.Holder = holder
	c, err := lease.NewClient(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquire takes resource for c at once, and fails the test on an error or
// a refusal.
func acquire(t *testing.T, c *lease.Client, coord *lease.Coordinator, resource string) *lease.Lease {
	t.Helper()
	l, err := coord.TryAcquire(context.Background(), c, resource)
	if err != nil {
		t.Fatalf("TryAcquire(%s by %s): %v", resource, c.Holder(), err)
	}
	return l
}

// queueingStore sends the resource of each waiter that joined a queue
// (Executor.WaiterAdd answered) on queued.
type queueingStore struct {
	sqlstore.Store
	queued chan<- string
}

func (s queueingStore) Executor() sqlstore.Executor {
	return queueingExecutor{s.Store.Executor(), s.queued}
}

type queueingExecutor struct {
	sqlstore.Executor
	queued chan<- string
}

func (e queueingExecutor) WaiterAdd(ctx context.Context, p *sqlstore.WaiterAddParams) (int64, error) {
	seq, err := e.Executor.WaiterAdd(ctx, p)
	if err == nil {
		e.queued <- p.Resource
	}
	return seq, err
}
