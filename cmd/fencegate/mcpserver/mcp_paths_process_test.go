package mcpserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pathServers starts one MCP server process per holder, all on db and on
// one tree, and returns the tree's root and the servers.
func pathServers(t *testing.T, db database, holders ...string) (string, []*serverProcess) {
	t.Helper()
	root := t.TempDir()
	var out []*serverProcess
	for _, h := range holders {
		cmd := exec.Command(binary(t), "mcp", "--dsn", db.dsn, "--root", root, "--holder", h)
		cmd.Env = cleanEnv(nil)
		out = append(out, startServer(t, cmd))
	}
	return root, out
}

// claimPaths claims paths through s and returns the answer, claimed or
// not.
func claimPaths(t *testing.T, s *serverProcess, ttl string, paths ...string) claimOutput {
	t.Helper()
	a := args{"paths": paths}
	if ttl != "" {
		a["ttl"] = ttl
	}
	return callOK[claimOutput](t, s.ClientSession, "claim", a)
}

// The clobbering case: two agents that picked different lock names
// cannot both write one file. A plain resource's token writes no files; a
// path claim conflicts with another on the same file, and a token covers
// only what its claim named.
func TestMCPPathsNoClobber(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		la := callOK[claimOutput](t, a.ClientSession, "claim", args{"resource": "lock-a"})
		lb := callOK[claimOutput](t, b.ClientSession, "claim", args{"resource": "lock-b"})
		for i, tok := range []string{la.Token, lb.Token} {
			callErr(t, s[i].ClientSession, "write", args{"token": tok, "path": "notes.txt", "content": "x"},
				"claims no paths", "notes.txt")
		}
		if _, err := os.Stat(filepath.Join(root, "notes.txt")); !os.IsNotExist(err) {
			t.Fatalf("a plain resource's write touched the disk: %v", err)
		}

		ca := claimPaths(t, a, "", "notes.txt")
		if !ca.Claimed || ca.Token == "" {
			t.Fatalf("A's claim: %+v", ca)
		}
		held := claimPaths(t, b, "", "./notes.txt")
		if held.Claimed || held.Holder != "agent-a" || held.Fence != ca.Fence {
			t.Fatalf("B's claim of the file A holds: %+v", held)
		}
		// A, claiming it again, gets its token back.
		if again := claimPaths(t, a, "", "notes.txt"); !again.Claimed || !again.AlreadyHeld || again.Token != ca.Token {
			t.Fatalf("A's claim of notes.txt again: %+v, want its token %s", again, ca.Token)
		}
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "notes.txt", "content": "A\n"})
		// B's token for lock-b still writes nothing, and A's token
		// covers notes.txt only.
		callErr(t, b.ClientSession, "write", args{"token": lb.Token, "path": "notes.txt", "content": "B\n"}, "claims no paths")
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "other.txt", "content": "A\n"},
			`"other.txt" is not covered`, "covers only notes.txt")
		wantFile(t, filepath.Join(root, "notes.txt"), "A\n")
		if _, err := os.Stat(filepath.Join(root, "other.txt")); !os.IsNotExist(err) {
			t.Fatalf("an uncovered write touched the disk: %v", err)
		}

		// status shows the claim's path and holder.
		st := text(call(t, b.ClientSession, "status", args{}))
		contains(t, "status", st, "notes.txt", "agent-a")
	})
}

// A directory covers what is below it: a claim of the directory and one of
// a file in it conflict either way round; a name that merely starts with
// the directory's does not.
func TestMCPPathsDirectoryAndFile(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		_, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		ca := claimPaths(t, a, "", "src/")
		if !ca.Claimed {
			t.Fatalf("A's claim of src/: %+v", ca)
		}
		for _, p := range []string{"src/a.go", "src/deep/x.go", "src/"} {
			if held := claimPaths(t, b, "", p); held.Claimed || held.Holder != "agent-a" {
				t.Fatalf("B's claim of %s under A's src/: %+v", p, held)
			}
		}
		if cb := claimPaths(t, b, "", "src-x/a.go", "srcfile"); !cb.Claimed {
			t.Fatalf("B's claim of names beside src/: %+v", cb)
		}
		cb := claimPaths(t, b, "", "docs/a.md")
		if !cb.Claimed {
			t.Fatalf("B's claim of docs/a.md: %+v", cb)
		}
		if held := claimPaths(t, a, "", "docs/"); held.Claimed || held.Holder != "agent-b" {
			t.Fatalf("A's claim of docs/ over B's docs/a.md: %+v", held)
		}
		// A's own claim of a file below its directory is not granted, and
		// no token is made up for it: src/'s fence is not that claim's.
		if own := claimPaths(t, a, "", "src/a.go"); own.Claimed || !own.AlreadyHeld || own.Token != "" {
			t.Fatalf("A's claim of src/a.go under its own src/: %+v", own)
		} else {
			contains(t, "A's answer", own.Message, "already hold src/", "overlaps")
		}
		// A's directory token writes below it, at any depth.
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/deep/x.go", "content": "A"})
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "docs/a.md", "content": "A"}, "not covered", "covers only src/")
	})
}

