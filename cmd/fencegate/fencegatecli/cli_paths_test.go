package fencegatecli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two command-line processes on one tree: path claims conflict when one
// covers the other, siblings and plain locks do not, and a claim of
// several paths is all or none against a racing single claim.
func TestCLIPaths(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "src"), 0o755))
		env := map[string]string{envDSN: db.dsn}
		claim := func(holder string, paths ...string) result {
			t.Helper()
			a := []string{"claim", "--root", root, "--holder", holder, "--ttl", "1m"}
			for _, p := range paths {
				a = append(a, "--path", p)
			}
			return sub(t, env, a...)
		}
		ra := claim("agent-a", "notes.txt").want(t, exitOK)
		if strings.TrimSpace(ra.stdout) == "" {
			t.Fatalf("claim printed no token: %v", ra)
		}
		r := claim("agent-b", "./notes.txt").want(t, exitHeld)
		contains(t, "stderr", r.stderr, `"agent-a"`)
		// A plain lock of the same name is another resource.
		sub(t, env, "claim", "--lock", "notes.txt", "--holder", "agent-b").want(t, exitOK)

		claim("agent-a", "src/").want(t, exitOK)
		claim("agent-b", "src/a.go").want(t, exitHeld)
		claim("agent-b", "src/deep/").want(t, exitHeld)
		claim("agent-b", "src-x/a.go").want(t, exitOK)
		claim("agent-b", "docs/a.md").want(t, exitOK)
		claim("agent-a", "docs/").want(t, exitHeld)
		claim("agent-a", "docs/b.md").want(t, exitOK) // a sibling

		// Bad input: a usage error (exit 2), nothing claimed.
		for _, bad := range [][]string{
			{"../x"}, {"/etc/passwd"}, {"a", "a"}, {"lib/", "lib/a"}, {"src"},
		} {
			r := claim("agent-c", bad...).want(t, exitUsage)
			contains(t, "stderr", r.stderr, "invalid path")
		}
		sub(t, env, "claim", "--lock", "x", "--path", "y", "--root", root).want(t, exitUsage)
		claim("agent-c", "lib/a", "a").want(t, exitOK) // free: the bad claims took nothing

		for round := range 4 {
			set := make([]string, 6)
			for i := range set {
				set[i] = fmt.Sprintf("race%d/f%d", round, i)
			}
			var rs, r1 result
			var wg sync.WaitGroup
			wg.Go(func() { rs = claim("agent-a", set...) })
			wg.Go(func() { r1 = claim("agent-b", set[3]) })
			wg.Wait()
			if (rs.code == exitOK) == (r1.code == exitOK) || rs.code+r1.code != exitHeld {
				t.Fatalf("round %d: the set %v, the single %v: want exactly one granted, the other held", round, rs, r1)
			}
			for i, p := range set {
				r := claim("agent-c", p)
				free := rs.code != exitOK && i != 3
				if (r.code == exitOK) != free {
					t.Fatalf("round %d: C's claim of %s: %v", round, p, r)
				}
			}
		}
	})
}

// run --path holds the paths for the command's life and releases them.
func TestRunPaths(t *testing.T) {
	t.Parallel()
	dsn := dbtestSQLite(t)
	root := t.TempDir()
	env := map[string]string{envDSN: dsn}
	r := sub(t, env, "run", "--root", root, "--path", "a.txt", "--path", "src/", "--holder", "agent-a", "--",
		"sh", "-c", `echo "$`+envToken+`"; `+`"$0" claim --root "$1" --path src/x --holder agent-b; echo "inner=$?"`, binary(t), root)
	r.want(t, exitOK)
	contains(t, "run's stdout", r.stdout, "inner=3")
	// Released when the command ended.
	sub(t, env, "claim", "--root", root, "--path", "src/x", "--holder", "agent-b").want(t, exitOK)
}
