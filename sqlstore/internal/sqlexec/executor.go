// Package sqlexec is the machinery the SQL drivers under sqlstore share: an
// sqlstore.Executor written once over a Querier (the little both pgx and
// database/sql can do) and one dialect's SQL text (Queries), and a
// database/sql driver (Driver) that a dialect configures with its SQL, its
// migrations, its error classification and its clock. A dialect's package
// supplies those and nothing else.
package sqlexec

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/steps"
)

// Querier is the little both pgx and database/sql can do, so that the
// executor is written once for every driver.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	QueryRow(ctx context.Context, sql string, args ...any) Scanner
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
}

// Scanner is one row, or the error that stands for it.
type Scanner interface{ Scan(dest ...any) error }

// Rows is a result set.
type Rows interface {
	Scanner
	Next() bool
	Err() error
	Close()
}

// Classifier is a dialect's reading of its database's native errors.
type Classifier func(error) sqlstore.ErrorClass

// Classify marks err with c's verdict (sqlstore.WithClass).
func (c Classifier) Classify(err error) error {
	if err == nil {
		return nil
	}
	return sqlstore.WithClass(err, c(err))
}

// New returns the executor that runs queries through q, marking every error
// by classify. inTx begins a transaction of q's store for the rules that
// queries does not state in one statement (the shared steps); nil when q
// is a transaction already.
//
// Q is the querier's own type, held beside the executor in one allocation
// (a driver makes an executor per connection taken, on every call): q as a
// Querier would be boxed in a second.
func New[Q any, PQ interface {
	*Q
	Querier
}](q Q, queries *Queries, classify Classifier, inTx steps.InTx) sqlstore.Executor {
	e := &struct {
		executor
		q Q
	}{q: q}
	e.executor = executor{q: PQ(&e.q), sql: queries, classify: classify, inTx: inTx}
	return &e.executor
}

// executor implements sqlstore.Executor over a Querier and one dialect's SQL
// text.
type executor struct {
	q        Querier
	sql      *Queries
	classify Classifier
	inTx     steps.InTx // nil in a caller's transaction
}

// fail wraps a failed statement's error with what it was doing.
func (e *executor) fail(what string, err error) error {
	return fmt.Errorf("%s: %w", what, e.classify.Classify(err))
}

// Micros is a time read as integer microseconds since the Unix epoch, the
// form every dialect's SQL returns times in.
func Micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func (e *executor) FloorRaise(ctx context.Context, p *sqlstore.FloorRaiseParams) (sqlstore.FloorRaiseResult, error) {
	query, held := e.sql.FloorRaise, e.sql.FloorHeld
	if p.VerifyIssued {
		query, held = e.sql.FloorRaiseVerified, e.sql.FloorHeldVerified
	}
	var r sqlstore.FloorRaiseResult
	if held != "" {
		// The fence already is the floor: admitted without a write.
		err := e.q.QueryRow(ctx, held, p.Resource, p.Fence, p.Holder).Scan(&r.Floor, &r.FloorHolder)
		if err == nil {
			r.Issued, r.Admitted = true, true
			return r, nil
		}
		if !isNoRows(err) {
			return sqlstore.FloorRaiseResult{}, e.fail("raise floor", err)
		}
	}
	err := e.q.QueryRow(ctx, query, p.Resource, p.Fence, p.Holder).Scan(&r.Floor, &r.FloorHolder)
	if isNoRows(err) && p.VerifyIssued {
		return sqlstore.FloorRaiseResult{}, nil // no such lease: nothing was written
	}
	if err != nil {
		return sqlstore.FloorRaiseResult{}, e.fail("raise floor", err)
	}
	r.Issued = true
	r.Admitted = r.Floor == p.Fence
	return r, nil
}

// ScanFloor reads a floor row: resource, floor, holder, updated_at (µs).
func ScanFloor(s Scanner) (sqlstore.Floor, error) {
	var f sqlstore.Floor
	var us int64
	if err := s.Scan(&f.Resource, &f.Floor, &f.Holder, &us); err != nil {
		return sqlstore.Floor{}, err
	}
	f.UpdatedAt = Micros(us)
	return f, nil
}

