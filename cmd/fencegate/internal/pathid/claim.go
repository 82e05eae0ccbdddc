package pathid

import (
	"fmt"
	"strings"
)

// Claim is the paths one token covers, as ResolveAll gave them.
type Claim []Path

// String lists the claim's identities, for messages.
func (c Claim) String() string {
	names := make([]string, len(c))
	for i, p := range c {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// Names is the claim's identities.
func (c Claim) Names() []string {
	names := make([]string, len(c))
	for i, p := range c {
		names[i] = p.Name
	}
	return names
}

// Target resolves p for a write under c, before anything is written: the
// file's identity, refused if it is no file, if c does not cover it (the
// error names what c covers) or if it has other names (hard links).
func (r *Root) Target(c Claim, p string) (Path, error) {
	if strings.HasSuffix(p, "/") {
		return Path{}, invalid("path %q names a directory: write a file", p)
	}
	t, err := r.Resolve(p)
	if err != nil {
		return Path{}, err
	}
	if _, ok := Covering(c, t); !ok {
		if len(c) == 0 {
			return Path{}, invalid("this token claims no paths (a claim of a plain resource writes no files): claim %q with paths, and write with that token", t.Name)
		}
		return Path{}, invalid("path %q is not covered by this token, which covers only %s: claim it (or a directory above it) and write with that token", t.Name, c)
	}
	if err := r.CheckWritable(t); err != nil {
		return Path{}, err
	}
	return t, nil
}

// Recheck resolves p again, just before the change is made, and refuses if
// its identity is no longer t's (the tree changed underneath, a directory
// swapped for a link) or it gained another name.
func (r *Root) Recheck(t Path, p string) error {
	now, err := r.Resolve(p)
	if err != nil {
		return fmt.Errorf("path %q changed while it was written: %w", p, err)
	}
	if now.Name != t.Name || now.Disk != t.Disk {
		return invalid("path %q now resolves to %q, not %q: the tree changed underneath; nothing was written", p, now.Name, t.Name)
	}
	return r.CheckWritable(now)
}

// ClaimOf rebuilds a claim from the identities it was made of (Path.Name,
// as a token carries them): enough for Covering and Target, which compare
// names only.
func ClaimOf(names []string) Claim {
	c := make(Claim, len(names))
	for i, n := range names {
		c[i] = Path{Name: n, Disk: strings.TrimSuffix(n, "/"), Dir: strings.HasSuffix(n, "/")}
	}
	return c
}
