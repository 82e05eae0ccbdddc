package mcpserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
)

// envRoot is the root of the mcp-stall helper's file writes.
const envRoot = "FGTEST_ROOT"

// mcpHelper runs the MCP helpers. mcp-stall is an MCP server (on
// $FENCEGATE_DSN, files under $FGTEST_ROOT, holder "stalled") whose file
// writes stop just before the rename: it writes "stalled" to file and
// waits to be killed.
func mcpHelper(name, file string) (int, bool) {
	if name != "mcp-stall" {
		return 0, false
	}
	cfg := Config{
		DSN: os.Getenv(envDSN), Holder: "stalled", Root: os.Getenv(envRoot), Log: os.Stderr,
		beforeRename: func(context.Context) {
			if err := writeFileAtomic(file, "stalled"); err != nil {
				fail(err)
			}
			time.Sleep(helperTimeout)
		},
	}
	if err := Run(context.Background(), cfg, &mcp.StdioTransport{}); err != nil {
		return fail(err), true
	}
	return 0, true
}

// serverProcess is an MCP server in a process of its own, and a go-sdk
// client talking to it over its stdin and stdout.
type serverProcess struct {
	*mcp.ClientSession
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// startServer runs cmd (not started) as an MCP server and connects to it.
func startServer(t *testing.T, cmd *exec.Cmd) *serverProcess {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start %v: %v\n%s", cmd.Args, err, stderr)
	}
	p := &serverProcess{ClientSession: cs, cmd: cmd, stderr: stderr}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", filepath.Base(cmd.Path), stderr)
		}
	})
	return p
}

// Two agents, each with its own server process, meet in one database: A
// claims, B is told A holds it; A stalls past its ttl; B claims a higher
// fence and writes; A's late writes are refused and logged, and the file
// holds B's content.
func TestMCPTwoServers(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		db.createLog(t)
		root := t.TempDir()
		server := func(holder string) *serverProcess {
			cmd := exec.Command(binary(t), "mcp", "--dsn", db.dsn, "--root", root, "--holder", holder, "--allow-sql")
			cmd.Env = cleanEnv(nil)
			return startServer(t, cmd)
		}
		a, b := server("agent-a"), server("agent-b")

		// A ttl that outlives B's claim and A's write below on a loaded
		// machine; B then waits it out.
		ca := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"report.md"}, "ttl": "5s"})
		if !ca.Claimed {
			t.Fatalf("A's claim: %+v", ca)
		}
		held := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"report.md"}})
		if held.Claimed || held.Holder != "agent-a" || held.Fence != ca.Fence {
			t.Fatalf("B's first claim: %+v", held)
		}
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "path": "report.md", "content": "A's draft\n"})

		// A stalls: it neither renews nor writes. B waits for the lease to
		// run out (claim's wait polls the database).
		cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"report.md"}, "wait": "30s"})
		if !cb.Claimed || cb.Fence <= ca.Fence {
			t.Fatalf("B's claim after A's ttl: %+v", cb)
		}
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "report.md", "content": "B's report\n"})
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "sql": []any{args{"query": db.insert, "args": []any{cb.Fence, "agent-b"}}}})

		// A wakes up and writes: refused, with both holders and fences.
		msg := callErr(t, a.ClientSession, "write", args{"token": ca.Token, "path": "report.md", "content": "A's late edit\n"},
			"refused, nothing was written", `from "agent-a"`, `from "agent-b"`, "rejection #")
		callErr(t, a.ClientSession, "write", args{"token": ca.Token, "sql": []any{args{"query": db.insert, "args": []any{ca.Fence, "agent-a"}}}},
			"refused, nothing was written", `from "agent-b"`)
		wantFile(t, filepath.Join(root, "report.md"), "B's report\n")
		if rows := db.logRows(t); !slices.Equal(rows, []int64{cb.Fence}) {
			t.Fatalf("log rows %v, want only B's fence %d", rows, cb.Fence)
		}
		rn := callOK[renewOutput](t, a.ClientSession, "renew", args{"token": ca.Token})
		if !rn.Expired || rn.Successor != "agent-b" {
			t.Fatalf("A's renew: %+v", rn)
		}

		st := callOK[ops.StatusReport](t, b.ClientSession, "status", args{"resource": "path:report.md"})
		if len(st.Locks) != 1 || st.Locks[0].Holder != "agent-b" || st.Locks[0].Floor != cb.Fence {
			t.Fatalf("status: %+v", st)
		}
		if len(st.Refusals) != 2 || st.Refusals[0].Holder != "agent-a" || st.Refusals[0].FloorHolder != "agent-b" || st.Refusals[0].Fence != ca.Fence {
			t.Fatalf("refusals: %+v (A was told %q)", st.Refusals, msg)
		}
		// Logs are on stderr; stdout carries only the protocol (or the
		// client could not have parsed it).
		contains(t, "A's stderr", a.stderr.String(), "write refused", "resource=path:report.md")
	})
}

// A server killed with SIGKILL in the middle of a file write leaves the
// file as it was, and its lease frees after the ttl.
func TestMCPKilledMidWrite(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		root := t.TempDir()
		target := filepath.Join(root, "state.json")
		must(t, os.WriteFile(target, []byte(`{"old": true}`), 0o644))
		stalled := filepath.Join(t.TempDir(), "stalled")
		cmd := exec.Command(testExe(t))
		cmd.Env = cleanEnv(map[string]string{envHelper: "mcp-stall", envFile: stalled, envDSN: db.dsn, envRoot: root})
		a := startServer(t, cmd)

		ca := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"state.json"}, "ttl": "5s"})
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The connection dies with the server: an error, or no answer.
			_, _ = a.CallTool(context.WithoutCancel(t.Context()), callParams("write", args{"token": ca.Token, "path": "state.json", "content": `{"new": true}`}))
		}()
		waitForFile(t, stalled, done)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done

		wantFile(t, target, `{"old": true}`)
		// Nobody released it: held until its ttl, then B gets it.
		b := newMCP(t, db.dsn, Config{Holder: "agent-b", Root: root})
		if held := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"state.json"}}); held.Claimed || held.Holder != "stalled" {
			t.Fatalf("B's claim right after the kill: %+v", held)
		}
		cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"state.json"}, "wait": "30s"})
		if !cb.Claimed || cb.Fence <= ca.Fence {
			t.Fatalf("B's claim after the kill: %+v", cb)
		}
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": cb.Token, "path": "state.json", "content": `{"b": true}`})
		wantFile(t, target, `{"b": true}`)
	})
}
