// Package pathid gives the files and directories under a root one identity
// each, the name a path claim is made and checked under, and refuses,
// before anything is claimed or written, every path it cannot give one
// identity.
//
// A file that had two names would have two claims that do not conflict,
// and two agents could write it under them and clobber each other with no
// refusal. So an identity is:
//
//   - relative to the root, cleaned, slash-separated; a directory's ends in
//     "/" and covers everything below it. "..", absolute paths, NUL bytes
//     and other control characters, invalid UTF-8 and backslashes are
//     refused, never interpreted.
//   - free of symbolic links: a link inside the root is replaced by its
//     target (resolved component by component, at most MaxLinks links), so
//     the link and its target are one identity; a link leading out of the
//     root is refused.
//   - case-folded on a case-insensitive root (probed when the root is
//     opened; macOS and Windows defaults otherwise), where a name that
//     folding cannot prove distinct (anything not ASCII) is refused.
//
// Hard links cannot be resolved to one name: a file with more than one link
// is refused for writing (CheckWritable), since replacing it by a rename
// would leave its other names with the old content.
//
// The identities are checked against the file system at the time of the
// call; a tree changed underneath (a directory swapped for a link) between
// the claim and a write can still give a path a new identity. The write
// re-resolves the path and refuses if it changed.
package pathid

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// MaxPaths is the most paths one claim may name.
const MaxPaths = 64

// MaxPathLen bounds one path, in bytes, as given and as resolved (its
// identity, with a directory's "/"): what fits a resource name after
// fence.PathPrefix.
const MaxPathLen = fence.MaxNameLen - len(fence.PathPrefix)

// MaxLinks bounds the symbolic links followed while resolving one path.
const MaxLinks = 40

// ErrInvalid is the error every refusal of a path wraps, for errors.Is.
var ErrInvalid = errors.New("invalid path")

// invalid is a refusal: what was wrong, for the agent to fix.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Path is one resolved identity.
type Path struct {
	// Name is the identity: relative to the root, slash-separated, without
	// symbolic links, case-folded on a case-insensitive root; a directory's
	// ends in "/".
	Name string
	// Disk is the same path as the file system spells it, for opening it
	// through the root (not folded; no trailing "/").
	Disk string
	// Dir is true for a directory.
	Dir bool
	// Exists says whether the path was there when resolved.
	Exists bool
}

// Covers reports whether p covers q: the same identity, or p is a
// directory above q.
func (p Path) Covers(q Path) bool {
	return p.Name == q.Name || (p.Dir && strings.HasPrefix(q.Name, p.Name))
}

// Overlaps reports whether two claims of p and q conflict: one covers the
// other. Siblings do not overlap.
func Overlaps(p, q Path) bool { return p.Covers(q) || q.Covers(p) }

// Root resolves paths under one directory. Its methods are safe for
// concurrent use; the zero value is not usable (use Open).
type Root struct {
	root *os.Root
	real string // the root's absolute path, with its own links resolved
	fold bool   // the root is case-insensitive
}

// Open opens dir for resolving paths, and probes whether its file system
// folds case.
func Open(dir string) (*Root, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", dir, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", dir, err)
	}
	return &Root{root: root, real: real, fold: foldsCase(root)}, nil
}

// Close closes the root.
func (r *Root) Close() error { return r.root.Close() }

// OS is the os.Root the identities were resolved in, for the file
// operations on them (Path.Disk), so both see one directory.
func (r *Root) OS() *os.Root { return r.root }

// FoldsCase reports whether the root was found case-insensitive, so
// identities are folded.
func (r *Root) FoldsCase() bool { return r.fold }

// Real is the root's absolute path with its links resolved.
func (r *Root) Real() string { return r.real }

// foldsCase probes the root: a new file, looked up by its name in upper
// case. Where the root cannot be written, the platform's default decides,
// erring towards folding.
func foldsCase(root *os.Root) bool {
	name := ".fencegate-case-" + strings.ToLower(rand.Text()[:10])
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return defaultFolds()
	}
	fi, ferr := f.Stat()
	_ = f.Close()
	defer root.Remove(name)
	if ferr != nil {
		return defaultFolds()
	}
	up, err := root.Lstat(strings.ToUpper(name))
	if err != nil {
		return false // not found under the other case: case-sensitive
	}
	return os.SameFile(fi, up)
}

func defaultFolds() bool {
	switch runtime.GOOS {
	case "darwin", "ios", "windows":
		return true
	}
	return false
}