func (e *executor) FloorGet(ctx context.Context, resource string) (sqlstore.Floor, error) {
	f, err := ScanFloor(e.q.QueryRow(ctx, e.sql.FloorGet, resource))
	if err != nil {
		return sqlstore.Floor{}, e.notFound("read floor", err)
	}
	return f, nil
}

func (e *executor) FloorList(ctx context.Context) ([]sqlstore.Floor, error) {
	return collect(ctx, e, "list floors", ScanFloor, e.sql.FloorList)
}

func (e *executor) RejectionInsert(ctx context.Context, r sqlstore.Rejection) (sqlstore.Rejection, error) {
	var us int64
	err := e.q.QueryRow(ctx, e.sql.RejectionInsert,
		r.Resource, r.Fence, r.Holder, r.Floor, r.FloorHolder, r.NotIssued).Scan(&r.Seq, &us)
	if err != nil {
		return sqlstore.Rejection{}, e.fail("log rejection", err)
	}
	r.At = Micros(us)
	return r, nil
}

// LogRefusal records the refusal of (resource, holder, fence) by the
// dialect's rule (Queries.RefusalLog): the database reads the floor again
// and records the refusal only when the fence really is refused, below the
// floor or never issued, reporting whether it did. It is the gate's
// refusal log on Postgres (sqlstore.RefusalLogger), the same function a
// client in any language calls after its refused transaction rolled back
// (docs/SQL.md, fencegate_log_refusal). A dialect without the statement
// records nothing and answers false, so that the gate writes its own
// record (Executor.RejectionInsert).
var _ sqlstore.RefusalLogger = (*executor)(nil)

func (e *executor) LogRefusal(ctx context.Context, resource, holder string, fence int64) (sqlstore.Rejection, bool, error) {
	if e.sql.RefusalLog == "" {
		return sqlstore.Rejection{}, false, nil
	}
	r := sqlstore.Rejection{Resource: resource, Holder: holder, Fence: fence}
	var us int64
	err := e.q.QueryRow(ctx, e.sql.RefusalLog, resource, holder, fence).Scan(&r.Seq, &r.Floor, &r.FloorHolder, &r.NotIssued, &us)
	if isNoRows(err) {
		return sqlstore.Rejection{}, false, nil
	}
	if err != nil {
		return sqlstore.Rejection{}, false, e.fail("log rejection", err)
	}
	r.At = Micros(us)
	return r, true, nil
}

// ScanRejection reads a rejection row: seq, resource, fence, holder, floor,
// floor_holder, not_issued, at (µs).
func ScanRejection(s Scanner) (sqlstore.Rejection, error) {
	var r sqlstore.Rejection
	var us int64
	err := s.Scan(&r.Seq, &r.Resource, &r.Fence, &r.Holder, &r.Floor, &r.FloorHolder, &r.NotIssued, &us)
	r.At = Micros(us)
	return r, err
}

