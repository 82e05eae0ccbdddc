package pathid

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a root with the given files (a trailing "/" makes a
// directory) and opens it.
func tree(t *testing.T, files ...string) (*Root, string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if strings.HasSuffix(f, "/") {
			must(t, os.MkdirAll(p, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(f), 0o644))
	}
	r, err := Open(dir)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// refused asserts err is a refusal whose message has every want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want a refusal", what)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%s: %v is not ErrInvalid", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

func TestResolveNames(t *testing.T) {
	r, _ := tree(t, "notes.txt", "src/a.go", "src/b.go", "docs/")
	for _, c := range []struct{ in, name, disk string }{
		{"notes.txt", "notes.txt", "notes.txt"},
		{"./notes.txt", "notes.txt", "notes.txt"},
		{"src//a.go", "src/a.go", "src/a.go"},
		{"src/./a.go", "src/a.go", "src/a.go"},
		{"src/", "src/", "src"},
		{"docs/", "docs/", "docs"},
		{"new/dir/", "new/dir/", "new/dir"},
		{"new/file.txt", "new/file.txt", "new/file.txt"},
	} {
		p, err := r.Resolve(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if p.Name != c.name || p.Disk != c.disk || p.Dir != strings.HasSuffix(c.name, "/") {
			t.Errorf("%q resolved to %+v, want name %q disk %q", c.in, p, c.name, c.disk)
		}
	}
}

func TestResolveRefusesBadSyntax(t *testing.T) {
	r, _ := tree(t, "src/a.go")
	for _, c := range []struct {
		in   string
		want string
	}{
		{"", "empty path"},
		{"/etc/passwd", "absolute"},
		{"../x", `".."`},
		{"src/../../x", `".."`},
		{"src/..", `".."`},
		{"a\x00b", "NUL"},
		{"a\xffb", "UTF-8"},
		{"a\nb", "control character"},
		{`src\a.go`, "backslash"},
		{".", "root itself"},
		{"./", "root itself"},
		{strings.Repeat("a", MaxPathLen+1), "more than"},
		{"src", `"src/"`},                 // a directory named without its "/"
		{"src/a.go/", "is a file"},        // a file named as a directory
		{"src/a.go/b", "not a directory"}, // through a file
	} {
		_, err := r.Resolve(c.in)
		refused(t, fmt.Sprintf("%q", c.in), err, c.want)
	}
}

func TestResolveAllRefusesBadLists(t *testing.T) {
	r, _ := tree(t, "src/a.go", "src/b.go")
	many := make([]string, MaxPaths+1)
	for i := range many {
		many[i] = fmt.Sprintf("f%d", i)
	}
	for _, c := range []struct {
		name string
		in   []string
		want []string
	}{
		{"empty", nil, []string{"no paths"}},
		{"empty slice", []string{}, []string{"no paths"}},
		{"too many", many, []string{"65 paths", "64"}},
		{"duplicate", []string{"src/a.go", "src/a.go"}, []string{"named twice"}},
		{"duplicate cleaned", []string{"src/a.go", "./src//a.go"}, []string{"same file", "src/a.go"}},
		{"dir and its file", []string{"src/", "src/a.go"}, []string{`"src/a.go" is inside the directory "src/"`}},
		{"file and its dir", []string{"src/a.go", "src/"}, []string{`"src/a.go" is inside the directory "src/"`}},
		{"dir and its subdir", []string{"src/", "src/x/"}, []string{"inside the directory"}},
		{"one bad", []string{"src/a.go", "../x"}, []string{`".."`}},
	} {
		_, err := r.ResolveAll(c.in)
		refused(t, c.name, err, c.want...)
	}
	// At the limit it is fine.
	if _, err := r.ResolveAll(many[:MaxPaths]); err != nil {
		t.Errorf("%d paths: %v", MaxPaths, err)
	}
}

func TestResolveAllSortsAndKeepsSiblings(t *testing.T) {
	r, _ := tree(t, "src/a.go", "src/b.go")
	ps, err := r.ResolveAll([]string{"src/b.go", "src-x/", "src/a.go"})
	must(t, err)
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "src-x/ src/a.go src/b.go" {
		t.Errorf("got %s", got)
	}
}

func TestCoversAndOverlaps(t *testing.T) {
	dir := Path{Name: "src/", Dir: true}
	a, b := Path{Name: "src/a.go"}, Path{Name: "src/b.go"}
	deep := Path{Name: "src/x/y.go"}
	prefix := Path{Name: "src-x/a.go"} // a name prefix, not a directory prefix
	sub := Path{Name: "src/x/", Dir: true}
	for _, c := range []struct {
		p, q     Path
		overlaps bool
	}{
		{dir, a, true}, {a, dir, true}, {dir, deep, true}, {dir, sub, true},
		{a, a, true}, {a, b, false}, {dir, prefix, false},
		{Path{Name: "src"}, Path{Name: "src/a.go"}, false}, // a file covers no path below
		{sub, a, false},
	} {
		if got := Overlaps(c.p, c.q); got != c.overlaps {
			t.Errorf("Overlaps(%s, %s) = %v", c.p.Name, c.q.Name, got)
		}
	}
	if _, ok := Covering([]Path{a, sub}, b); ok {
		t.Error("a claim of src/a.go and src/x/ covers src/b.go")
	}
	if c, ok := Covering([]Path{a, sub}, deep); !ok || c.Name != "src/x/" {
		t.Errorf("src/x/y.go covered by %v %v", c, ok)
	}
}

func TestFoldedRoot(t *testing.T) {
	r, _ := tree(t, "Src/A.go", "src/a.go") // two files on this (case-sensitive) disk
	r.fold = true                           // as on a case-insensitive one
	p, err := r.Resolve("Src/A.go")
	must(t, err)
	if p.Name != "src/a.go" || p.Disk != "Src/A.go" {
		t.Errorf("got %+v", p)
	}
	_, err = r.ResolveAll([]string{"SRC/a.GO", "src/a.go"})
	refused(t, "two cases", err, "same file")
	_, err = r.ResolveAll([]string{"Src/", "src/a.go"})
	refused(t, "dir in another case", err, "inside the directory")
	_, err = r.Resolve("café.txt")
	refused(t, "non-ASCII", err, "not ASCII", "ignores case")

	r.fold = false
	ps, err := r.ResolveAll([]string{"Src/A.go", "src/a.go"})
	must(t, err)
	if len(ps) != 2 {
		t.Errorf("case-sensitive: %v", ps)
	}
	if _, err := r.Resolve("café.txt"); err != nil {
		t.Errorf("case-sensitive, non-ASCII: %v", err)
	}
}

func TestProbeFindsThisDiskCaseSensitive(t *testing.T) {
	r, dir := tree(t)
	// The probe's own file is gone.
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 0 {
		t.Errorf("probe left %v", ents)
	}
	// Judge the probe against the file system itself.
	must(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o644))
	_, err = os.Stat(filepath.Join(dir, "X"))
	if want := err == nil; r.FoldsCase() != want {
		t.Errorf("FoldsCase() = %v, but X found for x: %v", r.FoldsCase(), want)
	}
}

func TestCheckWritable(t *testing.T) {
	r, _ := tree(t, "a.txt", "d/")
	for _, in := range []string{"a.txt", "new.txt"} {
		p, err := r.Resolve(in)
		must(t, err)
		if err := r.CheckWritable(p); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	p, err := r.Resolve("d/")
	must(t, err)
	refused(t, "directory", r.CheckWritable(p), "is a directory")
}

func TestTarget(t *testing.T) {
	r, _ := tree(t, "src/a.go", "src/b.go", "notes.txt")
	claim, err := r.ResolveAll([]string{"src/a.go", "docs/"})
	must(t, err)
	for _, in := range []string{"src/a.go", "./src/a.go", "docs/new.md", "docs/deep/x.md"} {
		if _, err := r.Target(claim, in); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	_, err = r.Target(claim, "src/b.go")
	refused(t, "sibling", err, `"src/b.go" is not covered`, "covers only docs/, src/a.go")
	_, err = r.Target(claim, "notes.txt")
	refused(t, "elsewhere", err, "not covered")
	_, err = r.Target(claim, "docs/")
	refused(t, "a directory", err, "names a directory")
	_, err = r.Target(nil, "notes.txt")
	refused(t, "no paths", err, "claims no paths")
	_, err = r.Target(claim, "../notes.txt")
	refused(t, "..", err, `".."`)
}

func TestLongPaths(t *testing.T) {
	r, _ := tree(t)
	long := strings.Repeat("a", MaxPathLen)
	if _, err := r.Resolve(long); err != nil {
		t.Errorf("%d bytes: %v", len(long), err)
	}
	_, err := r.Resolve(long + "/") // the directory's "/" makes it one too many
	refused(t, "long directory", err, "more than 251")
}

func TestClaimOf(t *testing.T) {
	r, _ := tree(t, "src/a.go")
	claim, err := r.ResolveAll([]string{"src/", "go.mod"})
	must(t, err)
	back := ClaimOf(claim.Names())
	for i := range claim {
		if back[i].Name != claim[i].Name || back[i].Dir != claim[i].Dir {
			t.Errorf("%+v came back as %+v", claim[i], back[i])
		}
	}
	if _, err := r.Target(back, "src/a.go"); err != nil {
		t.Error(err)
	}
}
