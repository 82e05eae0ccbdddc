package fencegatecli

import (
	"flag"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/pathid"
)

// The library's half of path claims, in the few calls the command makes:
// path resources, claims of several resources under one fence, and the
// gate's check of a file write. The command's half (internal/pathid) gives
// each path its one identity first.

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
		if _, ok := ops.PathOf(lock); ok {
			return nil, "", usagef("--lock %q: names starting %q are path claims: use --path", lock, ops.PathPrefix)
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
		out = append(out, ops.PathResource(c.Name))
	}
	return out, claim.String(), nil
}
