package fencegatecli

import (
	"path/filepath"
	"strconv"
	"testing"
)

// elect runs its command while leading, exits with its status and resigns;
// leader prints the last term and exits 3 once it is over.
func TestElectExitStatus(t *testing.T) {
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
	t.Setenv(envHelper, "exit")
	r := fg(t, env, "leader", "e").want(t, exitHeld)
	contains(t, "stderr", r.stderr, "e never had a leader")
	for _, code := range []int{0, 1, 7} {
		t.Setenv(envCode, strconv.Itoa(code))
		fg(t, env, "elect", "--name", "e", "--holder", "me", "--", testExe(t)).want(t, code)
	}
	r = fg(t, env, "leader", "e").want(t, exitHeld)
	contains(t, "stdout", r.stdout, "me\tfence 3\tuntil ")
	contains(t, "stderr", r.stderr, `the term of "me" (fence 3) is over`)
	r = fg(t, env, "leader", "--json", "e").want(t, exitHeld)
	contains(t, "stdout", r.stdout, `{"name":"e","leading":false,"holder":"me","fence":3,"until":"`)

	// Bad input: a clear usage error, and no database is touched.
	for _, args := range [][]string{
		{"elect", "--", testExe(t)},
		{"elect", "--name", "e"},
		{"elect", "--name", "e", "--ttl", "1ms", "--", testExe(t)},
		{"leader"},
		{"leader", "a", "b"},
	} {
		fg(t, map[string]string{envDSN: filepath.Join(t.TempDir(), "never.db")}, args...).want(t, exitUsage)
	}
}
