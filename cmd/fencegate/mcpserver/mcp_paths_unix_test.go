//go:build unix

package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A file has one identity whatever name reaches it: a symbolic link inside
// the root is its target, a hard-linked file is not written, and an agent
// that names a file through a link conflicts with one that names it
// directly.
func TestMCPPathsOneIdentity(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		must(t, os.MkdirAll(filepath.Join(root, "src"), 0o755))
		must(t, os.Symlink("src", filepath.Join(root, "s")))
		must(t, os.WriteFile(filepath.Join(root, "h1"), []byte("h"), 0o644))
		must(t, os.Link(filepath.Join(root, "h1"), filepath.Join(root, "h2")))

		ca := claimPaths(t, a, "", "src/a.go", "h1")
		if held := claimPaths(t, b, "", "s/a.go"); held.Claimed || held.Holder != "agent-a" {
			t.Fatalf("B's claim of s/a.go, a link's name for A's src/a.go: %+v", held)
		}
		if held := claimPaths(t, b, "", "s/"); held.Claimed || held.Holder != "agent-a" {
			t.Fatalf("B's claim of s/, a link's name for src/: %+v", held)
		}
		w := callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "s/a.go", "content": "A"})
		if w.Path != "src/a.go" {
			t.Errorf("the write through the link answered path %q, want its identity src/a.go", w.Path)
		}
		wantFile(t, filepath.Join(root, "src", "a.go"), "A")
		if fi, err := os.Lstat(filepath.Join(root, "s")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link was replaced: %v %v", fi, err)
		}
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "h1", "content": "x"}, "2 hard links")
		wantFile(t, filepath.Join(root, "h2"), "h")
	})
}

// A path whose identity changes while it is being written (a directory on
// the way swapped for a link elsewhere, after the claim was checked and
// before the rename) is refused, and nothing lands on either file.
func TestMCPPathsRelinkedMidWrite(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"src", "other"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		must(t, os.WriteFile(filepath.Join(root, d, "a.go"), []byte(d), 0o644))
	}
	link := filepath.Join(root, "s")
	must(t, os.Symlink("src", link))
	s := newMCP(t, dbtestSQLite(t), Config{Holder: "agent-a", Root: root, beforeRename: func(context.Context) {
		must(t, os.Remove(link))
		must(t, os.Symlink("other", link))
	}})
	tok := callOK[claimOutput](t, s.ClientSession, "claim", args{"paths": []string{"src/a.go"}}).Token
	callErr(t, s.ClientSession, "write", args{"token": tok, "path": "s/a.go", "content": "A"},
		`now resolves to "other/a.go", not "src/a.go"`, "the file is unchanged")
	wantFile(t, filepath.Join(root, "src", "a.go"), "src")
	wantFile(t, filepath.Join(root, "other", "a.go"), "other")
	for _, d := range []string{"src", "other"} {
		if ents, _ := os.ReadDir(filepath.Join(root, d)); len(ents) != 1 {
			t.Errorf("%s holds %v: a temp file left behind?", d, ents)
		}
	}
}