func (e *executor) RejectionList(ctx context.Context, p *sqlstore.RejectionListParams) ([]sqlstore.Rejection, error) {
	query := e.sql.RejectionList
	if p.Newest {
		query = e.sql.RejectionListDesc
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return collect(ctx, e, "list rejections", ScanRejection, query, p.Resource, p.AfterSeq, limit)
}

// lockTimeout is d as a Postgres lock_timeout setting, in whole
// milliseconds and never 0, which would mean "wait forever".
func lockTimeout(d time.Duration) string {
	return fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
}

func (e *executor) SetLockTimeout(ctx context.Context, d time.Duration) error {
	if e.sql.SetLockTimeout == "" {
		return nil
	}
	if err := e.q.QueryRow(ctx, e.sql.SetLockTimeout, lockTimeout(d)).Scan(new(string)); err != nil {
		return e.fail("set lock timeout", err)
	}
	return nil
}

func (e *executor) FenceNext(ctx context.Context) (int64, error) {
	var fence int64
	if err := e.q.QueryRow(ctx, e.sql.FenceNext).Scan(&fence); err != nil {
		return 0, e.fail("next fence", err)
	}
	return fence, nil
}

func (e *executor) FenceAtLeast(ctx context.Context, min int64) error {
	if min <= 1 {
		return nil // every fence is at least 1 already
	}
	if e.sql.FenceLock != "" {
		if _, err := e.q.Exec(ctx, e.sql.FenceLock); err != nil {
			return e.fail("lock fence sequence", err)
		}
	}
	if _, err := e.q.Exec(ctx, e.sql.FenceAtLeast, min); err != nil {
		return e.fail("advance fence sequence", err)
	}
	return nil
}

// leaseScan is where a lease row is scanned to: one allocation, where a
// row and three separate integers were four.
type leaseScan struct {
	row                   sqlstore.LeaseRow
	granted, expires, now int64
}

// dest is the scan destination of a lease row: its columns as every
// dialect returns them, times in microseconds, then the clock.
func (d *leaseScan) dest() []any {
	r := &d.row
	return []any{&r.Resource, &r.Holder, &r.Fence, &r.RequestID, &d.granted, &d.expires, &r.Released, &d.now}
}

// lease is the row scanned, its times read.
func (d *leaseScan) lease() sqlstore.LeaseRow {
	r := d.row
	r.Found = true
	r.GrantedAt, r.ExpiresAt, r.Now = Micros(d.granted), Micros(d.expires), Micros(d.now)
	return r
}

func scanLease(s Scanner) (sqlstore.LeaseRow, error) {
	d := new(leaseScan)
	if err := s.Scan(d.dest()...); err != nil {
		return sqlstore.LeaseRow{}, err
	}
	return d.lease(), nil
}

// leaseRow reads at most one lease row; a missing row is a sqlstore.LeaseRow with
// Found false, not an error.
func (e *executor) leaseRow(ctx context.Context, what, query string, args ...any) (sqlstore.LeaseRow, error) {
	r, err := scanLease(e.q.QueryRow(ctx, query, args...))
	if isNoRows(err) {
		return sqlstore.LeaseRow{}, nil
	}
	if err != nil {
		return sqlstore.LeaseRow{}, e.fail(what, err)
	}
	return r, nil
}

// tick runs the dialect's ClockTick, if it has one.
func (e *executor) tick(ctx context.Context) error {
	if e.sql.ClockTick == "" {
		return nil
	}
	if _, err := e.q.Exec(ctx, e.sql.ClockTick); err != nil {
		return e.fail("advance clock", err)
	}
	return nil
}

func (e *executor) LeaseGetForUpdate(ctx context.Context, resource string) (sqlstore.LeaseRow, error) {
	if err := e.tick(ctx); err != nil {
		return sqlstore.LeaseRow{}, err
	}
	return e.leaseRow(ctx, "lock lease", e.sql.LeaseGetForUpdate, resource)
}

func (e *executor) LeaseGet(ctx context.Context, resource string) (sqlstore.LeaseRow, error) {
	r, err := e.leaseRow(ctx, "read lease", e.sql.LeaseGet, resource)
	if err == nil && !r.Found {
		return sqlstore.LeaseRow{}, fmt.Errorf("read lease %q: %w", resource, sqlstore.ErrNotFound)
	}
	return r, err
}

func (e *executor) PathLock(ctx context.Context, resource string, exclusive bool) error {
	query := e.sql.PathLockShared
	if exclusive {
		query = e.sql.PathLockExclusive
	}
	if query == "" {
		return nil
	}
	if _, err := e.q.Exec(ctx, query, resource); err != nil {
		return e.fail("lock path", err)
	}
	return nil
}

func (e *executor) LeaseLiveBelow(ctx context.Context, dir string) (sqlstore.LeaseRow, error) {
	if err := e.tick(ctx); err != nil {
		return sqlstore.LeaseRow{}, err
	}
	return e.leaseRow(ctx, "read leases below", e.sql.LeaseLiveBelow, dir, DirUpperBound(dir))
}

// DirUpperBound is the first name above every name below the directory
// name dir (which ends in "/"): dir with its last "/" made "0", the next
// byte.
func DirUpperBound(dir string) string { return dir[:len(dir)-1] + "0" }

func (e *executor) FloorGetLocked(ctx context.Context, resource string) (sqlstore.Floor, error) {
	query := cmp.Or(e.sql.FloorGetLocked, e.sql.FloorGet)
	f, err := ScanFloor(e.q.QueryRow(ctx, query, resource))
	if err != nil {
		return sqlstore.Floor{}, e.notFound("read floor", err)
	}
	return f, nil
}

func (e *executor) LeaseList(ctx context.Context) ([]sqlstore.LeaseRow, error) {
	return collect(ctx, e, "list leases", scanLease, e.sql.LeaseList)
}

func (e *executor) LeaseGrant(ctx context.Context, p *sqlstore.LeaseGrantParams) (sqlstore.LeaseRow, bool, error) {
	if err := e.tick(ctx); err != nil {
		return sqlstore.LeaseRow{}, false, err
	}
	query := e.sql.LeaseInsert
	if p.Replace {
		query = e.sql.LeaseReplace
	}
	args := []any{p.Resource, p.Holder, p.Fence, p.RequestID, p.TTL.Microseconds()}
	if !p.ExpiresAt.IsZero() {
		if !p.Replace {
			return sqlstore.LeaseRow{}, false, e.fail("grant lease", errors.New("a dated grant needs the locked row (Replace)"))
		}
		query, args = e.sql.LeaseReplaceDated, append(args[:4], p.GrantedAt.UnixMicro(), p.ExpiresAt.UnixMicro())
	}
	r, err := e.leaseRow(ctx, "grant lease", query, args...)
	if err != nil || !r.Found {
		return r, false, err
	}
	if _, err := e.q.Exec(ctx, e.sql.RequestInsert, p.Resource, p.RequestID, p.Fence); err != nil {
		return sqlstore.LeaseRow{}, false, e.fail("record request", err)
	}
	return r, true, nil
}

// RequestInRow is steps.RowRecords.
func (e *executor) RequestInRow() bool { return e.sql.RequestInRow }

func (e *executor) RequestRecord(ctx context.Context, resource, requestID string, fence int64) error {
	if _, err := e.q.Exec(ctx, e.sql.RequestInsert, resource, requestID, fence); err != nil {
		return e.fail("record request", err)
	}
	return nil
}

// LeaseAbandon runs the shared steps on every dialect: on Postgres too, as
// a path of the coordinator's cleanup, never of its hot path.
func (e *executor) LeaseAbandon(ctx context.Context, p *sqlstore.LeaseAbandonParams) (sqlstore.LeaseAbandonResult, error) {
	return steps.Abandon(ctx, e, e.inTx, p)
}

func (e *executor) RequestFence(ctx context.Context, resource, requestID string) (int64, error) {
	var fence int64
	err := e.q.QueryRow(ctx, e.sql.RequestFence, resource, requestID).Scan(&fence)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, e.fail("read request", err)
	}
	return fence, nil
}

