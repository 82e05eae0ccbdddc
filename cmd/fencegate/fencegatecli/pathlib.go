package fencegatecli

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/pathid"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// The library's half of path claims, in the few calls the command makes:
// path resources, claims of several resources under one fence, and the
// gate's check of a file write. The command's half (internal/pathid) gives
// each path its one identity first.

// pathPrefix starts a path resource's name ("path:src/a.go").
const pathPrefix = gate.PathPrefix

// pathResource is the resource of the path identity name (already checked
// by pathid, whose rules are stricter than the gate's).
func pathResource(name string) string { return pathPrefix + name }

// pathOf is the path identity of a path resource.
func pathOf(resource string) (string, bool) { return gate.PathOf(resource) }

// displayResource names a resource for messages: a path as the agent
// wrote it (src/a.go), a lock by its name.
func displayResource(resource string) string {
	if p, ok := pathOf(resource); ok {
		return p
	}
	return resource
}

// tokenMembers is every resource the token claims.
func tokenMembers(t gate.Token) []string { return t.Members() }

// tokenName is what the token claims, for messages.
func tokenName(t gate.Token) string { return t.Name() }

// tokenPaths is the path identities the token claims; none for a claim of
// a plain resource.
func tokenPaths(t gate.Token) []string {
	var out []string
	for _, m := range tokenMembers(t) {
		if p, ok := pathOf(m); ok {
			out = append(out, p)
		}
	}
	return out
}

// setToken is the token of a claim of resources for holder under fence.
func setToken(resources []string, holder string, fence int64) (gate.Token, error) {
	return gate.NewSetToken(resources, holder, fence)
}

// claimSet acquires resources (one, or several all or none under one
// fence) for client's holder, waiting its turn while they are held until
// wait has passed (Coordinator.AcquireWaitSet). A held claim is a
// *lease.HeldError naming the claim that blocks it; with wait 0, so is
// none of a busy one (lease.ErrBusy).
func claimSet(ctx context.Context, b *backend, client *lease.Client, resources []string, wait time.Duration) (*lease.Lease, error) {
	if wait > 0 {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return b.coord.AcquireWaitSet(ctx, client, resources)
	}
	req, err := client.BeginAcquireSet(resources)
	if err != nil {
		return nil, err
	}
	out, err := b.coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, &lease.HeldError{Resource: cmp.Or(out.HeldResource, resources[0]), HeldBy: out.HeldBy, Fence: out.Fence, RetryAfter: out.RetryAfter, AlreadyHeld: out.AlreadyHeld}
	}
	return client.CompleteAcquire(req, out.Grant)
}

// holdSet is lease.Hold for a set of resources.
func holdSet(ctx context.Context, client *lease.Client, b *backend, resources []string, fn func(context.Context, *lease.Lease) error, opts ...lease.HoldOption) error {
	return lease.HoldSet(ctx, client, b.coord, resources, fn, opts...)
}

// commitFile is the gate's check of a write to the file resource file in
// tx (Gate.CommitFile): refused if the token does not cover it, or if a
// claim of the file or a directory above it, or a write to it, under a
// higher fence got there first; the file's floor is held until tx ends.
func commitFile(ctx context.Context, b *backend, tx *sql.Tx, token gate.Token, file string) error {
	return b.gate.CommitFile(ctx, tx, token, file)
}

// pathFlags are the --path and --root flags of claim and run.
type pathFlags struct {
	paths []string
	root  *string
}

// addPathFlags adds --path (repeatable) and --root to fs.
func addPathFlags(fs *flag.FlagSet) *pathFlags {
	p := &pathFlags{}
	fs.Func("path", "a `file` to claim instead of --lock, relative to --root; a trailing / claims a directory and all below it (repeatable: all or none, one fence)", func(v string) error {
		p.paths = append(p.paths, v)
		return nil
	})
	p.root = fs.String("root", ".", "the `directory` --path is relative to")
	return p
}

// resources checks --lock or --path and returns the resources to claim
// and their name for messages: the lock, or the paths' identities.
func (p *pathFlags) resources(lock string) ([]string, string, error) {
	switch {
	case lock != "" && len(p.paths) > 0:
		return nil, "", usagef("give --lock or --path, not both: a claim is of a lock name or of files")
	case len(p.paths) == 0:
		if lock == "" {
			return nil, "", usagef("missing --lock NAME or --path FILE")
		}
		if err := checkLock(lock); err != nil {
			return nil, "", err
		}
		if _, ok := pathOf(lock); ok {
			return nil, "", usagef("--lock %q: names starting %q are path claims: use --path", lock, pathPrefix)
		}
		return []string{lock}, lock, nil
	}
	ids, err := pathid.Open(*p.root)
	if err != nil {
		return nil, "", usagef("--root: %v", err)
	}
	defer ids.Close()
	claim, err := ids.ResolveAll(p.paths)
	if err != nil {
		return nil, "", usagef("--path: %v", err)
	}
	var out []string
	for _, c := range claim {
		out = append(out, pathResource(c.Name))
	}
	return out, claim.String(), nil
}
