package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// querier is the little both pgx and database/sql can do, so that the
// executor is written once for every driver.
type querier interface {
	exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	queryRow(ctx context.Context, sql string, args ...any) scanner
	query(ctx context.Context, sql string, args ...any) (rows, error)
}

type scanner interface{ Scan(dest ...any) error }

type rows interface {
	scanner
	Next() bool
	Err() error
	Close()
}

// executor implements Executor over a querier and one dialect's SQL text.
type executor struct {
	q   querier
	sql *queries
}

var _ Executor = (*executor)(nil)

func micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func (e *executor) FloorRaise(ctx context.Context, p FloorRaiseParams) (FloorRaiseResult, error) {
	query, held := e.sql.floorRaise, e.sql.floorHeld
	if p.VerifyIssued {
		query, held = e.sql.floorRaiseVerified, e.sql.floorHeldVerified
	}
	var r FloorRaiseResult
	if held != "" {
		// The fence already is the floor: admitted without a write.
		err := e.q.queryRow(ctx, held, p.Resource, p.Fence, p.Holder).Scan(&r.Floor, &r.FloorHolder)
		if err == nil {
			r.Issued, r.Admitted = true, true
			return r, nil
		}
		if !isNoRows(err) {
			return FloorRaiseResult{}, failed("raise floor", err)
		}
	}
	err := e.q.queryRow(ctx, query, p.Resource, p.Fence, p.Holder).Scan(&r.Floor, &r.FloorHolder)
	if isNoRows(err) && p.VerifyIssued {
		return FloorRaiseResult{}, nil // no such lease: nothing was written
	}
	if err != nil {
		return FloorRaiseResult{}, failed("raise floor", err)
	}
	r.Issued = true
	r.Admitted = r.Floor == p.Fence
	return r, nil
}

func scanFloor(s scanner) (Floor, error) {
	var f Floor
	var us int64
	if err := s.Scan(&f.Resource, &f.Floor, &f.Holder, &us); err != nil {
		return Floor{}, err
	}
	f.UpdatedAt = micros(us)
	return f, nil
}

func (e *executor) FloorGet(ctx context.Context, resource string) (Floor, error) {
	f, err := scanFloor(e.q.queryRow(ctx, e.sql.floorGet, resource))
	if err != nil {
		return Floor{}, notFound("read floor", err)
	}
	return f, nil
}

func (e *executor) FloorList(ctx context.Context) ([]Floor, error) {
	return collect(ctx, e.q, "list floors", scanFloor, e.sql.floorList)
}

func (e *executor) RejectionInsert(ctx context.Context, r Rejection) (Rejection, error) {
	var us int64
	err := e.q.queryRow(ctx, e.sql.rejectionInsert,
		r.Resource, r.Fence, r.Holder, r.Floor, r.FloorHolder, r.NotIssued).Scan(&r.Seq, &us)
	if err != nil {
		return Rejection{}, failed("log rejection", err)
	}
	r.At = micros(us)
	return r, nil
}

func scanRejection(s scanner) (Rejection, error) {
	var r Rejection
	var us int64
	err := s.Scan(&r.Seq, &r.Resource, &r.Fence, &r.Holder, &r.Floor, &r.FloorHolder, &r.NotIssued, &us)
	r.At = micros(us)
	return r, err
}