func (e *executor) LeaseRenew(ctx context.Context, p *sqlstore.LeaseRenewParams) (sqlstore.LeaseRow, error) {
	if err := e.tick(ctx); err != nil {
		return sqlstore.LeaseRow{}, err
	}
	return e.leaseRow(ctx, "renew lease", e.sql.LeaseRenew, p.Resource, p.Holder, p.Fence, p.TTL.Microseconds())
}

// LeaseRelease releases by Queries.LeaseRelease, or, asked to name the
// first waiter, by Queries.LeaseReleaseFirst, which reads it in the same
// statement (without it, the first waiter is 0: unknown).
func (e *executor) LeaseRelease(ctx context.Context, p *sqlstore.LeaseReleaseParams) (sqlstore.LeaseReleaseResult, error) {
	if err := e.tick(ctx); err != nil {
		return sqlstore.LeaseReleaseResult{}, err
	}
	args := []any{p.Resource, p.Holder, p.Fence}
	if e.sql.LeaseReleaseSettles {
		args = append(args, p.Settled)
	}
	if !p.NameFirstWaiter || e.sql.LeaseReleaseFirst == "" {
		n, err := e.q.Exec(ctx, e.sql.LeaseRelease, args...)
		if err != nil {
			return sqlstore.LeaseReleaseResult{}, e.fail("release lease", err)
		}
		return sqlstore.LeaseReleaseResult{Released: n > 0}, nil
	}
	var first int64
	err := e.q.QueryRow(ctx, e.sql.LeaseReleaseFirst, args...).Scan(&first)
	switch {
	case isNoRows(err):
		return sqlstore.LeaseReleaseResult{}, nil
	case err != nil:
		return sqlstore.LeaseReleaseResult{}, e.fail("release lease", err)
	}
	return sqlstore.LeaseReleaseResult{Released: true, FirstWaiter: first}, nil
}

