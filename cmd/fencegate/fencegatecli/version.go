package fencegatecli

import (
	"context"
	"fmt"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
)

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "print the version fencegate was built from",
		usage:    "version",
		help: `Print the module version this binary was built from ("(devel)" for a
build from a checkout, with its VCS revision), as does 'fencegate --version'.`,
		exec: func(_ context.Context, c *cli, _ []string) error {
			fmt.Fprintln(c.stdout, ops.Version())
			return nil
		},
	}
}