func (e *executor) RejectionList(ctx context.Context, p RejectionListParams) ([]Rejection, error) {
	query := e.sql.rejectionList
	if p.Newest {
		query = e.sql.rejectionListDesc
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	return collect(ctx, e.q, "list rejections", scanRejection, query, p.Resource, p.AfterSeq, p.Limit)
}

func (e *executor) SetLockTimeout(ctx context.Context, d time.Duration) error {
	if e.sql.setLockTimeout == "" {
		return nil
	}
	ms := max(d.Milliseconds(), 1) // 0 would mean "wait forever"
	if err := e.q.queryRow(ctx, e.sql.setLockTimeout, fmt.Sprintf("%dms", ms)).Scan(new(string)); err != nil {
		return failed("set lock timeout", err)
	}
	return nil
}

func (e *executor) FenceNext(ctx context.Context) (int64, error) {
	var fence int64
	if err := e.q.queryRow(ctx, e.sql.fenceNext).Scan(&fence); err != nil {
		return 0, failed("next fence", err)
	}
	return fence, nil
}

func (e *executor) FenceAtLeast(ctx context.Context, min int64) error {
	if min <= 1 {
		return nil // every fence is at least 1 already
	}
	if e.sql.fenceLock != "" {
		if _, err := e.q.exec(ctx, e.sql.fenceLock); err != nil {
			return failed("lock fence sequence", err)
		}
	}
	if _, err := e.q.exec(ctx, e.sql.fenceAtLeast, min); err != nil {
		return failed("advance fence sequence", err)
	}
	return nil
}

func scanLease(s scanner) (LeaseRow, error) {
	var r LeaseRow
	var granted, expires, now int64
	if err := s.Scan(&r.Resource, &r.Holder, &r.Fence, &r.RequestID, &granted, &expires, &r.Released, &now); err != nil {
		return LeaseRow{}, err
	}
	r.Found = true
	r.GrantedAt, r.ExpiresAt, r.Now = micros(granted), micros(expires), micros(now)
	return r, nil
}

// leaseRow reads at most one lease row; a missing row is a LeaseRow with
// Found false, not an error.
func (e *executor) leaseRow(ctx context.Context, what, query string, args ...any) (LeaseRow, error) {
	r, err := scanLease(e.q.queryRow(ctx, query, args...))
	if isNoRows(err) {
		return LeaseRow{}, nil
	}
	if err != nil {
		return LeaseRow{}, failed(what, err)
	}
	return r, nil
}

func (e *executor) LeaseGetForUpdate(ctx context.Context, resource string) (LeaseRow, error) {
	return e.leaseRow(ctx, "lock lease", e.sql.leaseGetForUpdate, resource)
}

func (e *executor) LeaseGet(ctx context.Context, resource string) (LeaseRow, error) {
	r, err := e.leaseRow(ctx, "read lease", e.sql.leaseGet, resource)
	if err == nil && !r.Found {
		return LeaseRow{}, fmt.Errorf("read lease %q: %w", resource, ErrNotFound)
	}
	return r, err
}

func (e *executor) LeaseList(ctx context.Context) ([]LeaseRow, error) {
	return collect(ctx, e.q, "list leases", scanLease, e.sql.leaseList)
}

func (e *executor) LeaseGrant(ctx context.Context, p LeaseGrantParams) (LeaseRow, bool, error) {
	query := e.sql.leaseInsert
	if p.Replace {
		query = e.sql.leaseReplace
	}
	r, err := e.leaseRow(ctx, "grant lease", query, p.Resource, p.Holder, p.Fence, p.RequestID, p.TTL.Microseconds())
	if err != nil || !r.Found {
		return r, false, err
	}
	if _, err := e.q.exec(ctx, e.sql.requestInsert, p.Resource, p.RequestID, p.Fence); err != nil {
		return LeaseRow{}, false, failed("record request", err)
	}
	return r, true, nil
}

func (e *executor) RequestFence(ctx context.Context, resource, requestID string) (int64, error) {
	var fence int64
	err := e.q.queryRow(ctx, e.sql.requestFence, resource, requestID).Scan(&fence)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, failed("read request", err)
	}
	return fence, nil
}

func (e *executor) LeaseRenew(ctx context.Context, p LeaseRenewParams) (LeaseRow, error) {
	return e.leaseRow(ctx, "renew lease", e.sql.leaseRenew, p.Resource, p.Holder, p.Fence, p.TTL.Microseconds())
}

func (e *executor) LeaseRelease(ctx context.Context, resource, holder string, fence int64) (bool, error) {
	n, err := e.q.exec(ctx, e.sql.leaseRelease, resource, holder, fence)
	if err != nil {
		return false, failed("release lease", err)
	}
	return n > 0, nil
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, q querier, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rs, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, failed(what, err)
	}
	defer rs.Close()
	var out []T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, failed(what, err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, failed(what, err)
	}
	return out, nil
}

func notFound(what string, err error) error {
	if isNoRows(err) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return failed(what, err)
}

// ErrNotFound is returned (wrapped) by Executor.FloorGet and
// Executor.LeaseGet for a resource the table has no row for.
var ErrNotFound = errors.New("fencegate: not found")
