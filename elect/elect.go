package elect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/wakeup"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// ErrNotLeader is returned by Elector.Resign when the Elector holds no
// term, and by Term.Resign for a term already resigned or lost: nothing is
// released.
var ErrNotLeader = errors.New("fencegate: not the leader")

// ErrCampaigning is returned by Elector.Campaign and Elector.Run while the
// same Elector already campaigns or leads: one Elector leads at most one
// term at a time.
var ErrCampaigning = errors.New("fencegate: this elector already campaigns or leads")

// ErrUnhealthy is matched by the error Elector.Check returns for a leader
// whose renewals are overdue.
var ErrUnhealthy = errors.New("fencegate: leader unable to renew")

// Options configure an Elector (New takes a pointer, as every constructor
// of fencegate's takes its options). Name is required; the zero
// value of every other field is its default.
type Options struct {
	// Name is the election: the lease resource its leaders hold, under the
	// rules of fence.ValidateResource. Every participant of one election
	// uses the same Name, and the leader's writes are fenced on it.
	Name string

	// OnStartedLeading is called by Run once this participant leads, with
	// the term's context: it ends the moment the term can no longer be
	// trusted (the lease's deadline on the holder's clock, before the
	// coordinator's expiry, or a renewal answered expired). Run resigns
	// when it returns. Optional.
	OnStartedLeading func(ctx context.Context, t *Term)

	// OnStoppedLeading is called by Run after OnStartedLeading returned,
	// and only if it was called: never for a participant that did not
	// lead. Optional.
	OnStoppedLeading func()

	// OnNewLeader is called by Run for each leader Observe reports, in
	// fence order, from one goroutine, for as long as Run runs. Optional.
	OnNewLeader func(identity string, fence int64)

	// ObserveInterval is how often Observe reads the election's lease
	// when nothing wakes it sooner (on Postgres a release wakes it at once
	// by LISTEN/NOTIFY; a grant by this Elector always does). It bounds
	// how late an observer in another process learns of a new leader on
	// SQLite and MySQL. Defaults to a third of the lease.Coordinator's
	// WaiterTTL (1s by default).
	ObserveInterval time.Duration

	// HealthTimeout is how long a renewal of the leader's lease may be
	// overdue (a renewal is due once a third of the term has passed)
	// before Check reports it unhealthy. Defaults to 0, which means a
	// third of the term: unhealthy once two thirds of it passed without a
	// renewal. Check is also unhealthy as soon as the term's context ended
	// while Run's OnStartedLeading has not returned.
	HealthTimeout time.Duration
}

// Leader is one generation of an election's lease, as Observe and
// Elector.Leader read it from the database.
type Leader struct {
	Identity string // the holder
	Fence    int64  // its fence: the term's, at the gate
	// Live is true when the term was unexpired and unreleased at the read.
	Live bool
	// ExpiresAt is the term's end in the database's clock unless renewed,
	// for display.
	ExpiresAt clock.DBTime
}

// Elector is one participant of a leader election built on a lease: the
// leader is the holder of the lease on ElectorOptions.Name, its term the
// lease's generation, and the term's fence is what the gate checks on the
// leader's writes. See the package documentation.
//
// An Elector is safe for concurrent use. It must come from New.
type Elector struct {
	coord  *lease.Coordinator
	client *lease.Client
	opts   Options
	period time.Duration

	mu          sync.Mutex
	term        *Term // the term this Elector campaigns for (nil) or leads
	campaigning bool
	leading     bool // Run's OnStartedLeading is running
	watchers    map[chan struct{}]struct{}
}

// Term is one leadership term of an Elector: a kept lease on the election.
type Term struct {
	e    *Elector
	kept *lease.Kept

	mu       sync.Mutex
	resigned bool
}

// New returns a participant of the election opts.Name for client's
// holder over coord. Give each participant a Client of its own: two
// Electors of one holder on one election are one participant to the
// database (the second's Campaign is refused with lease.ErrHeld while the first
// leads). Errors: fence.ErrInvalidInput for a nil coord or client,
// or an invalid Name (a nil opts has none); nothing is written. The
// Elector keeps a copy of *opts.
func New(coord *lease.Coordinator, client *lease.Client, o *Options) (*Elector, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if coord == nil {
		return nil, invalid("coordinator", "is nil")
	}
	if client == nil {
		return nil, invalid("client", "is nil")
	}
	if opts.Name == "" {
		return nil, invalid("election name", "must not be empty")
	}
	if err := fence.ValidateResource(opts.Name); err != nil {
		return nil, err
	}
	if opts.ObserveInterval < 0 || opts.HealthTimeout < 0 {
		return nil, invalid("elector options", "intervals must not be negative")
	}
	period := opts.ObserveInterval
	if period == 0 {
		period = coord.WaiterTTL() / 3
	}
	return &Elector{coord: coord, client: client, opts: opts, period: max(period, lease.MinTTL)}, nil
}

// Name returns the election's name.
func (e *Elector) Name() string { return e.opts.Name }

// Identity returns this participant's identity: its Client's holder.
func (e *Elector) Identity() string { return e.client.Holder() }

