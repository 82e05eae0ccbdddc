package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mcpSession is an in-process server and a client connected to it.
type mcpSession struct {
	*mcp.ClientSession
	srv    *Server
	stderr *syncBuffer
}

// newMCP starts an in-process server with cfg on the database dsn and
// connects a client to it over in-memory transports.
func newMCP(t *testing.T, dsn string, cfg Config) *mcpSession {
	t.Helper()
	stderr := &syncBuffer{}
	cfg.DSN, cfg.Log = dsn, stderr
	ctx := context.WithoutCancel(t.Context())
	srv, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		srv.Close()
	})
	return &mcpSession{ClientSession: cs, srv: srv, stderr: stderr}
}

// call calls a tool with args (a map or a struct) and returns the result,
// failing t only on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), callParams(tool, args))
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structured output.
func callOK[T any](t *testing.T, cs *mcp.ClientSession, tool string, args any) T {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, text(res))
	}
	return decode[T](t, res)
}

// callErr calls a tool that must fail with a message containing every one
// of subs, and returns the message.
func callErr(t *testing.T, cs *mcp.ClientSession, tool string, args any, subs ...string) string {
	t.Helper()
	res := call(t, cs, tool, args)
	if !res.IsError {
		t.Fatalf("%s %v: want a tool error, got %s", tool, args, text(res))
	}
	msg := text(res)
	contains(t, tool+" error", msg, subs...)
	return msg
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	out, err := decodeAny[T](res)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeAny decodes a result's structured output.
func decodeAny[T any](res *mcp.CallToolResult) (T, error) {
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode %s: %v", b, err)
	}
	return out, nil
}

func callParams(tool string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

// randomName is a random lower-case name part.
func randomName() string { return strings.ToLower(rand.Text()[:8]) }

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type args = map[string]any

func TestMCPToolSchemas(t *testing.T) {
	t.Parallel()
	cs := newMCP(t, dbtestSQLite(t), Config{Root: t.TempDir()})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		required             []string
		readOnly, idempotent bool
		destructive          bool
	}{
		"claim":   {required: nil},
		"assert":  {required: []string{"token"}, readOnly: true},
		"check":   {required: []string{"token"}, readOnly: true},
		"renew":   {required: []string{"token"}, idempotent: true},
		"release": {required: []string{"token"}, idempotent: true},
		"write":   {required: []string{"token"}, destructive: true},
		"status":  {readOnly: true},
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
		in := schemaOf(t, tool.InputSchema)
		if in.Type != "object" || in.AdditionalProperties == nil {
			t.Errorf("%s: input schema %+v: want an object that refuses unknown fields", tool.Name, in)
		}
		if !slices.Equal(in.Required, w.required) {
			t.Errorf("%s: required %q, want %q", tool.Name, in.Required, w.required)
		}
		for name, p := range in.Properties {
			if p.Description == "" {
				t.Errorf("%s: input %q has no description", tool.Name, name)
			}
		}
		if out := schemaOf(t, tool.OutputSchema); out.Type != "object" || len(out.Properties) == 0 {
			t.Errorf("%s: output schema %+v: want an object with properties", tool.Name, out)
		}
		a := tool.Annotations
		if a == nil {
			t.Errorf("%s: no annotations", tool.Name)
			continue
		}
		if a.ReadOnlyHint != w.readOnly || a.IdempotentHint != w.idempotent {
			t.Errorf("%s: readOnly %v idempotent %v, want %v %v", tool.Name, a.ReadOnlyHint, a.IdempotentHint, w.readOnly, w.idempotent)
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: openWorldHint %v, want false", tool.Name, a.OpenWorldHint)
		}
		if !w.readOnly && (a.DestructiveHint == nil || *a.DestructiveHint != w.destructive) {
			t.Errorf("%s: destructiveHint %v, want %v", tool.Name, a.DestructiveHint, w.destructive)
		}
		if tool.Name == "write" {
			if mode := in.Properties["mode"]; mode == nil || !slices.Equal(mode.Enum, []any{"write", "append", "delete"}) {
				t.Errorf("write: mode %+v, want an enum of write, append, delete", mode)
			}
		}
	}
	if len(names) != len(want) {
		t.Errorf("tools %q, want %d", names, len(want))
	}
}