// Siblings under one directory do not refuse each other: claims of
// src/a.go and src/b.go are both granted, and each agent writes its own.
func TestMCPPathsSiblings(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		ca, cb := claimPaths(t, a, "", "src/a.go"), claimPaths(t, b, "", "src/b.go")
		if !ca.Claimed || !cb.Claimed {
			t.Fatalf("sibling claims: %+v, %+v", ca, cb)
		}
		// Interleaved, in both orders of fence.
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "src/b.go", "content": "B1"})
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A1"})
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "src/b.go", "content": "B2"})
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A2"})
		wantFile(t, filepath.Join(root, "src", "a.go"), "A2")
		wantFile(t, filepath.Join(root, "src", "b.go"), "B2")
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/b.go", "content": "A"}, "not covered")
	})
}

// A holder of a directory that stalled past its ttl is refused on a file a
// successor claimed and wrote, and the file keeps the successor's content.
func TestMCPPathsStaleDirectoryHolder(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		ca := claimPaths(t, a, "2s", "src/")
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A1"})
		// A stalls; B waits its lease out for one file below.
		cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"src/a.go"}, "wait": "30s"})
		if !cb.Claimed || cb.Fence <= ca.Fence {
			t.Fatalf("B's claim after A's ttl: %+v", cb)
		}
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "src/a.go", "content": "B"})
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A late"},
			"refused, nothing was written", `"agent-b"`, "claim the path src/a.go again")
		wantFile(t, filepath.Join(root, "src", "a.go"), "B")
		// B's claim of src/a.go says nothing about its siblings: fencing
		// orders writes per file, so A's fence is still the newest one
		// for src/c.go (whoever claims it next, or src/, refuses A).
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/c.go", "content": "A"})
		wantFile(t, filepath.Join(root, "src", "c.go"), "A")
	})
}

// The other way round: a holder of a file that stalled is refused on it
// once a successor claimed the directory above it, though nobody wrote the
// file since.
func TestMCPPathsStaleFileHolder(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root, s := pathServers(t, db, "agent-a", "agent-b")
		a, b := s[0], s[1]
		ca := claimPaths(t, a, "2s", "src/a.go")
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A1"})
		cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"src/"}, "wait": "30s"})
		if !cb.Claimed || cb.Fence <= ca.Fence {
			t.Fatalf("B's claim of src/ after A's ttl: %+v", cb)
		}
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "src/a.go", "content": "A late"},
			"refused, nothing was written", `"agent-b"`, "claim the path src/ again")
		wantFile(t, filepath.Join(root, "src", "a.go"), "A1")
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "src/a.go", "content": "B"})
		wantFile(t, filepath.Join(root, "src", "a.go"), "B")
	})
}

// A claim of several paths is taken all or none, against a racing claim of
// one of them: either the set's holder has every path, or the single
// claim's holder has its path and the set's holder has none.
func TestMCPPathsAtomicAgainstSingle(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		_, s := pathServers(t, db, "agent-a", "agent-b", "agent-c")
		a, b, c := s[0], s[1], s[2]
		for round := range 6 {
			set := make([]string, 8)
			for i := range set {
				set[i] = fmt.Sprintf("r%d/f%d", round, i)
			}
			// Both calls in flight at once; judged on this goroutine.
			var ra, rb *mcp.CallToolResult
			var ea, eb error
			var wg sync.WaitGroup
			wg.Go(func() { ra, ea = a.CallTool(t.Context(), callParams("claim", args{"paths": set})) })
			wg.Go(func() { rb, eb = b.CallTool(t.Context(), callParams("claim", args{"paths": set[5:6]})) })
			wg.Wait()
			if ea != nil || eb != nil || ra.IsError || rb.IsError {
				t.Fatalf("round %d: %v %v %s %s", round, ea, eb, text(ra), text(rb))
			}
			ca, cb := decode[claimOutput](t, ra), decode[claimOutput](t, rb)
			if ca.Claimed == cb.Claimed {
				t.Fatalf("round %d: the set's claim %+v and the single claim %+v: want exactly one granted", round, ca, cb)
			}
			// C probes every path of the set: held by A throughout, or
			// free but for B's.
			for i, p := range set {
				pc := claimPaths(t, c, "", p)
				want := ca.Claimed || i == 5
				if pc.Claimed == want {
					t.Fatalf("round %d: C's claim of %s: %+v (A's %v, B's %v)", round, p, pc, ca.Claimed, cb.Claimed)
				}
				if pc.Claimed {
					callOK[releaseOutput](t, c.ClientSession, "release", args{"token": pc.Token})
				}
			}
		}
	})
}

