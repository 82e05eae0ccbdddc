package fencegatecli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

func migrateCommand() *command {
	cmd := &command{
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
		db: true, args: true,
	}
	yes := cmd.flagSet().Bool("yes", false, "confirm 'down'")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		action := "up"
		switch len(args) {
		case 0:
		case 1:
			action = args[0]
		default:
			return usagef("want one of up, down, status; got %q", args)
		}
		switch action {
		case "up", "status":
		case "down":
			if !*yes {
				return usagef("'down' drops every lease, floor and refusal, and restarts fences at 1; add --yes to confirm")
			}
		default:
			return usagef("unknown action %q: want up, down or status", action)
		}
		b, err := c.database(ctx, false)
		if err != nil {
			return err
		}
		return c.migrate(ctx, cmd, b.Driver, action)
	}
	return cmd
}

// migrate applies action (up, down or status) to d's migrations, and
// reports the schema's state.
func (c *cli) migrate(ctx context.Context, cmd *command, d sqlopen.Driver, action string) error {
	switch action {
	case "up":
		if err := d.Migrate(ctx); err != nil {
			return err
		}
	case "down":
		if err := sqlstore.MigrateDown(ctx, d.DB(), d.Migrations()); err != nil {
			return err
		}
	}
	st, err := sqlstore.MigrateStatus(ctx, d.DB(), d.Migrations())
	if err != nil {
		return err
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
		return nil
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
	return nil
}
