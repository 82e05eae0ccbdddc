package main

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
		run: cmdVersion,
	}
}

func cmdVersion(_ context.Context, c *cli, cmd *command, args []string) int {
	fs := c.flags(cmd)
	args, code, ok := c.parse(cmd, fs, args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return c.usageError(cmd, fs, "unexpected arguments %q", args)
	}
	fmt.Fprintln(c.stdout, version())
	return exitOK
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
