package fencegatecli

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"strings"
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
const pathPrefix = "path:"

// pathResource is the resource of the path identity name.
func pathResource(name string) string { return pathPrefix + name }

// pathOf is the path identity of a path resource.
func pathOf(resource string) (string, bool) { return strings.CutPrefix(resource, pathPrefix) }

// tokenMembers is every resource the token claims.
func tokenMembers(t gate.Token) []string { return []string{t.Resource} }

// tokenName is what the token claims, for messages.
func tokenName(t gate.Token) string { return t.Resource }

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

// setToken is the token of a claim of resources (sorted, as the claim
// gave them) for holder under fence.
func setToken(resources []string, holder string, fence int64) (gate.Token, error) {
	if len(resources) != 1 {
		return gate.Token{}, errSets
	}
	return gate.Token{Resource: resources[0], Holder: holder, Fence: fence}, nil
}

// errSets: claims of several paths need the library's sets.
var errSets = errors.New("claims of more than one path are not supported by this build")

// claimSet acquires resources, all or none under one fence, as claimLock
// acquires one.
func claimSet(ctx context.Context, b *backend, client *lease.Client, resources []string, wait time.Duration) (*lease.Lease, error) {
	if len(resources) != 1 {
		return nil, errSets
	}
	return claimLock(ctx, b, client, resources[0], wait)
}

// holdSet is lease.Hold for a set of resources.
func holdSet(ctx context.Context, client *lease.Client, b *backend, resources []string, fn func(context.Context, *lease.Lease) error, opts ...lease.HoldOption) error {
	if len(resources) != 1 {
		return errSets
	}
	return lease.Hold(ctx, client, b.coord, resources[0], fn, opts...)
}

// commitFile is the gate's check of a write to the file resource file in
// tx: refused if the token does not cover it or if a claim or a write of
// the file under a higher fence got there first.
func commitFile(ctx context.Context, b *backend, tx *sql.Tx, token gate.Token, file string) error {
	for _, m := range tokenMembers(token) {
		if m == file || (strings.HasSuffix(m, "/") && strings.HasPrefix(file, m)) {
			return b.gate.Commit(ctx, tx, token)
		}
	}
	_ = tx.Rollback()
	return fmt.Errorf("%s is not %s nor below it", file, tokenName(token))
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
