package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
	"github.com/fencegate/fencegate/sqlstore/internal/steps"
)

// sqlConn is what *sql.DB and *sql.Tx have in common.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// executor implements sqlstore.Executor on the pool (tx nil) or in a
// transaction.
type executor struct {
	d  *Driver
	c  sqlConn
	tx *sql.Tx
}

var _ sqlstore.Executor = (*executor)(nil)

// fail labels a failed statement's error and marks its class; a missing
// table or procedure also matches sqlstore.ErrNotMigrated. nil stays nil.
func fail(what string, err error) error {
	if err == nil {
		return nil
	}
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok && (me.Number == erNoSuchTable || me.Number == erNoSuchProcedure) {
		return fmt.Errorf("%s: %w: %w", what, sqlstore.ErrNotMigrated, err)
	}
	return fmt.Errorf("%s: %w", what, mark(err))
}

// atomic runs fn's statements in one transaction: e's own, or on the pool
// one of their own.
func (e *executor) atomic(ctx context.Context, fn func(e *executor) error) error {
	if e.tx != nil {
		return fn(e)
	}
	return e.d.InTx(ctx, func(ex sqlstore.Executor) error { return fn(ex.(*executor)) })
}

// exec runs a statement and returns MySQL's rows-affected count and
// LAST_INSERT_ID from its OK packet.
func (e *executor) exec(ctx context.Context, query string, args ...any) (n, id int64, err error) {
	res, err := e.c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	id, err = res.LastInsertId()
	return n, id, err
}

// FloorRaise is the SQL protocol's fence check, fencegate_raise (the floor
// rule fencegate_check runs for clients in other languages), in e's
// transaction or, on the pool, one of its own: the procedure's statements
// must share one.
func (e *executor) FloorRaise(ctx context.Context, p *sqlstore.FloorRaiseParams) (sqlstore.FloorRaiseResult, error) {
	var r sqlstore.FloorRaiseResult
	err := e.atomic(ctx, func(e *executor) error {
		var admitted, issued bool
		var floor sql.NullInt64
		var holder sql.NullString
		err := e.c.QueryRowContext(ctx, floorRaiseCall, p.Resource, p.Holder, p.Fence, p.VerifyIssued).
			Scan(&admitted, &issued, &floor, &holder)
		if err != nil {
			return fail("raise floor", err)
		}
		if issued {
			r = sqlstore.FloorRaiseResult{Issued: true, Admitted: admitted, Floor: floor.Int64, FloorHolder: holder.String}
		}
		return nil
	})
	if err != nil {
		return sqlstore.FloorRaiseResult{}, err
	}
	return r, nil
}

func (e *executor) FloorGet(ctx context.Context, resource string) (sqlstore.Floor, error) {
	f, err := sqlexec.ScanFloor(e.c.QueryRowContext(ctx, floorGet, resource))
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.Floor{}, fmt.Errorf("read floor: %w", sqlstore.ErrNotFound)
	}
	if err != nil {
		return sqlstore.Floor{}, fail("read floor", err)
	}
	return f, nil
}

func (e *executor) FloorList(ctx context.Context) ([]sqlstore.Floor, error) {
	return collect(ctx, e.c, "list floors", sqlexec.ScanFloor, floorList)
}

func (e *executor) RejectionInsert(ctx context.Context, r sqlstore.Rejection) (sqlstore.Rejection, error) {
	_, seq, err := e.exec(ctx, rejectionInsert, r.Resource, r.Fence, r.Holder, r.Floor, r.FloorHolder, r.NotIssued)
	if err != nil {
		return sqlstore.Rejection{}, fail("log rejection", err)
	}
	return e.rejectionAt(ctx, r, seq)
}

// rejectionAt reads the time of the record seq, which is written (and, on
// the pool, committed): from here an error only loses its time.
func (e *executor) rejectionAt(ctx context.Context, r sqlstore.Rejection, seq int64) (sqlstore.Rejection, error) {
	r.Seq = seq
	var us int64
	if err := e.c.QueryRowContext(ctx, rejectionAt, seq).Scan(&us); err != nil {
		return r, fail(fmt.Sprintf("read back rejection %d", seq), err)
	}
	r.At = sqlexec.Micros(us)
	return r, nil
}

