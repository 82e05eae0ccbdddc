package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/fencegate/fencegate/sqlstore"
)

func migrateCommand() *command {
	return &command{
		name:     "migrate",
		synopsis: "apply, roll back or list fencegate's schema migrations",
		usage:    "migrate [up | down --yes | status]",
		help: `Manage fencegate's tables (prefixed fencegate_, with goose's version table
fencegate_goose_version, apart from your own).

  up      apply pending migrations (the default). Every other command does
          this by itself, so it is needed only to set a database up ahead.
  status  list the migrations and whether each is applied.
  down    drop fencegate's tables and everything in them. The fence sequence
          starts again at 1, so tokens issued before could be admitted
          again: only for a database no holder uses. Requires --yes.`,
		run: cmdMigrate,
	}
}

func cmdMigrate(ctx context.Context, c *cli, cmd *command, args []string) int {
	fs := c.flags(cmd)
	yes := fs.Bool("yes", false, "confirm 'down'")
	c.dsnFlag(fs)
	args, code, ok := c.parse(cmd, fs, args)
	if !ok {
		return code
	}
	action := "up"
	switch len(args) {
	case 0:
	case 1:
		action = args[0]
	default:
		return c.usageError(cmd, fs, "want one of up, down, status; got %q", args)
	}
	switch action {
	case "up", "status":
	case "down":
		if !*yes {
			return c.usageError(cmd, fs, "'down' drops every lease, floor and refusal, and restarts fences at 1; add --yes to confirm")
		}
	default:
		return c.usageError(cmd, fs, "unknown action %q: want up, down or status", action)
	}
	b, err := c.open(ctx, false)
	if err != nil {
		return c.fail(cmd, err)
	}
	defer b.Close()
	d := b.driver

	switch action {
	case "up":
		if err := d.Migrate(ctx); err != nil {
			return c.fail(cmd, err)
		}
	case "down":
		if err := sqlstore.MigrateDown(ctx, d.DB(), d.Migrations()); err != nil {
			return c.fail(cmd, err)
		}
	}
	st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Migrations())
	if err != nil {
		return c.fail(cmd, err)
	}
	if action != "status" {
		var version int64
		applied := 0
		for _, m := range st {
			if m.Applied {
				version, applied = max(version, m.Version), applied+1
			}
		}
		c.logf(cmd, "%s: %d of %d migrations applied (schema version %d)", action, applied, len(st), version)
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tMIGRATION")
	for _, m := range st {
		state := "pending"
		if m.Applied {
			state = "applied"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, state, m.Source)
	}
	tw.Flush()
	return exitOK
}
