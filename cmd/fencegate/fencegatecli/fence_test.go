package fencegatecli

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/internal/dbtest"
)

// fence advance moves the sequence past the highest fence plus the margin,
// and the next claim is above it.
func TestFenceAdvance(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "fg.db"),
		"postgres": dbtest.PostgresSchemaURL(t),
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{envDSN: dsn}
			a := parseToken(t, fg(t, env, "claim", "--lock", "l", "--holder", "a", "--ttl", "1m").want(t, exitOK).stdout)
			r := fg(t, env, "fence", "advance", "--margin", "50").want(t, exitOK)
			next, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
			if err != nil || next < a.Fence+51 {
				t.Fatalf("fence advance after fence %d printed %q, want at least %d", a.Fence, r.stdout, a.Fence+51)
			}
			b := parseToken(t, fg(t, env, "claim", "--lock", "m", "--holder", "b", "--ttl", "1m").want(t, exitOK).stdout)
			if b.Fence < next {
				t.Errorf("claim after fence advance got fence %d, want at least %d", b.Fence, next)
			}
			fg(t, env, "fence", "advance", "--margin", "-1").want(t, exitUsage)
			fg(t, env, "fence").want(t, exitUsage)
		})
	}
}

// status warns, in words and in JSON, when Postgres runs with
// synchronous_commit off; SQLite has nothing to warn of.
func TestStatusDurabilityWarnings(t *testing.T) {
	t.Parallel()
	env := map[string]string{envDSN: dbtest.PostgresSchemaURL(t) + "&synchronous_commit=off"}
	r := fg(t, env, "status").want(t, exitOK)
	contains(t, "status", r.stdout, "warning: synchronous_commit is off")
	var rep ops.StatusReport
	if err := json.Unmarshal([]byte(fg(t, env, "status", "--json").want(t, exitOK).stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "synchronous_commit is off") {
		t.Errorf("status --json warnings %q", rep.Warnings)
	}
	sqlite := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
	if out := fg(t, sqlite, "status", "--json").want(t, exitOK).stdout; !strings.Contains(out, `"warnings": []`) {
		t.Errorf("SQLite status --json: %s", out)
	}
}