var _ sqlstore.RefusalLogger = (*executor)(nil)

// LogRefusal records a refusal by the SQL protocol's fencegate_log_refusal,
// the one call every client makes after its refused transaction rolled
// back: the database reads the floor again and records the refusal as it
// finds it, or nothing when it finds none. The procedure runs in a
// transaction of its own, so e must be the pool's executor.
func (e *executor) LogRefusal(ctx context.Context, resource, holder string, fence int64) (sqlstore.Rejection, bool, error) {
	if e.tx != nil {
		return sqlstore.Rejection{}, false, errors.New("log refusal: fencegate_log_refusal runs in a transaction of its own, not the caller's")
	}
	var logged bool
	var seq, floor sql.NullInt64
	var floorHolder sql.NullString
	var notIssued sql.NullBool
	err := e.c.QueryRowContext(ctx, logRefusalCall, resource, holder, fence).Scan(&logged, &seq, &floor, &floorHolder, &notIssued)
	if err != nil {
		return sqlstore.Rejection{}, false, fail("log refusal", err)
	}
	if !logged {
		return sqlstore.Rejection{}, false, nil
	}
	r, err := e.rejectionAt(ctx, sqlstore.Rejection{
		Resource: resource, Fence: fence, Holder: holder,
		Floor: floor.Int64, FloorHolder: floorHolder.String, NotIssued: notIssued.Bool,
	}, seq.Int64)
	return r, true, err
}

func (e *executor) RejectionList(ctx context.Context, p *sqlstore.RejectionListParams) ([]sqlstore.Rejection, error) {
	query := rejectionList
	if p.Newest {
		query = rejectionListDesc
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return collect(ctx, e.c, "list rejections", sqlexec.ScanRejection, query, p.Resource, p.Resource, p.AfterSeq, limit)
}

// SetLockTimeout sets innodb_lock_wait_timeout for the rest of the
// transaction, rounded up to whole seconds (MySQL's unit). On the pool,
// outside a transaction, it does nothing.
func (e *executor) SetLockTimeout(ctx context.Context, d time.Duration) error {
	if e.tx == nil {
		return nil
	}
	secs := max(int64((d+time.Second-1)/time.Second), 1) // 0 is refused by the server
	e.d.lockWait.Store(e.tx, struct{}{})
	if _, err := e.tx.ExecContext(ctx, lockTimeoutSet, secs); err != nil {
		return fail("set lock timeout", err)
	}
	return nil
}

func (e *executor) FenceNext(ctx context.Context) (int64, error) {
	n, fence, err := e.exec(ctx, fenceNext)
	if err != nil {
		return 0, fail("next fence", err)
	}
	if n != 1 || fence <= 0 {
		return 0, fmt.Errorf("next fence: the counter row of fencegate_fence_seq is missing")
	}
	return fence, nil
}

func (e *executor) FenceAtLeast(ctx context.Context, min int64) error {
	if min <= 1 {
		return nil // every fence is at least 1 already
	}
	if _, _, err := e.exec(ctx, fenceAtLeast, min-1); err != nil {
		return fail("advance fence counter", err)
	}
	return nil
}

// scanLease reads leaseCols, and the clock after them when now is set.
func scanLease(s sqlexec.Scanner, now *int64) (sqlstore.LeaseRow, error) {
	var r sqlstore.LeaseRow
	var granted, expires int64
	dest := []any{&r.Resource, &r.Holder, &r.Fence, &r.RequestID, &granted, &expires, &r.Released}
	if now != nil {
		dest = append(dest, now)
	}
	if err := s.Scan(dest...); err != nil {
		return sqlstore.LeaseRow{}, err
	}
	r.Found = true
	r.GrantedAt, r.ExpiresAt = sqlexec.Micros(granted), sqlexec.Micros(expires)
	if now != nil {
		r.Now = sqlexec.Micros(*now)
	}
	return r, nil
}

func scanLeaseNow(s sqlexec.Scanner) (sqlstore.LeaseRow, error) { return scanLease(s, new(int64)) }

// leaseRow reads at most one lease row; a missing row is a LeaseRow with
// Found false, not an error.
func (e *executor) leaseRow(ctx context.Context, query string, now *int64, args ...any) (sqlstore.LeaseRow, error) {
	r, err := scanLease(e.c.QueryRowContext(ctx, query, args...), now)
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.LeaseRow{}, nil
	}
	return r, err
}