// checkSyntax refuses what is refused before the file system is asked.
func checkSyntax(p string) error {
	switch {
	case p == "":
		return invalid("empty path: give a path relative to the root, such as docs/notes.md, or src/ for a directory")
	case len(p) > MaxPathLen:
		return invalid("path is %d bytes long, more than %d", len(p), MaxPathLen)
	case !utf8.ValidString(p):
		return invalid("path %q is not valid UTF-8", p)
	case strings.ContainsRune(p, 0):
		return invalid("path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return invalid("path %q is absolute: give a path relative to the root", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return invalid("path %q contains a control character", p)
	case strings.ContainsRune(p, '\\'):
		return invalid(`path %q contains a backslash: separate directories with "/"`, p)
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			return invalid(`path %q contains "..": give a path inside the root without it`, p)
		}
		if err := checkPlatformName(p, part); err != nil {
			return err
		}
	}
	return nil
}

// checkPlatformName refuses a name component the platform would give a
// second name to. On Windows: alternate data streams (a:b), names the file
// system trims (trailing dots and spaces) and short 8.3 names (PROGRA~1).
func checkPlatformName(p, part string) error {
	if runtime.GOOS != "windows" || part == "" || part == "." {
		return nil
	}
	if strings.ContainsRune(part, ':') {
		return invalid("path %q names a data stream (\":\"): refused", p)
	}
	if strings.HasSuffix(part, ".") || strings.HasSuffix(part, " ") {
		return invalid("path %q has a name ending in a dot or space, which Windows trims: refused", p)
	}
	if i := strings.IndexByte(part, '~'); i >= 0 && i+1 < len(part) && part[i+1] >= '0' && part[i+1] <= '9' {
		return invalid("path %q may be a short (8.3) name, a second name of another file: use the long name", p)
	}
	return nil
}

// Resolve gives the identity of one path. A trailing "/" names a
// directory; an existing directory named without it, or an existing file
// named with it, is refused so the claim says what the agent meant.
func (r *Root) Resolve(p string) (Path, error) {
	if err := checkSyntax(p); err != nil {
		return Path{}, err
	}
	wantDir := strings.HasSuffix(p, "/")
	clean := path.Clean(p)
	if clean == "." {
		return Path{}, invalid("path %q names the root itself: name a file or a directory below it", p)
	}
	disk, fi, err := r.walk(p, clean)
	if err != nil {
		return Path{}, err
	}
	out := Path{Disk: disk, Dir: wantDir, Exists: fi != nil}
	if fi != nil {
		switch m := fi.Mode(); {
		case m.IsDir() && !wantDir:
			return Path{}, invalid("path %q is a directory: name it %q to claim everything below it", p, clean+"/")
		case m.IsRegular() && wantDir:
			return Path{}, invalid("path %q ends in \"/\" but %q is a file", p, disk)
		case !m.IsDir() && !m.IsRegular():
			return Path{}, invalid("path %q is a special file (%s): only files and directories are claimed", p, KindOf(m))
		}
	}
	name := disk
	if r.fold {
		for _, c := range name {
			if c >= utf8.RuneSelf {
				return Path{}, invalid("path %q is not ASCII, and this root's file system ignores case: fencegate cannot prove the name distinct from another, so it is refused", p)
			}
		}
		name = strings.ToLower(name)
	}
	if wantDir {
		name += "/"
	}
	if len(name) > MaxPathLen {
		return Path{}, invalid("path %q resolves to %q, %d bytes, more than %d", p, name, len(name), MaxPathLen)
	}
	out.Name = name
	return out, nil
}

// walk resolves clean component by component through the root: every
// symbolic link replaced by its target, so the result names no link. fi
// is the last component's (nil if it does not exist).
func (r *Root) walk(p, clean string) (string, fs.FileInfo, error) {
	todo := strings.Split(clean, "/")
	var done []string // resolved, link-free components
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == "." || c == "" {
			continue
		}
		next := path.Join(append(done, c)...)
		fi, err := r.root.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			// Nothing below a missing directory can be a link: the rest
			// is new, named as given.
			return joinLen(p, append(append(done, c), todo...))
		}
		if err != nil {
			return "", nil, invalid("path %q: %s", p, RootError(err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			if links > MaxLinks {
				return "", nil, invalid("path %q goes through more than %d symbolic links", p, MaxLinks)
			}
			target, err := r.root.Readlink(next)
			if err != nil {
				return "", nil, invalid("path %q: link %q: %s", p, next, RootError(err))
			}
			rel, err := r.inside(target, done)
			if err != nil {
				return "", nil, invalid("path %q goes through the symbolic link %q to %q, which %v", p, next, target, err)
			}
			done = nil
			todo = append(splitNonEmpty(rel), todo...)
			continue
		}
		if len(todo) > 0 && !fi.IsDir() {
			return "", nil, invalid("path %q: %q is not a directory", p, next)
		}
		done = append(done, c)
		if len(todo) == 0 {
			s, _, err := joinLen(p, done)
			return s, fi, err
		}
	}
	// Only "." components: the links led back to the root itself.
	return "", nil, invalid("path %q resolves to the root itself: name a file or a directory below it", p)
}

