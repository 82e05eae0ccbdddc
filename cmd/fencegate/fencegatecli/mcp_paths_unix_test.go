//go:build unix

package fencegatecli

import (
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