func (e *executor) WaiterAdd(ctx context.Context, p *sqlstore.WaiterAddParams) (int64, error) {
	if e.sql.WaiterPrune != "" {
		if _, err := e.q.Exec(ctx, e.sql.WaiterPrune, p.Resource); err != nil {
			return 0, e.fail("prune waiters", err)
		}
	}
	var seq int64
	if err := e.q.QueryRow(ctx, e.sql.WaiterInsert, WaiterAddArgs(p)...).Scan(&seq); err != nil {
		return 0, e.fail("queue waiter", err)
	}
	return seq, nil
}

// WaiterAddArgs are Queries.WaiterInsert's arguments: resource, holder,
// ttl µs, request id (NULL for none), term µs.
func WaiterAddArgs(p *sqlstore.WaiterAddParams) []any {
	var id any
	if p.RequestID != "" {
		id = p.RequestID
	}
	return []any{p.Resource, p.Holder, p.TTL.Microseconds(), id, p.Term.Microseconds()}
}

func (e *executor) WaiterHead(ctx context.Context, resource string) (sqlstore.Waiter, bool, error) {
	w, err := ScanWaiter(e.q.QueryRow(ctx, e.sql.WaiterHead, resource))
	switch {
	case isNoRows(err):
		return sqlstore.Waiter{}, false, nil
	case err != nil:
		return sqlstore.Waiter{}, false, e.fail("read first waiter", err)
	}
	return w, true, nil
}

// LeaseHandOver is one statement where the dialect states the rule
// (Queries.LeaseHandOver, Postgres), and the shared steps elsewhere.
func (e *executor) LeaseHandOver(ctx context.Context, p *sqlstore.LeaseHandOverParams) (sqlstore.LeaseHandOverResult, error) {
	if e.sql.LeaseHandOver == "" {
		return steps.HandOver(ctx, e, e.inTx, p)
	}
	res, err := ScanHandOver(e.q.QueryRow(ctx, e.sql.LeaseHandOver, p.Resource, p.Holder, p.Fence), p.Resource)
	if err != nil {
		return sqlstore.LeaseHandOverResult{}, e.fail("hand over lease", err)
	}
	return res, nil
}

// ScanHandOver reads the row of Queries.LeaseHandOver for resource:
// released, waiter, and the new generation's holder, fence, request id,
// granted µs, expires µs and the clock (Lease is set only with a waiter).
func ScanHandOver(s Scanner, resource string) (sqlstore.LeaseHandOverResult, error) {
	var (
		res                   sqlstore.LeaseHandOverResult
		granted, expires, now int64
		l                     = sqlstore.LeaseRow{Resource: resource}
	)
	if err := s.Scan(&res.Released, &res.Waiter, &l.Holder, &l.Fence, &l.RequestID, &granted, &expires, &now); err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	if res.Waiter != 0 {
		l.Found = true
		l.GrantedAt, l.ExpiresAt, l.Now = Micros(granted), Micros(expires), Micros(now)
		res.Lease = l
	}
	return res, nil
}

func (e *executor) WaiterTouch(ctx context.Context, resource string, seq int64, ttl time.Duration) (int64, bool, error) {
	if e.sql.WaiterTouchFirst != "" {
		var first int64
		err := e.q.QueryRow(ctx, e.sql.WaiterTouchFirst, resource, seq, ttl.Microseconds()).Scan(&first)
		switch {
		case isNoRows(err):
			return 0, false, nil
		case err != nil:
			return 0, false, e.fail("touch waiter", err)
		}
		return first, true, nil
	}
	n, err := e.q.Exec(ctx, e.sql.WaiterTouch, resource, seq, ttl.Microseconds())
	if err != nil {
		return 0, false, e.fail("touch waiter", err)
	}
	if n == 0 {
		return 0, false, nil
	}
	var first int64
	if err := e.q.QueryRow(ctx, e.sql.WaiterFirst, resource, seq).Scan(&first); err != nil {
		return 0, false, e.fail("read first waiter", err)
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
		if out.Requests, err = e.q.Exec(ctx, e.sql.RequestPrune, p.RequestAge.Microseconds(), limit); err != nil {
			return out, e.fail("prune requests", err)
		}
	}
	if p.Waiters {
		if out.Waiters, err = e.q.Exec(ctx, e.sql.WaiterPruneAll, limit); err != nil {
			return out, e.fail("prune waiters", err)
		}
	}
	if p.RejectionKeep > 0 {
		if out.Rejections, err = e.q.Exec(ctx, e.sql.RejectionPrune, p.RejectionKeep, limit); err != nil {
			return out, e.fail("prune rejections", err)
		}
	}
	return out, nil
}

