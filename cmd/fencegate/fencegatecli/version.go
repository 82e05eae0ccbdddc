package fencegatecli

import (
	"context"
	"fmt"
	"runtime/debug"
)

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "print the version fencegate was built from",
		usage:    "version",
		help: `Print the module version this binary was built from ("(devel)" for a
build from a checkout, with its VCS revision), as does 'fencegate --version'.`,
		exec: func(_ context.Context, c *cli, _ []string) error {
			fmt.Fprintln(c.stdout, version())
			return nil
		},
	}
}

// version describes the build: the main module's version, and the VCS
// revision when the build recorded one.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "fencegate (unknown version)"
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
