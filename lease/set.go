package lease

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// BeginAcquireSet starts an acquisition of several resources at once, in one
// grant under one fence (Coordinator.Acquire answers it like any request):
// resources as gate.ValidateSet accepts them, in any order, plain names or
// paths (gate.PathResource) alike. The request's Resources holds them
// sorted and its Resource is empty; a set of one resource is that
// resource's plain request. Errors match gate.ErrInvalidInput (an empty
// set, a name twice, a path with its own directory, more than
// gate.MaxSetMembers), and nothing is sent.
func (c *Client) BeginAcquireSet(resources []string) (*AcquireRequest, error) {
	members, err := gate.ValidateSet(resources)
	if err != nil {
		return nil, err
	}
	req, err := c.BeginAcquire(members[0])
	if err != nil || len(members) == 1 {
		return req, err
	}
	req.Resource, req.Resources = "", members
	return req, nil
}

// members returns what the request claims: Resources, or Resource alone.
func (r *AcquireRequest) members() []string {
	if len(r.Resources) > 0 {
		return r.Resources
	}
	return []string{r.Resource}
}

// name is the request's claim for messages and spans.
func (r *AcquireRequest) name() string {
	if len(r.Resources) > 0 {
		return "{" + strings.Join(r.Resources, ", ") + "}"
	}
	return r.Resource
}

// name is the renewal's claim for messages and spans.
func (r *RenewRequest) name() string {
	if len(r.Resources) > 0 {
		return "{" + strings.Join(r.Resources, ", ") + "}"
	}
	return r.Resource
}

// claimsSet reports whether a claim of members takes acquireSetTx's path:
// several members, or a path, whose rule the one-statement acquisitions do
// not know.
func claimsSet(members []string) bool {
	return len(members) > 1 || gate.IsPath(members[0])
}

// checkMembers validates a request's members: Resource alone, or Resources
// as BeginAcquireSet makes them (sorted, two or more, Resource empty).
func checkMembers(resource string, resources []string) ([]string, error) {
	if len(resources) == 0 {
		if err := gate.ValidateResource(resource); err != nil {
			return nil, err
		}
		return []string{resource}, nil
	}
	sorted, err := gate.ValidateSet(resources)
	switch {
	case err != nil:
		return nil, err
	case resource != "":
		return nil, invalid("request", "names both Resource %q and Resources", resource)
	case len(resources) < 2 || !slices.Equal(sorted, resources):
		return nil, invalid("request", "Resources must be sorted and at least two (BeginAcquireSet makes them so)")
	}
	return resources, nil
}

// errSetRetry makes InTx roll back a set's grant that lost the race to
// insert a member's lease row; the acquisition is tried again.
var errSetRetry = errors.New("fencegate: a member's row was created by a concurrent acquisition")

// setAnswer makes InTx roll back a set's grant half done, and carries the
// answer to give instead (Held, RequestExpired, FloorAhead).
type setAnswer struct{ res sqlstore.LeaseAcquireResult }

func (e *setAnswer) Error() string { return "the set's grant was rolled back" }

// acquireSet is Acquire for a set or a path: acquireSetTx in a transaction
// of its own, tried again when a member's row was created under it.
func (c *Coordinator) acquireSet(ctx context.Context, req *AcquireRequest, p sqlstore.LeaseAcquireParams, members []string) (res sqlstore.LeaseAcquireResult, err error) {
	for range acquireAttempts {
		err = c.store.InTx(ctx, func(ex sqlstore.Executor) error {
			req.restamp() // the transaction has begun: its statements go out now
			var err error
			res, err = acquireSetTx(ctx, ex, p, members)
			return err
		})
		if ans, ok := errors.AsType[*setAnswer](err); ok {
			return ans.res, nil // rolled back: nothing was written
		}
		if !errors.Is(err, errSetRetry) {
			return res, err
		}
	}
	return sqlstore.LeaseAcquireResult{}, errors.New("the lease rows kept changing under concurrent acquisitions")
}

