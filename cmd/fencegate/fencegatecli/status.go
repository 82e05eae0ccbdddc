package fencegatecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
)

func statusCommand() *command {
	cmd := &command{
		name:     "status",
		synopsis: "show every lock (holder, fence, floor, expiry) and recent refusals",
		usage:    "status [--json] [--lock NAME] [--refusals 10]",
		help: `Show every lock fencegate knows: its lease (state, holder, fence, expiry in
the database's clock) and the gate's floor, the guarded tables (Postgres:
'fencegate guard'), then the most recent refusals from the rejection log,
newest first. --json prints the same as one JSON object: {"locks": [...],
"refusals": [...], "warnings": [...], "guarded_tables": [...]}.

It first warns of settings under which the database can lose a grant it
acknowledged, and so issue its fence again: on Postgres synchronous_commit
off and standbys that replicate asynchronously (after promoting one, run
'fencegate fence advance'), on SQLite synchronous=NORMAL. --json lists them
as "warnings".

Lease states: held (live), expired, released, and none (a floor without a
lease: fences from another coordinator). Like 'check', this is a snapshot:
it can be stale by the time you read it. A SQLite database that cannot be
written (a read-only directory or mount) is read read-only, and status says
so; without its -wal file there, SQLite reads the file as it is (immutable).`,
		db: true,
	}
	fs := cmd.flagSet()
	asJSON := fs.Bool("json", false, "print JSON")
	lock := fs.String("lock", "", "show only this lock")
	refusals := fs.Int("refusals", 10, "how many recent refusals to show")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		if *lock != "" {
			if err := checkLock(*lock); err != nil {
				return err
			}
		}
		if *refusals < 0 {
			return usagef("--refusals must not be negative, got %d", *refusals)
		}
		b, err := c.readDatabase(ctx, cmd)
		if err != nil {
			return err
		}
		report, err := ops.ReadStatus(ctx, b, *lock, *refusals)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		}
		printStatus(c.stdout, report, *lock)
		return nil
	}
	return cmd
}

// printStatus prints report, of lock alone unless lock is "".
func printStatus(w io.Writer, report ops.StatusReport, lock string) {
	for _, warning := range report.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if len(report.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	switch {
	case len(report.Locks) == 0 && lock != "":
		fmt.Fprintf(w, "Lock %s has no lease and no floor ('fencegate status' lists every lock).\n", lock)
	case len(report.Locks) == 0:
		fmt.Fprintln(w, "No locks yet.")
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LOCK\tSTATE\tHOLDER\tFENCE\tFLOOR\tEXPIRES")
		for _, r := range report.Locks {
			fence, floor, expires, holder := "-", "-", "-", r.Holder
			if r.Fence > 0 {
				fence = fmt.Sprint(r.Fence)
			}
			if r.Floor > 0 {
				floor = fmt.Sprint(r.Floor)
				if r.FloorHolder != r.Holder {
					floor += fmt.Sprintf(" (%s)", r.FloorHolder)
				}
			}
			if holder == "" {
				holder = "-"
			}
			if r.ExpiresAt != "" {
				if d := r.ExpiresIn; d > 0 {
					expires = fmt.Sprintf("in %s (%s)", ops.Dur(d), r.ExpiresAt)
				} else {
					expires = fmt.Sprintf("%s ago (%s)", ops.Dur(-d), r.ExpiresAt)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Lock, r.State, holder, fence, floor, expires)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(report.Guarded) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GUARDED TABLE\tRESOURCE\tSTATE")
		for _, g := range report.Guarded {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Table, g.ResourceText(), g.StateText())
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(report.Refusals) == 0 {
		fmt.Fprintln(w, "No refusals.")
		return
	}
	fmt.Fprintln(w, "Recent refusals, newest first:")
	for _, r := range report.Refusals {
		fmt.Fprintf(w, "  %s\n", r.Text())
	}
}