func (e *executor) WaiterRemove(ctx context.Context, seq int64) error {
	if _, err := e.q.Exec(ctx, e.sql.WaiterDelete, seq); err != nil {
		return e.fail("remove waiter", err)
	}
	return nil
}

// ScanWaiter reads a waiter row: seq, resource, holder, expires_at in
// microseconds since the Unix epoch, request id (” for none), term µs,
// touched_at µs (0 for none).
func ScanWaiter(s Scanner) (sqlstore.Waiter, error) {
	var w sqlstore.Waiter
	var us, term, touched int64
	err := s.Scan(&w.Seq, &w.Resource, &w.Holder, &us, &w.RequestID, &term, &touched)
	w.ExpiresAt, w.Term = Micros(us), time.Duration(term)*time.Microsecond
	if touched != 0 {
		w.TouchedAt = Micros(touched)
	}
	return w, err
}

func (e *executor) WaiterList(ctx context.Context, resource string) ([]sqlstore.Waiter, error) {
	return collect(ctx, e, "list waiters", ScanWaiter, e.sql.WaiterList, resource)
}

func (e *executor) SemaphorePermits(ctx context.Context, name string) (int, bool, error) {
	var n int
	err := e.q.QueryRow(ctx, e.sql.SemaphoreGet, name).Scan(&n)
	switch {
	case isNoRows(err):
		return 0, false, nil
	case err != nil:
		return 0, false, e.fail("read semaphore permits", err)
	}
	return n, true, nil
}

func (e *executor) SetSemaphorePermits(ctx context.Context, name string, permits int) error {
	if _, err := e.q.Exec(ctx, e.sql.SemaphoreSet, name, permits); err != nil {
		return e.fail("store semaphore permits", err)
	}
	return nil
}

// AcquireStatus reads the status column of an acquisition in SQL
// (Queries.LeaseAcquire, MySQL's fencegate_acquire_lease): 0 for a status
// it does not know.
func AcquireStatus(status string) sqlstore.AcquireStatus { return acquireStatus[status] }

// acquireStatus is AcquireStatus's table.
var acquireStatus = map[string]sqlstore.AcquireStatus{
	"granted":         sqlstore.AcquireGranted,
	"retried":         sqlstore.AcquireRetried,
	"held":            sqlstore.AcquireHeld,
	"request_expired": sqlstore.AcquireRequestExpired,
	"floor_ahead":     sqlstore.AcquireFloorAhead,
}

// LeaseAcquire runs the dialect's one-statement acquisition
// (Queries.LeaseAcquire), or, where it has none, the shared steps.
func (e *executor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	// A claim of several resources, or of a path, runs the shared steps on
	// every dialect: Postgres's one statement knows one plain resource.
	if e.sql.LeaseAcquire == "" || len(p.Members) > 0 || fence.IsPath(p.Resource) {
		return steps.Acquire(ctx, e, e.inTx, p)
	}
	if p.Sending != nil {
		p.Sending()
	}
	query, args := e.sql.LeaseAcquire, []any(nil)
	if p.Waiter != 0 {
		query, args = e.sql.LeaseAcquireTurn, []any{p.Waiter, false}
	}
	if e.sql.leaseAcquireFirst != "" {
		fast := e.sql.leaseAcquireFirst
		if p.Waiter != 0 {
			fast, args = e.sql.LeaseAcquireTurn, []any{p.Waiter, true}
		}
		res, err := e.acquire(ctx, fast, p, args...)
		if !asksForRecheck(err) {
			return res, err
		}
		// Rolled back, nothing written: a late retry or a floor ahead,
		// which LeaseAcquire tells apart before it writes.
		if p.Waiter != 0 {
			args = []any{p.Waiter, false}
		}
	}
	return e.acquire(ctx, query, p, args...)
}

// asksForRecheck reports whether err is Queries.LeaseAcquireAutocommit's
// request for Queries.LeaseAcquire: SQLSTATE AcquireRecheck, or the
// unique_violation of a request id that already made a generation.
func asksForRecheck(err error) bool {
	coded, ok := errors.AsType[interface {
		error
		SQLState() string
	}](err)
	return ok && (coded.SQLState() == AcquireRecheck || coded.SQLState() == "23505")
}