// acquireSetTx grants members (sorted) in one transaction, all or none,
// under one fence. Locks are taken in one global order, so overlapping
// claims queue instead of deadlocking: first the path locks (each path
// member's exclusive, the directories above it shared; sorted), then the
// members' lease rows (sorted), then the fence, then their floors (sorted).
//
// The answer: Retried when every member is the live lease of this very
// request (a retry after a lost reply); RequestExpired when the request
// made a generation that is over (for any member); Held, with the blocking
// lease, when a member, a directory above a path member, or a lease below a
// directory member is live; FloorAhead when a member's floor is above the
// new fence; else Granted, every member's lease written and floor raised.
// Every answer but Granted and Retried writes nothing.
func acquireSetTx(ctx context.Context, ex sqlstore.Executor, p sqlstore.LeaseAcquireParams, members []string) (sqlstore.LeaseAcquireResult, error) {
	if err := ex.SetLockTimeout(ctx, p.LockTimeout); err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	// 1. Path locks.
	exclusive := map[string]bool{}
	for _, m := range members {
		if !gate.IsPath(m) {
			continue
		}
		exclusive[m] = true
		for _, a := range gate.Ancestors(m) {
			exclusive[a] = exclusive[a] || false // a member is never above another (ValidateSet)
		}
	}
	paths := make([]string, 0, len(exclusive))
	for r := range exclusive {
		paths = append(paths, r)
	}
	slices.Sort(paths)
	for _, r := range paths {
		if err := ex.PathLock(ctx, r, exclusive[r]); err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
	}

	// 2. The members' lease rows, each judged as Acquire judges one.
	rows := make([]sqlstore.LeaseRow, len(members))
	retried := 0
	for i, m := range members {
		row, err := ex.LeaseGetForUpdate(ctx, m)
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		rows[i] = row
		if row.Live() && row.Holder == p.Holder && row.RequestID == p.RequestID {
			retried++
			continue
		}
		if !row.Live() || row.RequestID != p.RequestID {
			fence, err := ex.RequestFence(ctx, m, p.RequestID)
			switch {
			case err != nil:
				return sqlstore.LeaseAcquireResult{}, err
			case fence != 0 && !row.Found:
				// This request's grant committed after the read found no
				// row (a concurrent copy of it): read everything again.
				return sqlstore.LeaseAcquireResult{}, errSetRetry
			case fence != 0:
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: fence}, nil
			}
		}
		if row.Live() {
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
		}
	}
	switch {
	case retried == len(members):
		return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRetried, Lease: earliest(rows)}, removeWaiter(ctx, ex, p.Waiter)
	case retried > 0:
		// Part of this request's grant is over (a member released on its
		// own): the claim is not whole, and is never granted again.
		return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: rows[slices.IndexFunc(rows, sqlstore.LeaseRow.Live)].Fence}, nil
	}

	// The path rule: no live claim above a path member, nor below a
	// directory member. The path locks make these reads current.
	for _, m := range members {
		if !gate.IsPath(m) {
			continue
		}
		for _, a := range gate.Ancestors(m) {
			row, err := ex.LeaseGet(ctx, a)
			if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
				return sqlstore.LeaseAcquireResult{}, err
			}
			if err == nil && row.Live() {
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
			}
		}
		if gate.IsDir(m) {
			row, err := ex.LeaseLiveBelow(ctx, m)
			if err != nil {
				return sqlstore.LeaseAcquireResult{}, err
			}
			if row.Found && row.Live() {
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
			}
		}
	}

	// 3. One fence for the whole set, every member's lease and floor.
	fence, err := ex.FenceNext(ctx)
	if err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	granted := make([]sqlstore.LeaseRow, len(members))
	for i, m := range members {
		row, inserted, err := ex.LeaseGrant(ctx, sqlstore.LeaseGrantParams{
			Resource: m, Holder: p.Holder, Fence: fence, RequestID: p.RequestID, TTL: p.TTL, Replace: rows[i].Found,
		})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !rows[i].Found && !inserted {
			return sqlstore.LeaseAcquireResult{}, errSetRetry
		}
		granted[i] = row
	}
	for _, m := range members {
		floor, err := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: m, Holder: p.Holder, Fence: fence})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !floor.Admitted {
			return sqlstore.LeaseAcquireResult{}, &setAnswer{sqlstore.LeaseAcquireResult{
				Status: sqlstore.AcquireFloorAhead, Fence: fence, Floor: floor.Floor, FloorHolder: floor.FloorHolder,
			}}
		}
	}
	return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireGranted, Lease: earliest(granted)}, removeWaiter(ctx, ex, p.Waiter)
}

