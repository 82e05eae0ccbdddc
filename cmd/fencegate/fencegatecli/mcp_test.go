package fencegatecli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMCPFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "never.db")}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"mcp", "--ttl", "0s"}, "--ttl must be at least 100ms"},
		{[]string{"mcp", "--max-file-bytes", "0"}, "--max-file-bytes must be positive"},
		{[]string{"mcp", "--holder", "a\nb"}, "control character"},
		{[]string{"mcp", "extra"}, "unexpected arguments"},
	} {
		r := fg(t, env, c.args...).want(t, exitUsage)
		contains(t, "stderr", r.stderr, c.msg, "usage: fencegate mcp")
	}
	if _, err := os.Stat(env[envDSN]); !os.IsNotExist(err) {
		t.Fatalf("bad flags created the database: %v", err)
	}
	r := fg(t, env, "mcp", "--help").want(t, exitOK)
	contains(t, "mcp --help", r.stdout, "-dsn", "-holder", "-root", "-allow-sql", "-ttl", "-max-file-bytes", `"mcpServers"`, "bypass")
}
