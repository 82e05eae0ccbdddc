package fencegatecli

import (
	"context"
	"fmt"
)

func fenceCommand() *command {
	cmd := &command{
		name:     "fence",
		synopsis: "after promoting an asynchronous replica: move the fence sequence past every fence issued",
		usage:    "fence advance [--margin 1000]",
		help: `fence advance moves the fence sequence so that the next grant's fence is
above every fence the database knows of (floors, leases, the sequence
itself) plus --margin, and prints that lowest next fence on stdout.

Run it after a failover to an asynchronous replica, before any client
reaches the promoted database: the old primary may have granted fences the
replica never received, and issuing one again would give two holders the
same fence. --margin is how many fences the old primary could have issued
in the replication lag; err high, fences are cheap. Grants, renewals and
writes the replica lost stay lost: only synchronous replication keeps them.
See docs/RELIABILITY.md for the runbook.`,
		db:   true,
		args: true,
	}
	margin := cmd.flagSet().Int64("margin", 1000, "fences the old primary could have issued that the replica never received")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		if len(args) != 1 || args[0] != "advance" {
			return usagef("want the subcommand advance, got %q", args)
		}
		if *margin < 0 {
			return usagef("--margin must not be negative, got %d", *margin)
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		next, err := b.Coord.AdvanceFences(ctx, *margin)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, next)
		c.logf(cmd, "the next grant's fence is at least %d", next)
		return nil
	}
	return cmd
}