// schema is the part of a JSON schema the tests look at.
type schema struct {
	Type                 any                `json:"type"` // a string, or a list such as ["null", "array"]
	Required             []string           `json:"required"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties any                `json:"additionalProperties"`
	Description          string             `json:"description"`
	Enum                 []any              `json:"enum"`
}

func schemaOf(t *testing.T, v any) schema {
	t.Helper()
	var s schema
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMCPLeaseTools(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		a := newMCP(t, db.dsn, Config{Holder: "agent-a"})
		b := newMCP(t, db.dsn, Config{Holder: "agent-b"})

		got := callOK[claimOutput](t, a.ClientSession, "claim", args{"resource": "src/main.go", "ttl": "1m"})
		tok := parseToken(t, got.Token)
		if !got.Claimed || got.Holder != "agent-a" || tok.Fence != got.Fence || tok.Holder != "agent-a" || got.ExpiresInMS <= 0 || got.ExpiresAt == "" {
			t.Fatalf("claim: %+v", got)
		}

		// B is told who holds it, their fence and when it frees: a
		// normal answer, not an error.
		held := callOK[claimOutput](t, b.ClientSession, "claim", args{"resource": "src/main.go"})
		if held.Claimed || held.Token != "" || held.Holder != "agent-a" || held.Fence != got.Fence || held.ExpiresInMS <= 0 {
			t.Fatalf("held claim: %+v", held)
		}
		contains(t, "held message", held.Message, `held by "agent-a"`)

		// A claiming again gets its own token back.
		again := callOK[claimOutput](t, a.ClientSession, "claim", args{"resource": "src/main.go"})
		if !again.Claimed || !again.AlreadyHeld || again.Token != got.Token || again.ExpiresInMS <= 0 {
			t.Fatalf("claim again: %+v", again)
		}

		as := callOK[assertOutput](t, b.ClientSession, "assert", args{"token": got.Token})
		if !as.Current || as.Floor != got.Fence || as.ExpiresInMS <= 0 {
			t.Fatalf("assert: %+v", as)
		}
		contains(t, "assert message", as.Message, "advisory")
		if ch := callOK[assertOutput](t, b.ClientSession, "check", args{"token": got.Token}); !ch.Current || ch.Fence != as.Fence || ch.Floor != as.Floor || ch.Holder != as.Holder {
			t.Errorf("check, the CLI's name for assert: %+v, want assert's %+v", ch, as)
		}

		rn := callOK[renewOutput](t, a.ClientSession, "renew", args{"token": got.Token, "ttl": "2m"})
		if !rn.Renewed || rn.Expired || rn.Fence != got.Fence || rn.ExpiresInMS <= 60_000 {
			t.Fatalf("renew: %+v", rn)
		}

		rl := callOK[releaseOutput](t, a.ClientSession, "release", args{"token": got.Token})
		if !rl.Released {
			t.Fatalf("release: %+v", rl)
		}
		// Idempotent: a second release is a no-op, and so is renewing.
		if rl := callOK[releaseOutput](t, a.ClientSession, "release", args{"token": got.Token}); rl.Released {
			t.Fatalf("second release: %+v", rl)
		}

		// B claims a higher fence; A's token is now expired with B as the
		// successor, and A's late release never frees B's lease.
		bc := callOK[claimOutput](t, b.ClientSession, "claim", args{"resource": "src/main.go"})
		if !bc.Claimed || bc.Fence <= got.Fence {
			t.Fatalf("B's claim: %+v", bc)
		}
		rn = callOK[renewOutput](t, a.ClientSession, "renew", args{"token": got.Token})
		if rn.Renewed || !rn.Expired || rn.Successor != "agent-b" || rn.SuccessorFence != bc.Fence {
			t.Fatalf("stale renew: %+v", rn)
		}
		if rl := callOK[releaseOutput](t, a.ClientSession, "release", args{"token": got.Token}); rl.Released {
			t.Fatalf("stale release: %+v", rl)
		}
		as = callOK[assertOutput](t, a.ClientSession, "assert", args{"token": got.Token})
		if as.Current || as.Holder != "agent-b" || as.HolderFence != bc.Fence {
			t.Fatalf("stale assert: %+v", as)
		}
		contains(t, "stale assert", as.Message, "stale", "moved on")
		if ch := callOK[assertOutput](t, a.ClientSession, "check", args{"token": got.Token}); ch != as {
			t.Errorf("stale check: %+v, want assert's %+v", ch, as)
		}

		st := callOK[ops.StatusReport](t, b.ClientSession, "status", args{})
		if len(st.Locks) != 1 || st.Locks[0].State != "held" || st.Locks[0].Holder != "agent-b" || st.Locks[0].Fence != bc.Fence || st.Locks[0].Floor != bc.Fence {
			t.Fatalf("status: %+v", st)
		}
		if st := callOK[ops.StatusReport](t, b.ClientSession, "status", args{"resource": "other"}); len(st.Locks) != 0 {
			t.Fatalf("status of another lock: %+v", st)
		}

		// Every time is in the command's one layout, the database's
		// microseconds too.
		for _, c := range []struct {
			tool string
			args args
		}{{"status", args{}}, {"claim", args{"resource": "src/other.go"}}} {
			out, err := json.Marshal(call(t, b.ClientSession, c.tool, c.args).StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			times := anyTime.FindAllString(string(out), -1)
			for _, s := range times {
				if p, err := time.Parse(ops.StampLayout, s); err != nil || p.Format(ops.StampLayout) != s {
					t.Errorf("%s: time %s is not in the layout %s", c.tool, s, ops.StampLayout)
				}
			}
			if len(times) == 0 {
				t.Errorf("%s: no time in %s", c.tool, out)
			}
		}
	})
}

// anyTime matches a time in any RFC 3339 layout.
var anyTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

func TestMCPWriteFile(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		root := t.TempDir()
		a := newMCP(t, db.dsn, Config{Holder: "agent-a", Root: root})
		b := newMCP(t, db.dsn, Config{Holder: "agent-b", Root: root})
		ta := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"docs/", "scratch.txt"}}).Token

		w := callOK[writeOutput](t, a.ClientSession, "write", args{"token": ta, "path": "docs/notes.md", "content": "one\n"})
		if !w.Written || w.Kind != "file" || w.Path != filepath.Join("docs", "notes.md") || w.Bytes != 4 || w.Mode != "write" {
			t.Fatalf("write: %+v", w)
		}
		w = callOK[writeOutput](t, a.ClientSession, "write", args{"token": ta, "path": "docs/notes.md", "content": "two\n", "mode": "append"})
		if !w.Written || w.Bytes != 8 {
			t.Fatalf("append: %+v", w)
		}
		wantFile(t, filepath.Join(root, "docs", "notes.md"), "one\ntwo\n")
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ta, "path": "scratch.txt", "content": "x"})
		callOK[writeOutput](t, a.ClientSession, "write", args{"token": ta, "path": "scratch.txt", "mode": "delete"})
		if _, err := os.Stat(filepath.Join(root, "scratch.txt")); !os.IsNotExist(err) {
			t.Fatalf("scratch.txt after delete: %v", err)
		}
		if ents, _ := os.ReadDir(filepath.Join(root, "docs")); len(ents) != 1 {
			t.Fatalf("docs holds %v: temp files left behind?", ents)
		}

		// A releases, B claims a higher fence: A's late write is refused,
		// logged, and writes nothing.
		callOK[releaseOutput](t, a.ClientSession, "release", args{"token": ta})
		tb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"docs/notes.md"}})
		callOK[writeOutput](t, b.ClientSession, "write", args{"token": tb.Token, "path": "docs/notes.md", "content": "B\n"})
		for _, mode := range []string{"write", "append", "delete"} {
			in := args{"token": ta, "path": "docs/notes.md", "mode": mode}
			if mode != "delete" {
				in["content"] = "late A\n"
			}
			res := call(t, a.ClientSession, "write", in)
			if !res.IsError {
				t.Fatalf("stale %s: want a tool error, got %s", mode, text(res))
			}
			contains(t, "refusal", text(res), "refused, nothing was written", `from "agent-a"`, `floor `+itoa(tb.Fence)+` from "agent-b"`, "rejection #", "claim the path docs/notes.md again")
			out := decode[writeOutput](t, res)
			r := out.Refusal
			if out.Written || r == nil || r.Fence != parseToken(t, ta).Fence || r.Floor != tb.Fence || r.FloorHolder != "agent-b" || r.Holder != "agent-a" || r.Seq == 0 {
				t.Fatalf("stale %s: %+v", mode, out)
			}
		}
		wantFile(t, filepath.Join(root, "docs", "notes.md"), "B\n")
		contains(t, "A's log", a.stderr.String(), "write refused")
		st := callOK[ops.StatusReport](t, b.ClientSession, "status", args{"resource": "path:docs/notes.md"})
		if len(st.Refusals) != 3 || st.Refusals[0].Holder != "agent-a" {
			t.Fatalf("status refusals: %+v", st.Refusals)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s holds %q, want %q", path, b, want)
	}
}

// dbtestSQLite is a fresh SQLite file for a test that needs one database.
func dbtestSQLite(t *testing.T) string { return filepath.Join(t.TempDir(), "fencegate.db") }

func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(secret, filepath.Join(root, "link")))
	must(t, os.Symlink(outside, filepath.Join(root, "out")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "passwd")))
	mkfifo(t, filepath.Join(root, "fifo"))
	must(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "plain"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "hard"), []byte("h"), 0o644))
	must(t, os.Link(filepath.Join(root, "hard"), filepath.Join(root, "hard2")))

	dsn := filepath.Join(root, "fencegate.db") // under the root, as with --root . and the default database
	s := newMCP(t, dsn, Config{Holder: "agent-a", Root: root, MaxFileBytes: 16})
	token := callOK[claimOutput](t, s.ClientSession, "claim", args{"paths": []string{"a", "nothing", "plain", "hard", "fencegate.db", "fencegate.db-wal"}}).Token
	rtoken := callOK[claimOutput](t, s.ClientSession, "claim", args{"resource": "r"}).Token
	stale := "fg1:1000:r:agent-a"

	cases := []struct {
		name string
		tool string
		args any
		msg  []string
	}{
		{"claim/no resource", "claim", args{}, []string{"missing resource", "paths"}},
		{"claim/empty resource", "claim", args{"resource": ""}, []string{"missing resource"}},
		{"claim/path resource", "claim", args{"resource": "path:a"}, []string{"give paths instead"}},
		{"claim/resource and paths", "claim", args{"resource": "r", "paths": []string{"a"}}, []string{"not both"}},
		{"claim/empty paths", "claim", args{"paths": []string{}}, []string{"no paths"}},
		{"claim/paths wrong type", "claim", args{"paths": "a"}, []string{"paths", "type"}},
		{"claim/path through a link out", "claim", args{"paths": []string{"out/x"}}, []string{"leads out of the root"}},
		{"claim/fifo", "claim", args{"paths": []string{"fifo"}}, []string{"special file"}},
		{"claim/control char", "claim", args{"resource": "a\x01b"}, []string{"control character"}},
		{"claim/long resource", "claim", args{"resource": strings.Repeat("x", 300)}, []string{"longer than the limit"}},
		{"claim/wrong type", "claim", args{"resource": 5}, []string{"resource", "type"}},
		{"claim/unknown field", "claim", args{"resource": "r2", "lock": "r2"}, []string{"lock"}},
		{"claim/bad ttl", "claim", args{"resource": "r2", "ttl": "soon"}, []string{`bad ttl "soon"`, "30s"}},
		{"claim/zero ttl", "claim", args{"resource": "r2", "ttl": "0s"}, []string{"must be at least 100ms"}},
		{"claim/short ttl", "claim", args{"resource": "r2", "ttl": "99ms"}, []string{"must be at least 100ms"}},
		{"claim/huge ttl", "claim", args{"resource": "r2", "ttl": "1000h"}, []string{"ttl"}},
		{"claim/long wait", "claim", args{"resource": "r2", "wait": "1h"}, []string{"bad wait", "5m0s"}},
		{"claim/negative wait", "claim", args{"resource": "r2", "wait": "-1s"}, []string{"bad wait"}},
		{"assert/no token", "assert", args{}, []string{`missing properties: ["token"]`}},
		{"assert/bad token", "assert", args{"token": "banana"}, []string{`bad token "banana"`, "fg1:<fence>"}},
		{"renew/empty token", "renew", args{"token": " "}, []string{"missing token"}},
		{"renew/bad ttl", "renew", args{"token": rtoken, "ttl": "-1s"}, []string{"must be at least 100ms"}},
		{"renew/unknown resource", "renew", args{"token": "fg1:1:never:agent-a"}, []string{"was never leased", "claim it first"}},
		{"release/bad token", "release", args{"token": "fg1:0:r:h"}, []string{"fence"}},
		{"status/bad resource", "status", args{"resource": "a\nb"}, []string{"control character"}},
		{"write/no token", "write", args{"path": "a", "content": "x"}, []string{`missing properties: ["token"]`}},
		{"write/nothing", "write", args{"token": token}, []string{"nothing to write"}},
		{"write/both kinds", "write", args{"token": token, "path": "a", "content": "x", "sql": []any{args{"query": "SELECT 1"}}}, []string{"not both"}},
		{"write/sql off", "write", args{"token": rtoken, "sql": []any{args{"query": "SELECT 1"}}}, []string{"--allow-sql"}},
		{"write/bad mode", "write", args{"token": token, "path": "a", "content": "x", "mode": "truncate"}, []string{"mode"}},
		{"write/delete content", "write", args{"token": token, "path": "plain", "mode": "delete", "content": "x"}, []string{"delete takes no content"}},
		{"write/delete missing", "write", args{"token": token, "path": "nothing", "mode": "delete"}, []string{"does not exist"}},
		{"write/too big", "write", args{"token": token, "path": "a", "content": strings.Repeat("x", 17)}, []string{"17 bytes", "limit of 16"}},
		{"write/no path", "write", args{"token": token, "content": "x"}, []string{"missing path"}},
		{"write/dotdot", "write", args{"token": token, "path": "../x", "content": "x"}, []string{`contains ".."`}},
		{"write/inner dotdot", "write", args{"token": token, "path": "dir/../../x", "content": "x"}, []string{`contains ".."`}},
		{"write/absolute", "write", args{"token": token, "path": "/etc/passwd", "content": "x"}, []string{"absolute"}},
		{"write/root", "write", args{"token": token, "path": "./", "content": "x"}, []string{"root itself"}},
		{"write/symlink out", "write", args{"token": token, "path": "link", "content": "x"}, []string{"symbolic link", "leads out of the root"}},
		{"write/symlink passwd", "write", args{"token": token, "path": "passwd", "content": "x"}, []string{"symbolic link", "/etc/passwd", "leads out of the root"}},
		{"write/through dir symlink", "write", args{"token": token, "path": "out/secret", "content": "x"}, []string{"leads out of the root"}},
		{"write/new through dir symlink", "write", args{"token": token, "path": "out/new/file", "content": "x"}, []string{"leads out of the root"}},
		{"write/not covered", "write", args{"token": token, "path": "b", "content": "x"}, []string{`"b" is not covered`, "covers only a, fencegate.db, fencegate.db-wal, hard, nothing, plain"}},
		{"write/hard link", "write", args{"token": token, "path": "hard", "content": "x"}, []string{"2 hard links", "old content"}},
		{"write/hard link delete", "write", args{"token": token, "path": "hard", "mode": "delete"}, []string{"2 hard links"}},
		{"write/plain resource", "write", args{"token": rtoken, "path": "a", "content": "x"}, []string{"claims no paths", "for r"}},
		{"write/fifo", "write", args{"token": token, "path": "fifo", "content": "x"}, []string{"special file", "named pipe"}},
		{"write/directory", "write", args{"token": token, "path": "dir", "content": "x"}, []string{"is a directory"}},
		{"write/file as dir", "write", args{"token": token, "path": "plain/x", "content": "x"}, []string{"not a directory"}},
		{"write/database", "write", args{"token": token, "path": "fencegate.db", "content": "x"}, []string{"own database"}},
		{"write/database wal", "write", args{"token": token, "path": "fencegate.db-wal", "content": "x"}, []string{"own database"}},
		{"write/another holder's token", "write", args{"token": "fg1:1:r:agent-b", "path": "a", "content": "x"}, []string{`"agent-b"'s`, `this server is "agent-a"`}},
		{"renew/another holder's token", "renew", args{"token": "fg1:1:r:agent-b"}, []string{`"agent-b"'s`}},
		{"release/another holder's token", "release", args{"token": "fg1:1:r:agent-b"}, []string{`"agent-b"'s`}},
		{"write/unknown resource", "write", args{"token": "fg1:1:never:agent-a", "path": "a", "content": "x"}, []string{"claims no paths"}},
		{"write/unknown path resource", "write", args{"token": "fg1:1:path%3Azzz:agent-a", "path": "zzz", "content": "x"}, []string{"never leased", "claim it first"}},
		{"write/unknown resource, sql", "write", args{"token": "fg1:1:never:agent-a", "sql": []any{args{"query": "SELECT 1"}}}, []string{"--allow-sql"}},
		{"write/stale token, bad path", "write", args{"token": stale, "path": "../x", "content": "x"}, []string{`contains ".."`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			callErr(t, s.ClientSession, c.tool, c.args, c.msg...)
		})
	}

	// Nothing was written: no refusals, the
	// files as they were, nothing new in the root.
	st := callOK[ops.StatusReport](t, s.ClientSession, "status", args{})
	if len(st.Locks) == 0 || len(st.Refusals) != 0 {
		t.Fatalf("status after bad input: %+v", st)
	}
	wantFile(t, secret, "secret")
	wantFile(t, filepath.Join(root, "plain"), "x")
	wantFile(t, filepath.Join(root, "hard2"), "h")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "fencegate.db") {
			names = append(names, e.Name())
		}
	}
	if want := []string{"dir", "fifo", "hard", "hard2", "link", "out", "passwd", "plain"}; !slices.Equal(names, want) {
		t.Fatalf("root holds %q, want %q", names, want)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("outside holds %v", ents)
	}

	// Without --root there are no file writes.
	noRoot := newMCP(t, filepath.Join(dir, "other.db"), Config{Holder: "agent-c"})
	tc := callOK[claimOutput](t, noRoot.ClientSession, "claim", args{"resource": "r"}).Token
	callErr(t, noRoot.ClientSession, "write", args{"token": tc, "path": "a", "content": "x"}, "--root")
	callErr(t, noRoot.ClientSession, "claim", args{"paths": []string{"a"}}, "--root")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A token that was never issued (forged, mistyped, made up by a model) is