func (e *executor) LeaseGetForUpdate(ctx context.Context, resource string) (sqlstore.LeaseRow, error) {
	r, err := e.leaseRow(ctx, leaseGetForUpdate, nil, resource)
	if err != nil || !r.Found {
		return r, fail("lock lease", err)
	}
	var us int64
	if err := e.c.QueryRowContext(ctx, clock).Scan(&us); err != nil {
		return sqlstore.LeaseRow{}, fail("lock lease: read clock", err)
	}
	r.Now = sqlexec.Micros(us)
	return r, nil
}

func (e *executor) LeaseGet(ctx context.Context, resource string) (sqlstore.LeaseRow, error) {
	r, err := e.leaseRow(ctx, leaseGet, new(int64), resource)
	if err != nil {
		return sqlstore.LeaseRow{}, fail("read lease", err)
	}
	if !r.Found {
		return sqlstore.LeaseRow{}, fmt.Errorf("read lease %q: %w", resource, sqlstore.ErrNotFound)
	}
	return r, nil
}

func (e *executor) LeaseList(ctx context.Context) ([]sqlstore.LeaseRow, error) {
	return collect(ctx, e.c, "list leases", scanLeaseNow, leaseList)
}

// readBack reads the lease row the transaction just wrote.
func (e *executor) readBack(ctx context.Context, what, resource string) (sqlstore.LeaseRow, error) {
	r, err := e.leaseRow(ctx, leaseRead, nil, resource)
	if err == nil && !r.Found {
		err = sql.ErrNoRows
	}
	return r, fail(what+": read back", err)
}

// LeaseGrant writes the row, then reads it back (MySQL has no RETURNING);
// Now is the grant's own clock, granted_at.
func (e *executor) LeaseGrant(ctx context.Context, p *sqlstore.LeaseGrantParams) (sqlstore.LeaseRow, bool, error) {
	var r sqlstore.LeaseRow
	err := e.atomic(ctx, func(e *executor) error {
		var n int64
		var err error
		dated := !p.ExpiresAt.IsZero()
		switch {
		case dated && !p.Replace:
			return errors.New("grant lease: a dated grant needs the locked row (Replace)")
		case dated:
			n, _, err = e.exec(ctx, leaseReplaceDated, p.Holder, p.Fence, p.RequestID, p.GrantedAt.UnixMicro(), p.ExpiresAt.UnixMicro(), p.Resource)
		case p.Replace:
			n, _, err = e.exec(ctx, leaseReplace, p.Holder, p.Fence, p.RequestID, p.TTL.Microseconds(), p.Resource)
		default:
			n, _, err = e.exec(ctx, leaseInsert, p.Resource, p.Holder, p.Fence, p.RequestID, p.TTL.Microseconds())
		}
		switch {
		case err != nil:
			return fail("grant lease", err)
		case n == 0 && !p.Replace:
			return nil // a concurrent grant created the row first
		case n != 1:
			return fmt.Errorf("grant lease: %d rows written, want 1", n)
		}
		if r, err = e.readBack(ctx, "grant lease", p.Resource); err != nil {
			return err
		}
		r.Now = r.GrantedAt
		if dated { // granted_at is the waiter's touch: read the clock
			var us int64
			if err := e.c.QueryRowContext(ctx, clock).Scan(&us); err != nil {
				return fail("grant lease: read clock", err)
			}
			r.Now = sqlexec.Micros(us)
		}
		_, _, err = e.exec(ctx, requestInsert, p.Resource, p.RequestID, p.Fence)
		return fail("record request", err)
	})
	if err != nil {
		return sqlstore.LeaseRow{}, false, err
	}
	return r, r.Found, nil
}

