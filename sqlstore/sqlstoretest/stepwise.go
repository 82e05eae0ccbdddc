package sqlstoretest

import (
	"context"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/steps"
)

// Stepwise returns s with its lease rules run by the shared step-by-step
// implementation (the one the SQLite and MySQL drivers run) over s's own
// statements: on Postgres, it runs the steps in place of the SQL
// functions, so that Rules, and the lease coordinator's tests, hold both to
// the same answers. Its releases name no first waiter, and its OnConn runs
// fn on its Executor. Its Unwrap method returns s.
func Stepwise(s sqlstore.Store) sqlstore.Store { return stepwise{s} }

type stepwise struct{ sqlstore.Store }

// Unwrap returns the store whose statements the steps run.
func (s stepwise) Unwrap() sqlstore.Store { return s.Store }

func (s stepwise) Executor() sqlstore.Executor {
	return stepExecutor{s.Store.Executor(), s.Store.InTx}
}

func (s stepwise) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return s.Store.InTx(ctx, func(ex sqlstore.Executor) error { return fn(stepExecutor{ex, nil}) })
}

func (s stepwise) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

// stepExecutor runs the rules by package steps over Executor's primitives;
// inTx is nil in a transaction.
type stepExecutor struct {
	sqlstore.Executor
	inTx steps.InTx
}

func (e stepExecutor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	return steps.Acquire(ctx, e.Executor, e.inTx, p)
}

func (e stepExecutor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	return steps.RenewBatch(ctx, e.Executor, e.inTx, p)
}

func (e stepExecutor) LeaseRelease(ctx context.Context, p *sqlstore.LeaseReleaseParams) (sqlstore.LeaseReleaseResult, error) {
	q := *p
	q.NameFirstWaiter = false
	return e.Executor.LeaseRelease(ctx, &q)
}

func (e stepExecutor) LeaseHandOver(ctx context.Context, p *sqlstore.LeaseHandOverParams) (sqlstore.LeaseHandOverResult, error) {
	return steps.HandOver(ctx, e.Executor, e.inTx, p)
}