// refused and logged without raising the floor; assert calls it never
// issued; release changes nothing.
func TestMCPStaleToken(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newMCP(t, dbtestSQLite(t), Config{Holder: "agent-a", Root: root})
	real := callOK[claimOutput](t, s.ClientSession, "claim", args{"paths": []string{"f"}})
	forged := fence.Token{Resource: "path:f", Holder: "agent-a", Fence: real.Fence + 10}.String()

	res := call(t, s.ClientSession, "write", args{"token": forged, "path": "f", "content": "x"})
	if !res.IsError {
		t.Fatalf("forged write: %s", text(res))
	}
	contains(t, "forged write", text(res), "never issued", "nothing was written")
	if out := decode[writeOutput](t, res); out.Refusal == nil || !out.Refusal.NotIssued {
		t.Fatalf("forged write: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(root, "f")); !os.IsNotExist(err) {
		t.Fatalf("forged write left a file: %v", err)
	}
	if as := callOK[assertOutput](t, s.ClientSession, "assert", args{"token": forged}); as.Current || as.Floor != real.Fence {
		t.Fatalf("assert forged: %+v", as)
	}
	if rl := callOK[releaseOutput](t, s.ClientSession, "release", args{"token": forged}); rl.Released {
		t.Fatalf("release forged: %+v", rl)
	}
	// The real lease is untouched, and its writes land.
	callOK[writeOutput](t, s.ClientSession, "write", args{"token": real.Token, "path": "f", "content": "x"})
}

// The MCP SDK is the command's alone: no library package reaches it.
func TestMCPSDKStaysInTheCommand(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "../../../gate", "../../../lease", "../../../sqlstore/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/fencegate/fencegate/sqlstore") {
		t.Fatalf("go list listed no fencegate package:\n%s", out)
	}
	for _, line := range strings.Fields(string(out)) {
		if strings.Contains(line, "modelcontextprotocol") || strings.Contains(line, "jsonschema-go") {
			t.Errorf("a library package depends on %s", line)
		}
	}
}