// Campaign waits in the election's line (lease.Coordinator.AcquireWait: the
// database's queue, in the order participants joined it) until this
// participant leads or ctx ends, and returns its term, kept alive by the
// Client's keeper until Resign or loss. ctx bounds the wait only, not the
// term.
//
// Errors: ErrCampaigning while this Elector campaigns or leads; as
// AcquireWait's otherwise (ctx's error joined with a *lease.HeldError naming the
// leader when ctx ends).
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	e.mu.Lock()
	if e.campaigning || (e.term != nil && e.term.current()) {
		e.mu.Unlock()
		return nil, ErrCampaigning
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()

	l, err := e.coord.AcquireWait(ctx, e.client, e.opts.Name)
	if err != nil {
		return nil, err
	}
	// The term outlives Campaign's ctx: Keep's context ends with the lease
	// (its deadline, a lost renewal, Resign), which bounds it.
	kept, err := lease.Keep(context.WithoutCancel(ctx), e.client, e.coord, l)
	if err != nil {
		return nil, err // born expired: never reported as leading
	}
	t := &Term{e: e, kept: kept}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()
	e.wakeWatchers()
	return t, nil
}

// Resign ends this Elector's term: see Term.Resign. ErrNotLeader when it
// holds none.
func (e *Elector) Resign(ctx context.Context) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return ErrNotLeader
	}
	return t.Resign(ctx)
}

// Term returns this Elector's current term, or nil when it holds none (it
// never led, or its last term was resigned or lost).
func (e *Elector) Term() *Term {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || !e.term.current() {
		return nil
	}
	return e.term
}

// IsLeader reports whether this Elector holds a term that is neither
// resigned nor lost. ADVISORY, as lease.Lease.Expired: the answer can be stale
// before the caller acts on it; fence the leader's writes with the term's
// Token at the gate.
func (e *Elector) IsLeader() bool { return e.Term() != nil }

// Leader reads who leads the election now from its lease row (as
// lease.Coordinator.Status reads it): the latest generation, with Live false when its
// term is over and nobody has taken the next one yet. The zero Leader means
// the election never had one. Advisory, as lease.Coordinator.Status.
func (e *Elector) Leader(ctx context.Context) (Leader, error) {
	st, err := e.coord.Status(ctx, e.opts.Name)
	if err != nil {
		return Leader{}, err
	}
	return leaderOf(st), nil
}

func leaderOf(st lease.Status) Leader {
	return Leader{Identity: st.Holder, Fence: st.Fence, Live: st.Held, ExpiresAt: st.ExpiresAt}
}

// Observe reports the election's leaders, on the returned channel, until
// ctx ends (then it is closed). It works the same for every participant,
// leading or not, in any process: it reads the election's lease row when
// woken (this Elector's own grant and release; on Postgres any release, by
// LISTEN/NOTIFY on a connection of its own), when the current term is due
// to end, and every ObserveInterval.
//
// What it reports is exact in these ways: leaders come in strictly
// increasing fence order, none twice, and each one did lead (it was read
// from the lease row, which only a grant writes). It coalesces: a term
// that begins and ends between two reads is not reported, and a consumer
// slow to receive gets the latest leader when it receives, not the ones in
// between. Two observers therefore see the same sequence whenever each term
// lasts longer than the observers take to read it (a leader that waits for
// OnNewLeader before working guarantees it), and otherwise sequences that
// agree on every leader both saw.
func (e *Elector) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	wake := e.watch()
	go func() {
		defer close(ch)
		defer e.unwatch(wake)
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		if n := e.coord.Store(); n.SupportsListener() {
			go wakeup.Listen(lctx, n, sqlstore.Watch{Resource: e.opts.Name}, func(res string) bool { return res == e.opts.Name }, wake)
		}
		var last int64
		follow := time.Millisecond // re-read soon after a term ended: a successor is likely
		for {
			delay := e.period
			st, err := e.coord.Status(ctx, e.opts.Name)
			if err == nil {
				if st.Fence > last {
					last = st.Fence
					select {
					case ch <- leaderOf(st):
					case <-ctx.Done():
						return
					}
				}
				if st.Held {
					delay = min(delay, st.Remaining+e.coord.Store().ClockPrecision())
					follow = time.Millisecond
				} else {
					delay = min(delay, follow)
					follow = min(2*follow, e.period)
				}
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-wake:
				follow = time.Millisecond
			case <-t.C:
			}
			t.Stop()
		}
	}()
	return ch
}

func (e *Elector) watch() chan struct{} {
	w := make(chan struct{}, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watchers == nil {
		e.watchers = make(map[chan struct{}]struct{})
	}
	e.watchers[w] = struct{}{}
	return w
}

func (e *Elector) unwatch(w chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.watchers, w)
}

func (e *Elector) wakeWatchers() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for w := range e.watchers {
		wakeup.Poke(w)
	}
}

