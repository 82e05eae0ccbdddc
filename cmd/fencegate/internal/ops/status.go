package ops

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// StatusReport is what status prints, and its JSON form.
type StatusReport struct {
	Locks    []LockReport    `json:"locks"`
	Refusals []RefusalReport `json:"refusals"`
	// Warnings name settings under which the database can lose a grant it
	// acknowledged (Postgres: synchronous_commit off, asynchronous
	// standbys; SQLite: synchronous=NORMAL); empty when there are none.
	Warnings []string `json:"warnings"`
	// Guarded lists the guarded tables (package guard; Postgres only,
	// empty elsewhere), a disabled guard's trigger with enabled false.
	Guarded []GuardReport `json:"guarded_tables"`
}

// LockReport is one lock's lease and floor.
type LockReport struct {
	Lock        string `json:"lock"`
	Path        string `json:"path,omitempty"` // for a path resource: the file, or the directory ending in "/"
	State       string `json:"state"`          // held, expired, released, none
	Holder      string `json:"holder,omitempty"`
	Fence       int64  `json:"fence,omitempty"`
	GrantedAt   string `json:"granted_at,omitempty"` // Stamp's layout
	ExpiresAt   string `json:"expires_at,omitempty"`
	RemainingMS int64  `json:"remaining_ms"` // 0 unless held
	Floor       int64  `json:"floor"`        // 0: no fenced write or grant yet
	FloorHolder string `json:"floor_holder,omitempty"`

	// ExpiresIn is the time from the read to the expiry, in the
	// database's clock: negative once expired (0 without a lease).
	ExpiresIn time.Duration `json:"-"`
}

// RefusalReport is one record of the rejection log.
type RefusalReport struct {
	Seq         int64  `json:"seq"`
	Lock        string `json:"lock"`
	Fence       int64  `json:"fence"`
	Holder      string `json:"holder"`
	Floor       int64  `json:"floor"`
	FloorHolder string `json:"floor_holder"`
	NotIssued   bool   `json:"not_issued"`
	At          string `json:"at"` // Stamp's layout
}

// ReadStatus reads the leases, floors and recent refusals, of one lock or
// of all.
func ReadStatus(ctx context.Context, b *Backend, lock string, refusals int) (StatusReport, error) {
	var (
		leases []lease.Status
		floors []sqlstore.Floor
	)
	if lock != "" {
		st, err := b.Coord.Status(ctx, lock)
		if err != nil {
			return StatusReport{}, err
		}
		if st.Fence > 0 {
			leases = append(leases, st)
		}
		f, err := b.Gate.Floor(ctx, lock)
		switch {
		case err == nil:
			floors = append(floors, f)
		case !errors.Is(err, sqlstore.ErrNotFound):
			return StatusReport{}, err
		}
	} else {
		var err error
		if leases, err = b.Coord.List(ctx); err != nil {
			return StatusReport{}, err
		}
		if floors, err = b.Gate.Floors(ctx); err != nil {
			return StatusReport{}, err
		}
	}

	byLock := map[string]*LockReport{}
	get := func(name string) *LockReport {
		if r, ok := byLock[name]; ok {
			return r
		}
		r := &LockReport{Lock: name, State: "none"}
		if p, ok := PathOf(name); ok { // PathOf returns a plain name whole
			r.Path = p
		}
		byLock[name] = r
		return r
	}
	for _, st := range leases {
		r := get(st.Resource)
		r.Holder, r.Fence, r.ExpiresIn = st.Holder, st.Fence, st.ExpiresAt.Sub(st.Now)
		r.GrantedAt, r.ExpiresAt = Stamp(st.GrantedAt.Time()), Stamp(st.ExpiresAt.Time())
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
	report := StatusReport{Locks: []LockReport{}, Refusals: []RefusalReport{}, Warnings: []string{}, Guarded: []GuardReport{}}
	if b.Driver.Dialect() == "postgres" {
		admin, err := guard.New(b.Driver.DB(), b.Driver.Dialect())
		if err != nil {
			return StatusReport{}, err
		}
		gs, err := admin.List(ctx)
		if err != nil {
			return StatusReport{}, err
		}
		report.Guarded = GuardReports(gs)
	}
	warnings, err := b.Driver.DurabilityWarnings(ctx)
	if err != nil {
		return StatusReport{}, err
	}
	report.Warnings = append(report.Warnings, warnings...)
	for _, r := range byLock {
		report.Locks = append(report.Locks, *r)
	}
	slices.SortFunc(report.Locks, func(a, b LockReport) int {
		switch {
		case a.Lock < b.Lock:
			return -1
		case a.Lock > b.Lock:
			return 1
		}
		return 0
	})

	if refusals > 0 {
		rejections, err := b.Gate.Rejections(ctx, gate.RejectionQuery{Resource: lock, Limit: refusals, Newest: true})
		if err != nil {
			return StatusReport{}, err
		}
		for _, r := range rejections {
			report.Refusals = append(report.Refusals, RefusalOf(r))
		}
	}
	return report, nil
}

// RefusalOf is a rejection record as status reports it.
func RefusalOf(r sqlstore.Rejection) RefusalReport {
	return RefusalReport{
		Seq: r.Seq, Lock: r.Resource, Fence: r.Fence, Holder: r.Holder,
		Floor: r.Floor, FloorHolder: r.FloorHolder, NotIssued: r.NotIssued, At: Stamp(r.At),
	}
}
