package distributed

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
	"github.com/fencegate/fencegate/sqlstore/internal/steps"
)

// executor is sqlexec's executor over the profile's statements, with the
// two operations that take a counter before they insert: a rejection's
// number and a waiter's place come from fencegate_counter, not from an
// identity column. The lease rules (LeaseAcquire, LeaseRenewBatch) are the
// shared steps (sqlstore/internal/steps), which sqlexec runs where the
// dialect states no rule in one statement: one statement per step, in the
// caller's transaction, or, with inTx (an executor on its own), in a
// transaction of the driver's InTx, which runs them again after a
// serialization failure.
type executor struct {
	sqlstore.Executor
	q querier
}

var _ sqlstore.Executor = executor{}

func newExecutor(q querier, inTx steps.InTx) executor {
	return executor{Executor: sqlexec.New(q, queries, classify, inTx), q: q}
}

// next takes the next value of the counter name.
func (e executor) next(ctx context.Context, name string) (int64, error) {
	var v int64
	err := e.q.QueryRow(ctx, counterNext, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("take counter %q: %w", name, sqlstore.WithClass(
			fmt.Errorf("fencegate_counter has no row %q", name), sqlstore.ErrorClass{NotMigrated: true}))
	}
	if err != nil {
		return 0, fmt.Errorf("take counter %q: %w", name, classify.Classify(err))
	}
	return v, nil
}

// RejectionInsert numbers the rejection from the 'rejection' counter, then
// inserts it.
func (e executor) RejectionInsert(ctx context.Context, r sqlstore.Rejection) (sqlstore.Rejection, error) {
	seq, err := e.next(ctx, counterRejection)
	if err != nil {
		return sqlstore.Rejection{}, fmt.Errorf("log rejection: %w", err)
	}
	var us int64
	err = e.q.QueryRow(ctx, rejectionInsert, seq, r.Resource, r.Fence, r.Holder, r.Floor, r.FloorHolder, r.NotIssued).Scan(&us)
	if err != nil {
		return sqlstore.Rejection{}, fmt.Errorf("log rejection: %w", classify.Classify(err))
	}
	r.Seq, r.At = seq, sqlexec.Micros(us)
	return r, nil
}

// WaiterAdd deletes the resource's expired waiters, takes a place from the
// 'waiter' counter, and queues the waiter there.
func (e executor) WaiterAdd(ctx context.Context, p *sqlstore.WaiterAddParams) (int64, error) {
	if _, err := e.q.Exec(ctx, waiterPrune, p.Resource); err != nil {
		return 0, fmt.Errorf("prune waiters: %w", classify.Classify(err))
	}
	seq, err := e.next(ctx, counterWaiter)
	if err != nil {
		return 0, fmt.Errorf("queue waiter: %w", err)
	}
	if _, err := e.q.Exec(ctx, waiterInsert, append([]any{seq}, sqlexec.WaiterAddArgs(p)...)...); err != nil {
		return 0, fmt.Errorf("queue waiter: %w", classify.Classify(err))
	}
	return seq, nil
}

// conn is what pgx.Tx, *pgxpool.Conn and *pgxpool.Pool have in common.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier is sqlexec's Querier over pgx.
type querier struct{ c conn }

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.c.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlexec.Scanner {
	return q.c.QueryRow(ctx, sql, args...)
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlexec.Rows, error) {
	rs, err := q.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}