// Run is the election in client-go's shape: it observes the election
// (OnNewLeader) while it campaigns and leads, calls OnStartedLeading with
// the term's context once it leads, resigns when OnStartedLeading returns,
// then calls OnStoppedLeading, and returns. It leads at most once; call it
// again to stand again. Only one of its callbacks' terms runs at a time
// per Elector, and one leader per fence: the database grants a fence once.
//
// It returns nil after a term that ended by OnStartedLeading returning
// with the term intact; the *lease.LostError (matching lease.ErrLeaseLost) when the
// term was lost first; Campaign's error when it never led (ctx ended: ctx's
// error); and the resignation's error joined to these.
func (e *Elector) Run(ctx context.Context) error {
	octx, stopObserve := context.WithCancel(ctx)
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for l := range e.Observe(octx) {
			if e.opts.OnNewLeader != nil {
				e.opts.OnNewLeader(l.Identity, l.Fence)
			}
		}
	}()
	defer func() { stopObserve(); <-observed }()

	t, err := e.Campaign(ctx)
	if err != nil {
		return err
	}
	e.setLeading(true)
	if e.opts.OnStartedLeading != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					e.setLeading(false)
					_ = t.Resign(ctx) // bounded by ReleaseTimeout even when ctx ended
					panic(r)
				}
			}()
			e.opts.OnStartedLeading(t.Context(), t)
		}()
	} else {
		<-t.Context().Done()
	}
	e.setLeading(false)
	var lost error
	if l := lostCause(t.Context()); l != nil {
		lost = l
	}
	rerr := t.Resign(ctx)
	if errors.Is(rerr, ErrNotLeader) {
		rerr = nil // lost: nothing left to resign
	}
	if e.opts.OnStoppedLeading != nil {
		e.opts.OnStoppedLeading()
	}
	return errors.Join(lost, rerr)
}

func (e *Elector) setLeading(v bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leading = v
}

// Check is a health check in the shape of client-go's HealthzAdaptor, for
// an http.Handler: nil unless this Elector leads (holds a term, or Run's
// OnStartedLeading still runs) and its lease's renewal is overdue by more
// than HealthTimeout, or its term ended while OnStartedLeading still runs.
// Then an error matching ErrUnhealthy. r is unused and may be nil.
func (e *Elector) Check(_ *http.Request) error {
	e.mu.Lock()
	t, leading := e.term, e.leading
	e.mu.Unlock()
	if t == nil || (!leading && !t.current()) {
		return nil
	}
	if leading && t.Context().Err() != nil {
		return fmt.Errorf("%w: %s: the term (fence %d) ended while the leader still runs", ErrUnhealthy, e.opts.Name, t.Fence())
	}
	l := t.kept.Lease()
	g := l.Grant()
	timeout := e.opts.HealthTimeout
	if timeout == 0 {
		timeout = g.TTL / 3
	}
	// A renewal is due a third of the term after the last one was sent.
	if overdue := l.Age() - g.TTL/3; overdue > timeout {
		return fmt.Errorf("%w: %s: the renewal of fence %d is %v overdue", ErrUnhealthy, e.opts.Name, t.Fence(), overdue)
	}
	return nil
}

// Context returns the term's context: cancelled, with a *lease.LostError cause,
// the moment the term can no longer be trusted (see lease.Keep), or when it is
// resigned.
func (t *Term) Context() context.Context { return t.kept.Context() }

// Token returns the term's proof for gate.Commit: the leader's writes
// checked with it are refused once a later term was granted.
func (t *Term) Token() fence.Token { return t.kept.Lease().Token() }

// Fence returns the term's fence.
func (t *Term) Fence() int64 { return t.Token().Fence }

// Lease returns the term's lease; its deadline moves with each renewal.
func (t *Term) Lease() *lease.Lease { return t.kept.Lease() }

// current reports whether t is neither resigned nor lost.
func (t *Term) current() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.resigned && t.Context().Err() == nil
}

// Resign ends the term: it stops renewing and releases the lease (bounded
// by lease.ClientOptions.ReleaseTimeout even when ctx is cancelled), so the next
// participant in line leads at once. The term's context is cancelled before
// the release is sent. Errors: ErrNotLeader for a term already resigned
// (nothing is sent); the release's error otherwise (the lease then expires
// by itself at the end of its term). A term that was lost is still
// released, as lease.Kept.Release does.
func (t *Term) Resign(ctx context.Context) error {
	t.mu.Lock()
	if t.resigned {
		t.mu.Unlock()
		return fmt.Errorf("%w: %s: fence %d already resigned", ErrNotLeader, t.e.opts.Name, t.Fence())
	}
	t.resigned = true
	t.mu.Unlock()
	err := t.kept.Release(ctx)
	t.e.mu.Lock()
	if t.e.term == t {
		t.e.term = nil
	}
	t.e.mu.Unlock()
	t.e.wakeWatchers()
	return err
}

// lostCause returns the *LostError a term's context ended with, or nil.
func lostCause(ctx context.Context) *lease.LostError {
	if lost, ok := errors.AsType[*lease.LostError](context.Cause(ctx)); ok {
		return lost
	}
	return nil
}

func invalid(field, reason string) error {
	return &fence.InvalidInputError{Field: field, Reason: reason}
}
