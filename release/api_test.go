package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/*.txt to the exported API as it is")

// TestAPISnapshot fails when a published package's exported API differs from
// api/*.txt, so that every change to it is deliberate and shows in review:
// after a change you mean, run
//
//	go test ./release -run TestAPISnapshot -update
//
// and commit the new api/*.txt with it.
func TestAPISnapshot(t *testing.T) {
	root := repoRoot(t)
	for file, modulePath := range apiModules {
		t.Run(file, func(t *testing.T) {
			got, err := exportedAPI(root, modulePath)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(root, "api", file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: record the API with -update", err)
			}
			added, removed := diffLines(strings.Split(strings.TrimSpace(string(b)), "\n"), got)
			if len(added)+len(removed) > 0 {
				t.Errorf("the exported API of %s changed; if you mean it, run\n\tgo test ./release -run TestAPISnapshot -update\nand commit api/%s\nadded:\n\t%s\nremoved:\n\t%s",
					modulePath, file, strings.Join(added, "\n\t"), strings.Join(removed, "\n\t"))
			}
		})
	}
}

// TestAPISnapshotFires shows the comparison catching a change in each
// direction.
func TestAPISnapshotFires(t *testing.T) {
	old := []string{"pkg a, func F()", "pkg a, func G()"}
	added, removed := diffLines(old, []string{"pkg a, func F(int)", "pkg a, func G()"})
	if len(added) != 1 || added[0] != "pkg a, func F(int)" || len(removed) != 1 || removed[0] != "pkg a, func F()" {
		t.Fatalf("added %q, removed %q", added, removed)
	}
	if a, r := diffLines(old, old); len(a)+len(r) != 0 {
		t.Fatalf("an unchanged API differs: %q %q", a, r)
	}
}

func diffLines(want, got []string) (added, removed []string) {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range s {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for _, l := range got {
		if !w[l] {
			added = append(added, l)
		}
	}
	for _, l := range want {
		if !g[l] {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func repoRoot(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
