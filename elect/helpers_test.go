package elect

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
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

// failingRenewals is a store whose renewals fail while fail is set: the
// coordinator is unreachable for renewals. It hides the store's pinned
// connections and its announcements.
type failingRenewals struct {
	sqlstore.Store
	fail atomic.Bool
}

func (s *failingRenewals) Executor() sqlstore.Executor {
	return failingRenewExecutor{s.Store.Executor(), &s.fail}
}

func (s *failingRenewals) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *failingRenewals) MaxConns() int { return 0 }

func (s *failingRenewals) SupportsListener() bool { return false }

func (s *failingRenewals) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return s.Store.InTx(ctx, func(ex sqlstore.Executor) error { return fn(failingRenewExecutor{ex, &s.fail}) })
}

type failingRenewExecutor struct {
	sqlstore.Executor
	fail *atomic.Bool
}

var errUnreachable = errors.New("coordinator unreachable")

func (e failingRenewExecutor) LeaseRenew(ctx context.Context, p *sqlstore.LeaseRenewParams) (sqlstore.LeaseRow, error) {
	if e.fail.Load() {
		return sqlstore.LeaseRow{}, errUnreachable
	}
	return e.Executor.LeaseRenew(ctx, p)
}

func (e failingRenewExecutor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	if e.fail.Load() {
		return nil, errUnreachable
	}
	return e.Executor.LeaseRenewBatch(ctx, p)
}
