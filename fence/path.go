package fence

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PathPrefix starts the name of every path resource: "path:src/a.go" is the
// file src/a.go, "path:src/" the directory src and everything below it.
// Resource names without it are plain names, compared only for equality,
// whatever slashes they hold ("orders/42" contains nothing).
const PathPrefix = "path:"

// MaxSetMembers is the most resources one claim (a set token, a set
// acquisition) may name. It bounds the statements a grant or a Commit runs
// and the length of a token's text form.
const MaxSetMembers = 64

// PathResource returns the resource name of the path rel, relative to a root
// the caller chose (fencegate never touches the file system): a file, or,
// with a trailing "/", a directory covering everything below it. rel must be
// clean: not empty, not absolute, no empty, "." or ".." component, no
// backslash, valid UTF-8 without control characters (NUL included), and
// short enough that the name fits MaxNameLen. Errors match ErrInvalidInput.
//
// Two path resources conflict when one equals or contains the other
// (Overlaps); the write rule is in package gate's doc, under Paths.
func PathResource(rel string) (string, error) {
	if err := validatePath(rel); err != nil {
		return "", err
	}
	return PathPrefix + rel, nil
}

// IsPath reports whether resource names a path (it starts with PathPrefix).
// It does not validate the path; ValidateResource does.
func IsPath(resource string) bool { return strings.HasPrefix(resource, PathPrefix) }

// IsDir reports whether resource names a directory: a path ending in "/".
func IsDir(resource string) bool { return IsPath(resource) && strings.HasSuffix(resource, "/") }

// PathOf returns the relative path of a path resource ("src/a.go" for
// "path:src/a.go"), and false for a plain resource.
func PathOf(resource string) (string, bool) {
	return strings.CutPrefix(resource, PathPrefix)
}

// Ancestors returns the directory resources above a path resource, the
// outermost first, which is also their sorted order: "path:a/", "path:a/b/"
// for "path:a/b/c" (and for "path:a/b/c/"). A plain resource, or a path at
// the top of the root, has none.
func Ancestors(resource string) []string {
	rel, ok := PathOf(resource)
	if !ok {
		return nil
	}
	rel = strings.TrimSuffix(rel, "/")
	var out []string
	for i := range len(rel) {
		if rel[i] == '/' {
			out = append(out, PathPrefix+rel[:i+1])
		}
	}
	return out
}

// Overlaps reports whether claims of a and b conflict: the same name, or
// two paths one of which is a directory containing the other. Siblings
// ("path:src/a.go", "path:src/b.go") do not overlap, and a plain name
// overlaps only itself.
func Overlaps(a, b string) bool {
	return a == b || contains(a, b) || contains(b, a)
}

// contains reports whether directory resource d contains resource x
// strictly below it.
func contains(d, x string) bool {
	return IsDir(d) && len(x) > len(d) && strings.HasPrefix(x, d)
}

// covers reports whether a claim of m covers writes to the file resource f:
// m is f, or a directory above it.
func covers(m, f string) bool { return m == f || contains(m, f) }

// validatePath checks a relative path as PathResource describes.
func validatePath(rel string) error {
	switch {
	case rel == "":
		return invalidf("path", "must not be empty")
	case len(PathPrefix)+len(rel) > MaxNameLen:
		return invalidf("path", "%d bytes is longer than the limit of %d", len(rel), MaxNameLen-len(PathPrefix))
	case !utf8.ValidString(rel):
		return invalidf("path", "%q is not valid UTF-8", rel)
	case strings.HasPrefix(rel, "/"):
		return invalidf("path", "%q is absolute; paths are relative to the root", rel)
	case strings.Contains(rel, `\`):
		return invalidf("path", "%q contains a backslash; separate components with /", rel)
	}
	for _, r := range rel {
		if unicode.IsControl(r) {
			return invalidf("path", "%q contains the control character %U", rel, r)
		}
	}
	for part := range strings.SplitSeq(strings.TrimSuffix(rel, "/"), "/") {
		switch part {
		case "":
			return invalidf("path", "%q has an empty component (// or a lone /)", rel)
		case ".", "..":
			return invalidf("path", "%q has a %q component; give the clean path", rel, part)
		}
	}
	return nil
}

// ValidateSet checks the members of one claim: 1 to MaxSetMembers valid
// resource names, no name twice, and no two that overlap (a path and a
// directory above it: claim the directory alone). It returns them sorted,
// in a new slice: the order every grant and Commit locks them in. Errors
// match ErrInvalidInput.
func ValidateSet(resources []string) ([]string, error) {
	switch {
	case len(resources) == 0:
		return nil, invalidf("resources", "must name at least one resource")
	case len(resources) > MaxSetMembers:
		return nil, invalidf("resources", "%d is more than the limit of %d", len(resources), MaxSetMembers)
	}
	for _, r := range resources {
		if err := ValidateResource(r); err != nil {
			return nil, err
		}
	}
	sorted := slices.Clone(resources)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		// Sorted, everything a directory contains follows it at once.
		if prev, r := sorted[i-1], sorted[i]; prev == r {
			return nil, invalidf("resources", "%q is named twice", r)
		} else if contains(prev, r) {
			return nil, invalidf("resources", "%q is inside %q, which the same claim names: claim the directory alone", r, prev)
		}
	}
	return sorted, nil
}
