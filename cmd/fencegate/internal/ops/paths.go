package ops

import (
	"cmp"
	"context"
	"database/sql"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
)

// PathPrefix starts a path resource's name ("path:src/a.go").
const PathPrefix = fence.PathPrefix

// PathResource is the resource of the path identity name (already checked
// by pathid, whose rules are stricter than the gate's).
func PathResource(name string) string { return PathPrefix + name }

// PathOf is the path identity of a path resource.
func PathOf(resource string) (string, bool) { return fence.PathOf(resource) }

// DisplayResource names a resource for messages: a path as the agent
// wrote it (src/a.go), a lock by its name.
func DisplayResource(resource string) string {
	if p, ok := PathOf(resource); ok {
		return p
	}
	return resource
}

// TokenMembers is every resource the token claims.
func TokenMembers(t fence.Token) []string { return t.Members() }

// TokenName is what the token claims, for messages.
func TokenName(t fence.Token) string { return t.Name() }

// TokenPaths is the path identities the token claims; none for a claim of
// a plain resource.
func TokenPaths(t fence.Token) []string {
	var out []string
	for _, m := range TokenMembers(t) {
		if p, ok := PathOf(m); ok {
			out = append(out, p)
		}
	}
	return out
}

// SetToken is the token of a claim of resources for holder under fence.
func SetToken(resources []string, holder string, n int64) (fence.Token, error) {
	return fence.NewSetToken(resources, holder, n)
}

// ClaimSet acquires resources (one, or several all or none under one
// fence) for client's holder, waiting its turn while they are held until
// wait has passed (Coordinator.AcquireWaitSet). A held claim is a
// *lease.HeldError naming the claim that blocks it; with wait 0, so is
// none of a busy one (lease.ErrBusy).
func ClaimSet(ctx context.Context, b *Backend, client *lease.Client, resources []string, wait time.Duration) (*lease.Lease, error) {
	if wait > 0 {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return b.Coord.AcquireWaitSet(ctx, client, resources)
	}
	req, err := client.BeginAcquireSet(resources)
	if err != nil {
		return nil, err
	}
	out, err := b.Coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, &lease.HeldError{Resource: cmp.Or(out.HeldResource, resources[0]), HeldBy: out.HeldBy, Fence: out.Fence, RetryAfter: out.RetryAfter, AlreadyHeld: out.AlreadyHeld}
	}
	return client.CompleteAcquire(req, out.Grant)
}

// HoldSet is lease.Hold for a set of resources.
func HoldSet(ctx context.Context, client *lease.Client, b *Backend, resources []string, fn func(context.Context, *lease.Lease) error, opts ...lease.HoldOption) error {
	return lease.HoldSet(ctx, client, b.Coord, resources, fn, opts...)
}

// CommitFile is the gate's check of a write to the file resource file in
// tx (Gate.CommitFile): refused if the token does not cover it, or if a
// claim of the file or a directory above it, or a write to it, under a
// higher fence got there first; the file's floor is held until tx ends.
func CommitFile(ctx context.Context, b *Backend, tx *sql.Tx, token fence.Token, file string) error {
	return b.Gate.CommitFile(ctx, tx, token, file)
}