// earliest is the row of a set whose term ends first (with the latest
// clock), which the set's grant reports: the set lasts as long as its
// shortest member.
func earliest(rows []sqlstore.LeaseRow) sqlstore.LeaseRow {
	e := rows[0]
	for _, r := range rows[1:] {
		if r.ExpiresAt.Before(e.ExpiresAt) {
			e.ExpiresAt = r.ExpiresAt
		}
		if r.Now.After(e.Now) {
			e.Now = r.Now
		}
	}
	return e
}

// renewSet is Renew for a set: every member renewed in one transaction, or
// none (the set's lease is over when any member's is).
func (c *Coordinator) renewSet(ctx context.Context, req *RenewRequest, p sqlstore.LeaseRenewParams) (row sqlstore.LeaseRow, err error) {
	err = c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		req.restamp()
		rows := make([]sqlstore.LeaseRow, len(req.Resources))
		for i, m := range req.Resources {
			p.Resource = m
			r, err := ex.LeaseRenew(ctx, p)
			if err != nil {
				return err
			}
			if !r.Found {
				return errSetOver
			}
			rows[i] = r
		}
		row = earliest(rows)
		return nil
	})
	if errors.Is(err, errSetOver) {
		return sqlstore.LeaseRow{}, nil
	}
	return row, err
}

// errSetOver makes InTx roll back the renewal of a set one of whose members
// is no longer live.
var errSetOver = errors.New("fencegate: a member of the set is no longer live")

// releaseSet is Release for a set token: every member's live lease
// released in one transaction. It reports whether every member was.
func (c *Coordinator) releaseSet(ctx context.Context, token gate.Token) (bool, error) {
	all := true
	err := c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		for _, m := range token.Members() {
			ok, err := ex.LeaseRelease(ctx, m, token.Holder, token.Fence)
			if err != nil {
				return err
			}
			all = all && ok
		}
		return nil
	})
	if err != nil {
		return false, c.wrap("release", token.Name(), err)
	}
	return all, nil
}

// AcquireWaitSet is AcquireWait for a claim of several resources at once
// (BeginAcquireSet's rules): it waits its turn in the queue of the first
// member (sorted), and is granted every member in one grant. A release of
// another member, or of a claim above or below a path member, does not
// wake it: it looks again when its place is touched (every third of
// CoordinatorOptions.WaiterTTL), or at the blocking lease's expiry.
func (c *Coordinator) AcquireWaitSet(ctx context.Context, client *Client, resources []string) (*Lease, error) {
	members, err := gate.ValidateSet(resources)
	if err != nil {
		return nil, err
	}
	return c.acquireWait(ctx, client, members)
}

// HoldSet is Hold for a claim of several resources at once
// (BeginAcquireSet's rules, AcquireWaitSet's with the Wait option).
func HoldSet(ctx context.Context, c *Client, coord *Coordinator, resources []string, fn func(ctx context.Context, l *Lease) error, opts ...HoldOption) error {
	members, err := gate.ValidateSet(resources)
	if err != nil {
		return err
	}
	return hold(ctx, c, coord, members, fn, opts)
}

// grantToken is the token of the grant g answering req: a set's, or one
// resource's.
func grantToken(req *AcquireRequest, g Grant) gate.Token {
	if len(req.Resources) > 0 {
		if t, err := gate.NewSetToken(req.Resources, g.Holder, g.Fence); err == nil {
			return t
		}
	}
	return gate.Token{Resource: g.Resource, Holder: g.Holder, Fence: g.Fence}
}