// A write whose request is cancelled after the gate admitted it, before the
// rename, leaves the file as it was and no temp file behind.
func TestMCPWriteCancelled(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target := filepath.Join(root, "f")
	must(t, os.WriteFile(target, []byte("old"), 0o644))
	reached := make(chan struct{})
	var once sync.Once
	s := newMCP(t, dbtestSQLite(t), Config{Holder: "agent-a", Root: root, beforeRename: func(ctx context.Context) {
		once.Do(func() {
			close(reached)
			<-ctx.Done() // the client's cancellation, sent over the protocol
		})
	}})
	token := callOK[claimOutput](t, s.ClientSession, "claim", args{"paths": []string{"f"}}).Token

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, callParams("write", args{"token": token, "path": "f", "content": "new"}))
		done <- err
	}()
	<-reached
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	// The server's answer to the cancelled call is not seen by the client;
	// its log says what happened. Wait for it, then look at the disk.
	waitFor(t, func() bool { return strings.Contains(s.stderr.String(), "cancelled before the rename") })
	wantFile(t, target, "old")
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Fatalf("root holds %v, want only f", ents)
	}
	// The lease and the database are as they were: the next write lands.
	callOK[writeOutput](t, s.ClientSession, "write", args{"token": token, "path": "f", "content": "newer"})
	wantFile(t, target, "newer")
}

// waitFor polls cond, for state that another goroutine or process changes
// with no way to tell us.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Issue 36, item 2: the MCP server judges a DSN as the command does: one
// shaped like another database's is refused, never opened as a SQLite file
// in the working directory, and the error hides its password.
func TestMCPRefusesForeignDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const pw = "SeCrEt123"
	for _, dsn := range []string{"mode=rw cache=shared", "sqlite:x.db", "app:" + pw + "@tcp(db:3306)/app", "app:" + pw + "@db/app"} {
		s, err := New(t.Context(), Config{DSN: dsn, Holder: "agent-a"})
		if err == nil {
			s.Close()
			t.Errorf("New with DSN %q opened", dsn)
		} else if !errors.Is(err, sqlstore.ErrInvalidDSN) || strings.Contains(err.Error(), pw) {
			t.Errorf("New with DSN %q = %v; want ErrInvalidDSN without the password", dsn, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("DSNs became SQLite files: %v", entries)
	}
}