func (e *executor) RequestRecord(ctx context.Context, resource, requestID string, fence int64) error {
	_, _, err := e.exec(ctx, requestInsert, resource, requestID, fence)
	return fail("record request", err)
}

// LeaseAbandon runs the shared steps (package steps), in e's transaction
// or one of their own.
func (e *executor) LeaseAbandon(ctx context.Context, p *sqlstore.LeaseAbandonParams) (sqlstore.LeaseAbandonResult, error) {
	return steps.Abandon(ctx, e, e.inTx(), p)
}

func (e *executor) RequestFence(ctx context.Context, resource, requestID string) (int64, error) {
	var fence int64
	err := e.c.QueryRowContext(ctx, requestFence, resource, requestID).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fail("read request", err)
	}
	return fence, nil
}

// LeaseRenew is the SQL protocol's renewal rule (fencegate_renew_rule,
// which fencegate_renew runs for clients in other languages), by
// fencegate_renew_lease: the renewed row with the renewal's clock, none
// when the lease is not live. In e's transaction, or on the pool one of
// its own (the rule's UPDATE and its locking read of the kept lease).
func (e *executor) LeaseRenew(ctx context.Context, p *sqlstore.LeaseRenewParams) (sqlstore.LeaseRow, error) {
	var r sqlstore.LeaseRow
	err := e.atomic(ctx, func(e *executor) error {
		var err error
		r, err = e.leaseRow(ctx, leaseRenewCall, new(int64), p.Resource, p.Holder, p.Fence, p.TTL.Microseconds())
		return fail("renew lease", err)
	})
	if err != nil {
		return sqlstore.LeaseRow{}, err
	}
	return r, nil
}

// LeaseRelease is the SQL protocol's release rule (fencegate_release_rule,
// which fencegate_release runs for clients in other languages), by
// fencegate_release_lease: one UPDATE, atomic on its own. It names no
// first waiter (0: unknown), whatever NameFirstWaiter asks.
func (e *executor) LeaseRelease(ctx context.Context, p *sqlstore.LeaseReleaseParams) (sqlstore.LeaseReleaseResult, error) {
	var released bool
	if err := e.c.QueryRowContext(ctx, leaseReleaseCall, p.Resource, p.Holder, p.Fence).Scan(&released); err != nil {
		return sqlstore.LeaseReleaseResult{}, fail("release lease", err)
	}
	return sqlstore.LeaseReleaseResult{Released: released}, nil
}

// LeaseAcquire acquires one resource by the SQL protocol's rule
// (fencegate_claim_one, which fencegate_claim runs for clients in other
// languages), through fencegate_acquire_lease, in e's transaction or one
// of its own. Sets and paths (their members' path locks and the all or
// none) run the shared steps (package steps), as on SQLite.
func (e *executor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	if len(p.Members) > 0 || fence.IsPath(p.Resource) {
		return steps.Acquire(ctx, e, e.inTx(), p)
	}
	if e.tx != nil {
		return e.acquire(ctx, p, true)
	}
	var res sqlstore.LeaseAcquireResult
	err := e.d.InTx(ctx, func(ex sqlstore.Executor) error {
		var err error
		res, err = ex.(*executor).acquire(ctx, p, false)
		if err == nil && res.Status == sqlstore.AcquireFloorAhead {
			return errFloorAhead // roll the grant back
		}
		return err
	})
	if errors.Is(err, errFloorAhead) {
		return res, nil
	}
	return res, err
}

// undoAcquire rolls a caller's transaction back to the savepoint taken
// before a failed acquisition: MySQL keeps what a procedure's earlier
// statements wrote when a later one fails (a lease row and its request
// written, say, and the floor's raise timed out), and a caller that went on
// in its transaction despite the error, or retried in it (answered
// "retried", which raises no floor), would commit half a grant. Even when
// ctx has ended, bounded as restoreLockWait is; an error here leaves the
// transaction for the caller to roll back, as the contract says.
func (e *executor) undoAcquire(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	if _, _, err := e.exec(ctx, acquireRollback); err != nil {
		return fail("acquire lease: the roll back to its savepoint failed, so the failed acquisition's writes may still be in the transaction: roll the transaction back", err)
	}
	return nil
}

