package leftover

import (
	"testing"
	"time"
)

func TestStale(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for name, want := range map[string]bool{
		Name("fgtest", now.Add(-MaxAge-time.Second)): true,
		Name("fgtest", now.Add(-MaxAge+time.Second)): false, // another run's, maybe still going
		Name("fgtest", now):                          false,
		Name("fgtest", now.Add(time.Hour)):           false, // a clock ahead of ours
		Name("fgrel", now.Add(-3*MaxAge)):            false, // not this prefix
		"fgtest_0a1b2c3d4e5f":                        false, // the old shape: its age is unknown
		"fgtest_1500000000_0a1b2c":                   false,
		"fgtest_1500000000_0a1b2c3d4e5g":             false,
		"fgtest_15x0000000_0a1b2c3d4e5f":             false,
		"fgtest_1500000000_0a1b2c3d4e5f":             true,
		"fgtestx_1500000000_0a1b2c3d4e5f":            false,
		"app_1500000000_0a1b2c3d4e5f":                false,
	} {
		if got := Stale(name, "fgtest", now); got != want {
			t.Errorf("Stale(%q) = %v, want %v", name, got, want)
		}
	}
}
