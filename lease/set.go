package lease

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// BeginAcquireSet starts an acquisition of several resources at once, in one
// grant under one fence (Coordinator.Acquire answers it like any request):
// resources as fence.ValidateSet accepts them, in any order, plain names or
// paths (fence.PathResource) alike. The request's Resources holds them
// sorted and its Resource is empty; a set of one resource is that
// resource's plain request. Errors match fence.ErrInvalidInput (an empty
// set, a name twice, a path with its own directory, more than
// fence.MaxSetMembers), and nothing is sent.
func (c *Client) BeginAcquireSet(resources []string) (*AcquireRequest, error) {
	members, err := fence.ValidateSet(resources)
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
	return len(members) > 1 || fence.IsPath(members[0])
}

// checkMembers validates a request's members: Resource alone, or Resources
// as BeginAcquireSet makes them (sorted, two or more, Resource empty).
func checkMembers(resource string, resources []string) ([]string, error) {
	if len(resources) == 0 {
		if err := fence.ValidateResource(resource); err != nil {
			return nil, err
		}
		return []string{resource}, nil
	}
	sorted, err := fence.ValidateSet(resources)
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

// renewSet is Renew for a set: every member renewed in one transaction, or
// none (the set's lease is over when any member's is).
func (c *Coordinator) renewSet(ctx context.Context, req *RenewRequest, p sqlstore.LeaseRenewParams) (row sqlstore.LeaseRow, err error) {
	err = c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		req.restamp()
		rows := make([]sqlstore.LeaseRow, len(req.Resources))
		for i, m := range req.Resources {
			p.Resource = m
			r, err := ex.LeaseRenew(ctx, &p)
			if err != nil {
				return err
			}
			if !r.Found {
				return errSetOver
			}
			rows[i] = r
		}
		row = soonest(rows)
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
func (c *Coordinator) releaseSet(ctx context.Context, token fence.Token) (bool, error) {
	all := true
	err := c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		for _, m := range token.Members() {
			res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: m, Holder: token.Holder, Fence: token.Fence})
			if err != nil {
				return err
			}
			all = all && res.Released
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
	members, err := fence.ValidateSet(resources)
	if err != nil {
		return nil, err
	}
	return c.acquireWait(ctx, client, members)
}

// HoldSet is Hold for a claim of several resources at once
// (BeginAcquireSet's rules, AcquireWaitSet's with the Wait option).
func HoldSet(ctx context.Context, c *Client, coord *Coordinator, resources []string, fn func(ctx context.Context, l *Lease) error, opts ...HoldOption) error {
	members, err := fence.ValidateSet(resources)
	if err != nil {
		return err
	}
	return hold(ctx, c, coord, members, fn, opts)
}

// soonest is the row of a set's members whose term ends first, with the
// latest clock: the set lasts as long as its shortest member.
func soonest(rows []sqlstore.LeaseRow) sqlstore.LeaseRow {
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