// Bad path claims are refused with a clear error and claim nothing.
func TestMCPPathsBadClaims(t *testing.T) {
	t.Parallel()
	dsn := dbtestSQLite(t)
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "src"), 0o755))
	a := newMCP(t, dsn, Config{Holder: "agent-a", Root: root})
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("f%d", i)
	}
	for _, c := range []struct {
		name string
		args args
		want []string
	}{
		{"empty list", args{"paths": []string{}}, []string{"no paths"}},
		{"resource and paths", args{"resource": "r", "paths": []string{"a"}}, []string{"resource or paths, not both"}},
		{"neither", args{}, []string{"resource"}},
		{"duplicate", args{"paths": []string{"a", "./a"}}, []string{"same file"}},
		{"dir and its file", args{"paths": []string{"src/", "src/a.go"}}, []string{"inside the directory"}},
		{"absolute", args{"paths": []string{"/etc/passwd"}}, []string{"absolute"}},
		{"dotdot", args{"paths": []string{"../x"}}, []string{`".."`}},
		{"nul", args{"paths": []string{"a\x00b"}}, []string{"NUL"}},
		{"too many", args{"paths": many}, []string{"65 paths", "64"}},
		{"dir without slash", args{"paths": []string{"src"}}, []string{`"src/"`}},
	} {
		msg := callErr(t, a.ClientSession, "claim", c.args, c.want...)
		if strings.Contains(msg, "claimed") && !strings.Contains(msg, "not") {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
	// Nothing was claimed by any of them: every path is free.
	if ca := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"a", "src/", "f1"}}); !ca.Claimed || ca.AlreadyHeld {
		t.Fatalf("after the bad claims: %+v", ca)
	}
}

// A claim of several paths is one lease for assert, renew and release, on
// the tools and the command line: current while every member is, renewed
// and released as a whole.
func TestMCPPathsSetLifecycle(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root := t.TempDir()
		a := newMCP(t, db.dsn, Config{Holder: "agent-a", Root: root})
		b := newMCP(t, db.dsn, Config{Holder: "agent-b", Root: root})
		ca := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"b/", "a.txt"}, "ttl": "1m"})
		if !ca.Claimed || !strings.HasPrefix(ca.Token, "fg2:") || len(ca.Paths) != 2 || ca.Paths[0] != "a.txt" || ca.Paths[1] != "b/" {
			t.Fatalf("the set's claim: %+v", ca)
		}
		if as := callOK[assertOutput](t, a.ClientSession, "assert", args{"token": ca.Token}); !as.Current {
			t.Fatalf("assert: %+v", as)
		}
		out, code := fgCheck(t, db.dsn, ca.Token)
		if code != 0 {
			t.Fatalf("fencegate check: exit %d, %s", code, out)
		}
		contains(t, "check", out, "current: {path:a.txt, path:b/}")
		if rn := callOK[renewOutput](t, a.ClientSession, "renew", args{"token": ca.Token, "ttl": "2m"}); !rn.Renewed || rn.Resource != "{path:a.txt, path:b/}" {
			t.Fatalf("renew: %+v", rn)
		}
		if held := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"b/x"}}); held.Claimed {
			t.Fatalf("B's claim under A's b/: %+v", held)
		}
		if rl := callOK[releaseOutput](t, a.ClientSession, "release", args{"token": ca.Token}); !rl.Released {
			t.Fatalf("release: %+v", rl)
		}
		if as := callOK[assertOutput](t, a.ClientSession, "assert", args{"token": ca.Token}); as.Current {
			t.Fatalf("assert after release: %+v", as)
		}
		for _, p := range []string{"a.txt", "b/x"} {
			if cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{p}}); !cb.Claimed {
				t.Fatalf("B's claim of %s after A's release: %+v", p, cb)
			}
		}
	})
}