// errFloorAhead makes InTx roll back a grant the floor refused.
var errFloorAhead = errors.New("the floor is ahead of the new fence")

// acquire calls fencegate_acquire_lease in e's transaction. With
// savepoint (a caller's transaction, which is not fencegate's to roll
// back) a grant the floor refused is rolled back to a savepoint taken
// before it; without, the caller rolls the transaction back on
// AcquireFloorAhead.
func (e *executor) acquire(ctx context.Context, p *sqlstore.LeaseAcquireParams, savepoint bool) (_ sqlstore.LeaseAcquireResult, err error) {
	if p.Sending != nil {
		p.Sending() // the transaction has begun: its statements go out now
	}
	if err := e.SetLockTimeout(ctx, p.LockTimeout); err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	if savepoint {
		if _, _, err := e.exec(ctx, acquireSavepoint); err != nil {
			return sqlstore.LeaseAcquireResult{}, fail("acquire lease: savepoint", err)
		}
		defer func() {
			if err != nil {
				err = errors.Join(err, e.undoAcquire(ctx))
			}
		}()
	}
	var (
		res                                  sqlstore.LeaseAcquireResult
		status                               string
		fence, floor, granted, expires, lfen sql.NullInt64
		floorHolder, resource, holder, reqID sql.NullString
		released                             sql.NullBool
		now                                  int64
	)
	err = e.c.QueryRowContext(ctx, acquireCall, p.Resource, p.Holder, p.TTL.Microseconds(), p.RequestID).Scan(
		&status, &fence, &floor, &floorHolder, &resource, &holder, &lfen, &reqID, &granted, &expires, &released, &now)
	if err != nil {
		return sqlstore.LeaseAcquireResult{}, fail("acquire lease", err)
	}
	if resource.Valid {
		res.Lease = sqlstore.LeaseRow{
			Found: true, Resource: resource.String, Holder: holder.String, Fence: lfen.Int64, RequestID: reqID.String,
			GrantedAt: sqlexec.Micros(granted.Int64), ExpiresAt: sqlexec.Micros(expires.Int64), Released: released.Bool,
			Now: sqlexec.Micros(now),
		}
	}
	res.Status = sqlexec.AcquireStatus(status)
	switch res.Status {
	case sqlstore.AcquireGranted, sqlstore.AcquireRetried, sqlstore.AcquireHeld:
		if !res.Lease.Found {
			return sqlstore.LeaseAcquireResult{}, fmt.Errorf("acquire lease: %s without its lease row", status)
		}
		if res.Status != sqlstore.AcquireHeld && p.Waiter != 0 {
			if err := e.WaiterRemove(ctx, p.Waiter); err != nil {
				return sqlstore.LeaseAcquireResult{}, err
			}
		}
	case sqlstore.AcquireRequestExpired:
		res.Fence = fence.Int64
	case sqlstore.AcquireFloorAhead:
		res.Fence, res.Floor, res.FloorHolder = fence.Int64, floor.Int64, floorHolder.String
		if savepoint {
			if err := e.undoAcquire(ctx); err != nil {
				return sqlstore.LeaseAcquireResult{}, err
			}
		}
		return res, nil
	default:
		return sqlstore.LeaseAcquireResult{}, fmt.Errorf("acquire lease: the database answered status %q", status)
	}
	if savepoint {
		if _, _, err := e.exec(ctx, acquireRelease); err != nil {
			return sqlstore.LeaseAcquireResult{}, fail("acquire lease: release the savepoint", err)
		}
	}
	return res, nil
}

// LeaseRenewBatch runs the shared steps (package steps), in e's
// transaction or one of their own.
func (e *executor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	return steps.RenewBatch(ctx, e, e.inTx(), p)
}

// inTx is how the steps begin a transaction: nil when e is in one.
func (e *executor) inTx() steps.InTx {
	if e.tx != nil {
		return nil
	}
	return e.d.InTx
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, c sqlConn, what string, scan func(sqlexec.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rs, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fail(what, err)
	}
	defer rs.Close()
	var out []T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, fail(what, err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, fail(what, err)
	}
	return out, nil
}

