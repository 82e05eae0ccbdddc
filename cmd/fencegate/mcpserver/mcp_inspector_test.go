package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// envInspector turns on TestMCPInspector, which needs npx and the npm
// registry (or npm's cache).
const envInspector = "FENCEGATE_TEST_INSPECTOR"

// inspectorArgs runs the MCP Inspector's command line (a third-party
// client) under the Node it needs, whatever Node is installed.
var inspectorArgs = []string{"-y", "-p", "node@22.23.3", "-p", "@modelcontextprotocol/inspector@2.12.0", "--", "mcp-inspector", "--cli"}

// The server works with a client that is not the go-sdk: the MCP
// Inspector lists the tools, claims paths, writes a file, and gets a tool
// error (its exit status 5) for a write under a plain resource's token, a
// claim of a directory with a file in it, a path the claim does not cover
// and a path that leaves the root.
func TestMCPInspector(t *testing.T) {
	if os.Getenv(envInspector) != "1" {
		t.Skipf("set %s=1 to run the MCP Inspector (needs npx and the npm registry)", envInspector)
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("%s=1 but npx is missing: %v", envInspector, err)
	}
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.Mkdir(root, 0o755))
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fencegate": map[string]any{
		"command": binary(t),
		"args":    []string{"mcp", "--root", root, "--dsn", filepath.Join(dir, "fencegate.db"), "--holder", "inspector"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "cfg.json")
	must(t, os.WriteFile(cfgFile, cfg, 0o600))

	inspect := func(wantCode int, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // the first run downloads Node and the Inspector
		defer cancel()
		cmd := exec.CommandContext(ctx, npx, append(append(inspectorArgs, "--config", cfgFile, "--server", "fencegate"), args...)...)
		cmd.Env = cleanEnv(nil)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("mcp-inspector %q: %v\n%s", args, err, stderr.String())
		}
		if code != wantCode {
			t.Fatalf("mcp-inspector %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}
	call := func(wantCode int, tool string, args any) map[string]any {
		t.Helper()
		a, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		out := inspect(wantCode, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", string(a))
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, out)
		}
		return res
	}

	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if out := inspect(0, "--method", "tools/list"); json.Unmarshal(out, &list) != nil || len(list.Tools) != 7 { // claim, renew, release, status, write, and assert under its two names
		t.Fatalf("tools/list: %s", out)
	}
	// A claim of a plain resource writes no files: a tool error.
	claim, _ := call(0, "claim", map[string]any{"resource": "r"})["structuredContent"].(map[string]any)
	if res := call(5, "write", map[string]any{"token": claim["token"], "path": "a.txt", "content": "x"}); res["isError"] != true {
		t.Fatalf("write under a plain resource: %v", res)
	}
	// A claim of paths: one identity each, the token covering them.
	claim, _ = call(0, "claim", map[string]any{"paths": []string{"./a.txt", "docs/"}})["structuredContent"].(map[string]any)
	token, _ := claim["token"].(string)
	if paths, _ := claim["paths"].([]any); claim["claimed"] != true || token == "" || len(paths) != 2 || paths[0] != "a.txt" || paths[1] != "docs/" {
		t.Fatalf("claim: %v", claim)
	}
	if res := call(5, "claim", map[string]any{"paths": []string{"docs/", "docs/x"}}); res["isError"] != true {
		t.Fatalf("a claim of a directory and a file in it: %v", res)
	}
	if res := call(5, "write", map[string]any{"token": token, "path": "b.txt", "content": "x"}); res["isError"] != true {
		t.Fatalf("a write the claim does not cover: %v", res)
	}
	if w, _ := call(0, "write", map[string]any{"token": token, "path": "a.txt", "content": "from the inspector"})["structuredContent"].(map[string]any); w["written"] != true {
		t.Fatalf("write: %v", w)
	}
	wantFile(t, filepath.Join(root, "a.txt"), "from the inspector")
	if res := call(5, "write", map[string]any{"token": token, "path": "../x", "content": "x"}); res["isError"] != true {
		t.Fatalf("escaping write: %v", res)
	}
}
