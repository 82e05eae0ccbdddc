package fencegatecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

func statusCommand() *command {
	cmd := &command{
		name:     "status",
		synopsis: "show every lock (holder, fence, floor, expiry) and recent refusals",
		usage:    "status [--json] [--lock NAME] [--refusals 10]",
		help: `Show every lock fencegate knows: its lease (state, holder, fence, expiry in
the database's clock) and the gate's floor, then the most recent refusals
from the rejection log, newest first. --json prints the same as one JSON
object: {"locks": [...], "refusals": [...], "warnings": [...]}.

It first warns of settings under which the database can lose a grant it
acknowledged, and so issue its fence again: on Postgres synchronous_commit
off and standbys that replicate asynchronously (after promoting one, run
'fencegate fence advance'), on SQLite synchronous=NORMAL. --json lists them
as "warnings".

Lease states: held (live), expired, released, and none (a floor without a
lease: fences from another coordinator). Like 'check', this is a snapshot:
it can be stale by the time you read it.`,
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
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		report, err := readStatus(ctx, b, *lock, *refusals)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		}
		printStatus(c.stdout, report)
		return nil
	}
	return cmd
}

// statusReport is what status prints, and its JSON form.
type statusReport struct {
	Locks    []lockReport    `json:"locks"`
	Refusals []refusalReport `json:"refusals"`
	// Warnings name settings under which the database can lose a grant it
	// acknowledged (Postgres: synchronous_commit off, asynchronous
	// standbys; SQLite: synchronous=NORMAL); empty when there are none.
	Warnings []string `json:"warnings"`
}

// lockReport is one lock's lease and floor.
type lockReport struct {
	Lock        string     `json:"lock"`
	State       string     `json:"state"` // held, expired, released, none
	Holder      string     `json:"holder,omitempty"`
	Fence       int64      `json:"fence,omitempty"`
	GrantedAt   *time.Time `json:"granted_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RemainingMS int64      `json:"remaining_ms"` // 0 unless held
	Floor       int64      `json:"floor"`        // 0: no fenced write or grant yet
	FloorHolder string     `json:"floor_holder,omitempty"`

	now time.Time // the database's clock at the read
}

// refusalReport is one record of the rejection log.
type refusalReport struct {
	Seq         int64     `json:"seq"`
	Lock        string    `json:"lock"`
	Fence       int64     `json:"fence"`
	Holder      string    `json:"holder"`
	Floor       int64     `json:"floor"`
	FloorHolder string    `json:"floor_holder"`
	NotIssued   bool      `json:"not_issued"`
	At          time.Time `json:"at"`
}

// readStatus reads the leases, floors and recent refusals, of one lock or
// of all.
func readStatus(ctx context.Context, b *backend, lock string, refusals int) (statusReport, error) {
	var (
		leases []lease.Status
		floors []gate.Floor
	)
	if lock != "" {
		st, err := b.coord.Status(ctx, lock)
		if err != nil {
			return statusReport{}, err
		}
		if st.Fence > 0 {
			leases = append(leases, st)
		}
		f, err := b.gate.Floor(ctx, lock)
		switch {
		case err == nil:
			floors = append(floors, f)
		case !errors.Is(err, sqlstore.ErrNotFound):
			return statusReport{}, err
		}
	} else {
		var err error
		if leases, err = b.coord.List(ctx); err != nil {
			return statusReport{}, err
		}
		if floors, err = b.gate.Floors(ctx); err != nil {
			return statusReport{}, err
		}
	}

	byLock := map[string]*lockReport{}
	get := func(name string) *lockReport {
		if r, ok := byLock[name]; ok {
			return r
		}
		r := &lockReport{Lock: name, State: "none"}
		byLock[name] = r
		return r
	}
	for _, st := range leases {
		r := get(st.Resource)
		r.Holder, r.Fence, r.now = st.Holder, st.Fence, st.Now.Time()
		granted, expires := st.GrantedAt.Time(), st.ExpiresAt.Time()
		r.GrantedAt, r.ExpiresAt = &granted, &expires
		switch {
		case st.Held:
			r.State, r.RemainingMS = "held", st.Remaining.Milliseconds()
		case st.Released:
			r.State = "released"
		default:
			r.State = "expired"
		}
	}
	for _, f := range floors {
		r := get(f.Resource)
		r.Floor, r.FloorHolder = f.Floor, f.Holder
	}
	report := statusReport{Locks: []lockReport{}, Refusals: []refusalReport{}, Warnings: []string{}}
	if d, ok := b.driver.(sqlstore.DurabilityReporter); ok {
		warnings, err := d.DurabilityWarnings(ctx)
		if err != nil {
			return statusReport{}, err
		}
		report.Warnings = append(report.Warnings, warnings...)
	}
	for _, r := range byLock {
		report.Locks = append(report.Locks, *r)
	}
	slices.SortFunc(report.Locks, func(a, b lockReport) int {
		switch {
		case a.Lock < b.Lock:
			return -1
		case a.Lock > b.Lock:
			return 1
		}
		return 0
	})

	if refusals > 0 {
		rejections, err := b.gate.Rejections(ctx, gate.RejectionQuery{Resource: lock, Limit: refusals, Newest: true})
		if err != nil {
			return statusReport{}, err
		}
		for _, r := range rejections {
			report.Refusals = append(report.Refusals, refusalOf(r))
		}
	}
	return report, nil
}

// refusalOf is a rejection record as status reports it.
func refusalOf(r gate.Rejection) refusalReport {
	return refusalReport{
		Seq: r.Seq, Lock: r.Resource, Fence: r.Fence, Holder: r.Holder,
		Floor: r.Floor, FloorHolder: r.FloorHolder, NotIssued: r.NotIssued, At: r.At,
	}
}

func printStatus(w io.Writer, report statusReport) {
	for _, warning := range report.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if len(report.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	if len(report.Locks) == 0 {
		fmt.Fprintln(w, "No locks yet.")
	} else {
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
			if r.ExpiresAt != nil {
				if d := r.ExpiresAt.Sub(r.now); d > 0 {
					expires = fmt.Sprintf("in %s (%s)", dur(d), stamp(*r.ExpiresAt))
				} else {
					expires = fmt.Sprintf("%s ago (%s)", dur(-d), stamp(*r.ExpiresAt))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Lock, r.State, holder, fence, floor, expires)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(report.Refusals) == 0 {
		fmt.Fprintln(w, "No refusals.")
		return
	}
	fmt.Fprintln(w, "Recent refusals, newest first:")
	for _, r := range report.Refusals {
		fmt.Fprintf(w, "  %s\n", rejectionText(gate.Rejection{
			Seq: r.Seq, Resource: r.Lock, Fence: r.Fence, Holder: r.Holder,
			Floor: r.Floor, FloorHolder: r.FloorHolder, NotIssued: r.NotIssued, At: r.At,
		}))
	}
}
