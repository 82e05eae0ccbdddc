package fencegatecli

import (
	"context"
	"fmt"

	"github.com/fencegate/fencegate/lease"
)

func pruneCommand() *command {
	cmd := &command{
		name:     "prune",
		synopsis: "delete request, waiter and (if asked) rejection rows that can no longer matter",
		usage:    "prune [--keep-rejections N] [--request-age D] [--batch N]",
		help: `Delete, in batches, rows of fencegate's tables that nothing needs any more:

  - request rows older than the longest term a request could ask for (the
    coordinator's MaxTTL, 24h, plus a minute): a late retry of such a
    request is refused by its holder's send instant, not by its row;
  - expired waiter rows (their waiters are out of the queue already);
  - with --keep-rejections N, all but the newest N rows of the rejection
    log. Off by default: the log is the record of refused writes.

Floors are never pruned: a deleted floor would let a fence below it in
again, so a stale holder's write could commit. Leases are not touched.

On Postgres the space of deleted rows is reused after a VACUUM: keep
autovacuum on, or vacuum the tables after pruning.`,
		db: true,
	}
	keep := cmd.flagSet().Int64("keep-rejections", 0, "keep only the newest N rejections (0: keep all)")
	age := cmd.flagSet().Duration("request-age", 0, "prune request rows older than this (at least the MaxTTL, 24h; 0: 24h1m)")
	batch := cmd.flagSet().Int("batch", 1000, "rows deleted per statement")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		if *keep < 0 || *batch < 1 || *age < 0 {
			return usagef("--keep-rejections, --request-age must not be negative and --batch must be at least 1")
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		res, err := b.Coord.Prune(ctx, lease.PruneOptions{RequestAge: *age, KeepRejections: *keep, BatchSize: *batch})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "pruned %d requests, %d waiters, %d rejections\n", res.Requests, res.Waiters, res.Rejections)
		return nil
	}
	return cmd
}
