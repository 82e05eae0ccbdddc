//go:build unix

package pathid

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSymlinksInsideAreTheirTarget(t *testing.T) {
	r, dir := tree(t, "src/a.go", "lib/")
	must(t, os.Symlink("src/a.go", filepath.Join(dir, "alias.go")))              // relative, to a file
	must(t, os.Symlink("../src", filepath.Join(dir, "lib", "s")))                // relative, up and to a dir
	must(t, os.Symlink(filepath.Join(dir, "src"), filepath.Join(dir, "abssrc"))) // absolute, inside
	must(t, os.Symlink("alias.go", filepath.Join(dir, "alias2.go")))             // a chain
	for in, want := range map[string]string{
		"alias.go":       "src/a.go",
		"alias2.go":      "src/a.go",
		"lib/s/a.go":     "src/a.go",
		"abssrc/a.go":    "src/a.go",
		"lib/s/":         "src/",
		"abssrc/new.go":  "src/new.go",
		"lib/s/new/x.go": "src/new/x.go",
	} {
		p, err := r.Resolve(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if p.Name != want {
			t.Errorf("%s resolved to %s, want %s", in, p.Name, want)
		}
	}
	_, err := r.ResolveAll([]string{"alias.go", "src/a.go"})
	refused(t, "a link and its target", err, "same file", "src/a.go")
	_, err = r.ResolveAll([]string{"lib/s/", "src/a.go"})
	refused(t, "a linked dir and a file in its target", err, "inside the directory")
	_, err = r.Resolve("lib/s")
	refused(t, "a link to a dir named without /", err, `"lib/s/"`)
}

func TestSymlinksOutAreRefused(t *testing.T) {
	r, dir := tree(t, "src/a.go")
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	must(t, os.Symlink(outside, filepath.Join(dir, "out")))
	must(t, os.Symlink("../../x", filepath.Join(dir, "src", "up")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	must(t, os.Symlink("loop2", filepath.Join(dir, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(dir, "loop2")))
	must(t, os.Symlink(".", filepath.Join(dir, "self")))
	for in, want := range map[string]string{
		"out/secret":  "leads out of the root",
		"out/new.txt": "leads out of the root",
		"out/":        "leads out of the root",
		"src/up":      "leads out of the root",
		"passwd":      "leads out of the root",
		"loop1":       "more than 40 symbolic links",
		"self":        "root itself",
	} {
		_, err := r.Resolve(in)
		refused(t, in, err, want)
	}
}

func TestSpecialFilesRefused(t *testing.T) {
	r, dir := tree(t)
	must(t, mkfifo(filepath.Join(dir, "fifo")))
	_, err := r.Resolve("fifo")
	refused(t, "fifo", err, "special file", "a named pipe")
}

func TestHardLinksRefusedForWriting(t *testing.T) {
	r, dir := tree(t, "a.txt")
	must(t, os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")))
	for _, in := range []string{"a.txt", "b.txt"} {
		p, err := r.Resolve(in)
		must(t, err)
		refused(t, in, r.CheckWritable(p), "2 hard links", "other 1")
	}
	// Once the other name is gone, it is writable again.
	must(t, os.Remove(filepath.Join(dir, "b.txt")))
	p, err := r.Resolve("a.txt")
	must(t, err)
	must(t, r.CheckWritable(p))
}

func TestTargetThroughLinksAndRecheck(t *testing.T) {
	r, dir := tree(t, "src/a.go", "other/a.go")
	must(t, os.Symlink("src", filepath.Join(dir, "s")))
	claim, err := r.ResolveAll([]string{"src/a.go"})
	must(t, err)
	tg, err := r.Target(claim, "s/a.go") // the link's name is the target's identity
	must(t, err)
	if tg.Name != "src/a.go" {
		t.Errorf("got %+v", tg)
	}
	must(t, r.Recheck(tg, "s/a.go"))
	// The link now points elsewhere: the recheck refuses.
	must(t, os.Remove(filepath.Join(dir, "s")))
	must(t, os.Symlink("other", filepath.Join(dir, "s")))
	refused(t, "relinked", r.Recheck(tg, "s/a.go"), `now resolves to "other/a.go"`)
	// A second name appeared: refused too.
	must(t, os.Link(filepath.Join(dir, "src", "a.go"), filepath.Join(dir, "second")))
	refused(t, "linked", r.Recheck(tg, "src/a.go"), "hard links")
	_, err = r.Target(claim, "src/a.go")
	refused(t, "linked target", err, "hard links")
}