// acquire runs one of the one-statement acquisitions and reads its row.
// extra are the arguments after the fifth (LeaseAcquireTurn's).
func (e *executor) acquire(ctx context.Context, query string, p *sqlstore.LeaseAcquireParams, extra ...any) (sqlstore.LeaseAcquireResult, error) {
	d := new(struct {
		leaseScan
		res    sqlstore.LeaseAcquireResult
		status string
	})
	args := append([]any{p.Resource, p.Holder, p.RequestID, p.TTL.Microseconds(), lockTimeout(p.LockTimeout)}, extra...)
	r := &d.row
	err := e.q.QueryRow(ctx, query, args...).
		Scan(&d.status, &r.Resource, &r.Holder, &r.Fence, &r.RequestID, &d.granted, &d.expires, &r.Released, &d.now,
			&d.res.Fence, &d.res.Floor, &d.res.FloorHolder)
	if err != nil {
		return sqlstore.LeaseAcquireResult{}, e.fail("one-statement acquire", err)
	}
	res := d.res
	res.Status = acquireStatus[d.status]
	switch res.Status {
	case 0:
		return sqlstore.LeaseAcquireResult{}, fmt.Errorf("one-statement acquire: unknown status %q", d.status)
	case sqlstore.AcquireGranted, sqlstore.AcquireRetried, sqlstore.AcquireHeld:
		res.Lease = d.lease()
	default:
		res.Lease = sqlstore.LeaseRow{Now: Micros(d.now)}
	}
	return res, nil
}

// LeaseRenewBatch renews by Queries.LeaseRenewBatch in one statement, or,
// where the dialect has none, by the shared steps.
func (e *executor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	if e.sql.LeaseRenewBatch == "" {
		return steps.RenewBatch(ctx, e, e.inTx, p)
	}
	if p.Sending != nil {
		p.Sending()
	}
	return e.renewBatch(ctx, p.Renewals)
}

// renewBatch runs Queries.LeaseRenewBatch: the requests go as four arrays,
// and each renewed row comes back with its request's ordinality.
func (e *executor) renewBatch(ctx context.Context, ps []sqlstore.LeaseRenewParams) ([]sqlstore.LeaseRow, error) {
	out := make([]sqlstore.LeaseRow, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	resources, holders := make([]string, len(ps)), make([]string, len(ps))
	fences, ttls := make([]int64, len(ps)), make([]int64, len(ps))
	for i, p := range ps {
		resources[i], holders[i], fences[i], ttls[i] = p.Resource, p.Holder, p.Fence, p.TTL.Microseconds()
	}
	rs, err := e.q.Query(ctx, e.sql.LeaseRenewBatch, resources, holders, fences, ttls)
	if err != nil {
		return nil, e.fail("renew leases", err)
	}
	defer rs.Close()
	for rs.Next() {
		var i int64
		var r sqlstore.LeaseRow
		var granted, expires, now int64
		if err := rs.Scan(&i, &r.Resource, &r.Holder, &r.Fence, &r.RequestID, &granted, &expires, &r.Released, &now); err != nil {
			return nil, e.fail("renew leases", err)
		}
		if i < 1 || i > int64(len(ps)) {
			return nil, fmt.Errorf("renew leases: the database answered request %d of %d", i, len(ps))
		}
		r.Found = true
		r.GrantedAt, r.ExpiresAt, r.Now = Micros(granted), Micros(expires), Micros(now)
		out[i-1] = r
	}
	if err := rs.Err(); err != nil {
		return nil, e.fail("renew leases", err)
	}
	return out, nil
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, e *executor, what string, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rs, err := e.q.Query(ctx, query, args...)
	if err != nil {
		return nil, e.fail(what, err)
	}
	defer rs.Close()
	var out []T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, e.fail(what, err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, e.fail(what, err)
	}
	return out, nil
}

func (e *executor) notFound(what string, err error) error {
	if isNoRows(err) {
		return fmt.Errorf("%s: %w", what, sqlstore.ErrNotFound)
	}
	return e.fail(what, err)
}

// isNoRows matches database/sql's and pgx's no-rows error (pgx.ErrNoRows
// matches sql.ErrNoRows).
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