func (e *executor) WaiterAdd(ctx context.Context, p *sqlstore.WaiterAddParams) (int64, error) {
	if _, _, err := e.exec(ctx, waiterPrune, p.Resource); err != nil {
		return 0, fail("prune waiters", err)
	}
	_, seq, err := e.exec(ctx, waiterInsert, sqlexec.WaiterAddArgs(p)...)
	if err != nil {
		return 0, fail("queue waiter", err)
	}
	return seq, nil
}

func (e *executor) WaiterTouch(ctx context.Context, resource string, seq int64, ttl time.Duration) (int64, bool, error) {
	if _, _, err := e.exec(ctx, waiterTouch, ttl.Microseconds(), resource, seq); err != nil {
		return 0, false, fail("touch waiter", err)
	}
	var first, mine int64
	if err := e.c.QueryRowContext(ctx, waiterFirst, seq, resource, seq).Scan(&first, &mine); err != nil {
		return 0, false, fail("read first waiter", err)
	}
	if mine == 0 {
		return 0, false, nil
	}
	return first, true, nil
}

func (e *executor) Prune(ctx context.Context, p *sqlstore.PruneParams) (sqlstore.PruneResult, error) {
	var out sqlstore.PruneResult
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var err error
	if p.RequestAge > 0 {
		if out.Requests, _, err = e.exec(ctx, requestPrune, p.RequestAge.Microseconds(), limit); err != nil {
			return out, fail("prune requests", err)
		}
	}
	if p.Waiters {
		if out.Waiters, _, err = e.exec(ctx, waiterPruneAll, limit); err != nil {
			return out, fail("prune waiters", err)
		}
	}
	if p.RejectionKeep > 0 {
		// MySQL cannot read the table a DELETE deletes from in its
		// subquery: the highest seq first, then the batch below it.
		var top int64
		if err := e.c.QueryRowContext(ctx, rejectionMax).Scan(&top); err != nil {
			return out, fail("prune rejections", err)
		}
		if top-p.RejectionKeep > 0 {
			if out.Rejections, _, err = e.exec(ctx, rejectionPrune, top-p.RejectionKeep, limit); err != nil {
				return out, fail("prune rejections", err)
			}
		}
	}
	return out, nil
}

func (e *executor) WaiterRemove(ctx context.Context, seq int64) error {
	_, _, err := e.exec(ctx, waiterDelete, seq)
	return fail("remove waiter", err)
}

func (e *executor) SemaphorePermits(ctx context.Context, name string) (int, bool, error) {
	var n int
	err := e.c.QueryRowContext(ctx, semaphoreGet, name).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fail("read semaphore permits", err)
	}
	return n, true, nil
}

func (e *executor) SetSemaphorePermits(ctx context.Context, name string, permits int) error {
	_, _, err := e.exec(ctx, semaphoreSet, name, permits)
	return fail("store semaphore permits", err)
}

func (e *executor) WaiterHead(ctx context.Context, resource string) (sqlstore.Waiter, bool, error) {
	w, err := sqlexec.ScanWaiter(e.c.QueryRowContext(ctx, waiterHead, resource))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return sqlstore.Waiter{}, false, nil
	case err != nil:
		return sqlstore.Waiter{}, false, fail("read first waiter", err)
	}
	return w, true, nil
}

// LeaseHandOver runs the shared steps (package steps) in e's transaction:
// a hand-over belongs in the transaction of the holder's last write. On
// e alone it runs in a transaction of its own.
func (e *executor) LeaseHandOver(ctx context.Context, p *sqlstore.LeaseHandOverParams) (sqlstore.LeaseHandOverResult, error) {
	return steps.HandOver(ctx, e, e.inTx(), p)
}

func (e *executor) WaiterList(ctx context.Context, resource string) ([]sqlstore.Waiter, error) {
	return collect(ctx, e.c, "list waiters", sqlexec.ScanWaiter, waiterList, resource)
}
