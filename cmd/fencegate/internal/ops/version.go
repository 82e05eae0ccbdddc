package ops

import (
	"fmt"
	"runtime/debug"
)

// Version describes the build: the main module's Version, and the VCS
// revision when the build recorded one.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "fencegate (unknown Version)"
	}
	v := "fencegate " + info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (revision %.12s%s)", rev, modified)
	}
	return v + ", " + info.GoVersion
}