// inside turns a link's target, read in the directory dir (link-free,
// relative to the root), into a path relative to the root; an error if it
// leads out of the root.
func (r *Root) inside(target string, dir []string) (string, error) {
	if target == "" {
		return "", errors.New("is empty")
	}
	var rel string
	if filepath.IsAbs(target) {
		rp, err := filepath.Rel(r.real, filepath.Clean(target))
		if err != nil || rp == ".." || strings.HasPrefix(rp, ".."+string(filepath.Separator)) {
			return "", errors.New("leads out of the root")
		}
		rel = filepath.ToSlash(rp)
	} else {
		// Lexical ".." is right here: dir has no links left in it.
		rel = path.Join(path.Join(dir...), filepath.ToSlash(target))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", errors.New("leads out of the root")
		}
	}
	if rel == "." {
		return "", nil
	}
	return rel, nil
}

func splitNonEmpty(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, "/") {
		if part != "" && part != "." {
			out = append(out, part)
		}
	}
	return out
}

func joinLen(p string, parts []string) (string, fs.FileInfo, error) {
	s := path.Join(parts...)
	if len(s) > MaxPathLen {
		return "", nil, invalid("path %q resolves to a path of %d bytes, more than %d", p, len(s), MaxPathLen)
	}
	if s == "" || s == "." {
		return "", nil, invalid("path %q resolves to the root itself: name a file or a directory below it", p)
	}
	return s, nil, nil
}

// ResolveAll gives the identities of one claim's paths, sorted by name. It
// refuses an empty list, more than MaxPaths, a path it cannot resolve, two
// paths with one identity, and a directory together with a path below it
// (the directory covers it already).
func (r *Root) ResolveAll(ps []string) (Claim, error) {
	switch {
	case len(ps) == 0:
		return nil, invalid("no paths: name at least one file, or a directory with a trailing \"/\"")
	case len(ps) > MaxPaths:
		return nil, invalid("%d paths, more than the %d one claim may name: claim a directory that holds them", len(ps), MaxPaths)
	}
	out := make(Claim, 0, len(ps))
	given := make(map[string]string, len(ps)) // identity -> the path as given
	for _, p := range ps {
		id, err := r.Resolve(p)
		if err != nil {
			return nil, err
		}
		if first, dup := given[id.Name]; dup {
			if first == p {
				return nil, invalid("path %q is named twice", p)
			}
			return nil, invalid("paths %q and %q name the same %s (%s)", first, p, kind(id), id.Name)
		}
		given[id.Name] = p
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b Path) int { return strings.Compare(a.Name, b.Name) })
	for i := range out {
		for j := range out {
			if i != j && out[j].Covers(out[i]) {
				return nil, invalid("path %q is inside the directory %q, which the same claim names: name one or the other", given[out[i].Name], given[out[j].Name])
			}
		}
	}
	return out, nil
}

func kind(p Path) string {
	if p.Dir {
		return "directory"
	}
	return "file"
}

// Covering returns the first of claim that covers p, and whether there is
// one.
func Covering(claim []Path, p Path) (Path, bool) {
	for _, c := range claim {
		if c.Covers(p) {
			return c, true
		}
	}
	return Path{}, false
}

// CheckWritable refuses to write over a file that has other names: an
// existing file with more than one hard link, or whose link count cannot
// be read. p must be a file resolved by this root.
func (r *Root) CheckWritable(p Path) error {
	if p.Dir {
		return invalid("path %q is a directory: name a file to write", p.Name)
	}
	fi, err := r.root.Lstat(p.Disk)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return invalid("path %q: %s", p.Name, RootError(err))
	}
	if !fi.Mode().IsRegular() {
		return invalid("path %q is no longer a regular file", p.Name)
	}
	n, err := linkCount(r.root, p.Disk, fi)
	if err != nil {
		return invalid("path %q: cannot tell whether it has other names (hard links): %v; refused", p.Name, err)
	}
	if n > 1 {
		return invalid("path %q has %d hard links: writing it would replace this name only and leave the other %d with the old content; refused", p.Name, n, n-1)
	}
	return nil
}

// RootError is an os.Root error without the op and path the message
// repeats.
func RootError(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// KindOf names a file mode that is neither a regular file nor a
// directory, for an error that refuses it ("a named pipe").
func KindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
