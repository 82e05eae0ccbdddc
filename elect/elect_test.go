package elect

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

func TestElection(t *testing.T) {
	forEachDriver(t, testElection[*sql.Tx], testElection[pgx.Tx])
}

// observed collects what each observer reported, and lets a leader wait
// until every observer has seen its term.
type observed struct {
	mu   sync.Mutex
	cond *sync.Cond
	seqs [][]Leader
}

func (o *observed) add(i int, l Leader) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seqs[i] = append(o.seqs[i], l)
	o.cond.Broadcast()
}

// waitAll waits until every observer saw a fence of at least fence.
func (o *observed) waitAll(fence int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !o.allSawLocked(fence) {
		o.cond.Wait()
	}
}

func (o *observed) allSawLocked(fence int64) bool {
	for _, s := range o.seqs {
		if len(s) == 0 || s[len(s)-1].Fence < fence {
			return false
		}
	}
	return true
}

// term is one leadership term as the test saw it.
type electTerm struct {
	identity string
	fence    int64
	granted  clock.DBTime // the lease row's grant, read at the term's start
	lostBy   clock.DBTime // for a term lost by its deadline: the coordinator's last expiry of it
}

// Three electors on separate connections and Coordinators campaign in
// turn; one of them stops being able to renew (its renewals cut) while it
// leads. Never do two of them believe they lead at once; the terms follow
// one another in the database's clock; the deposed leader's write is
// refused by the gate; every observer saw the same leaders in fence order,
// each once.
func testElection[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	const electors, rounds = 3, 2
	g := gate.New(h.Driver, nil)
	obs := &observed{seqs: make([][]Leader, electors)}
	obs.cond = sync.NewCond(&obs.mu)

	var (
		believers atomic.Int32
		mu        sync.Mutex
		terms     []electTerm
	)
	octx, stopObserving := context.WithCancel(ctx)
	var observers, campaigners sync.WaitGroup
	els := make([]*Elector, electors)
	cuts := make([]*failingRenewals, electors)
	for i := range electors {
		store, closeStore := h.Reopen(t)
		t.Cleanup(closeStore)
		cuts[i] = &failingRenewals{Store: store}
		// A term with a wide margin for a loaded machine: a grant that took
		// 700 ms was born expired with 1 s. The skew keeps a deposed
		// leader's belief well inside the coordinator's term.
		coord := lease.NewCoordinator(cuts[i], &lease.CoordinatorOptions{TTL: 4 * time.Second, WaiterTTL: 600 * time.Millisecond})
		c := newClient(t, fmt.Sprintf("elector-%d", i), lease.ClientOptions{ClockSkew: 300 * time.Millisecond})
		e, err := New(coord, c, &Options{Name: "leader"})
		if err != nil {
			t.Fatal(err)
		}
		els[i] = e
		observers.Add(1)
		go func() {
			defer observers.Done()
			for l := range e.Observe(octx) {
				obs.add(i, l)
			}
		}()
	}

	deposed := make(chan fence.Token, 1)
	errs := make(chan error, electors*rounds*2)
	for i, e := range els {
		campaigners.Add(1)
		go func() {
			defer campaigners.Done()
			for r := range rounds {
				term, err := e.Campaign(ctx)
				if err != nil {
					errs <- err
					return
				}
				if n := believers.Add(1); n != 1 {
					errs <- fmt.Errorf("%s leads (fence %d) beside %d others", e.Identity(), term.Fence(), n-1)
				}
				if !e.IsLeader() {
					errs <- fmt.Errorf("%s: IsLeader false while leading", e.Identity())
				}
				st, err := e.coord.Status(ctx, "leader")
				if err != nil || st.Fence != term.Fence() || st.Holder != e.Identity() {
					errs <- fmt.Errorf("%s: the row reads %+v (%v) in its term %d", e.Identity(), st, err, term.Fence())
				}
				rec := electTerm{identity: e.Identity(), fence: term.Fence(), granted: st.GrantedAt}
				if err := g.Do(ctx, term.Token(), func(context.Context, TTx) error { return nil }); err != nil {
					errs <- fmt.Errorf("%s: the leader's write: %w", e.Identity(), err)
				}
				obs.waitAll(term.Fence())

				if i == 0 && r == 0 {
					// Cut: no renewal gets through; the term ends at the
					// holder's deadline, before the coordinator's expiry.
					cuts[i].fail.Store(true)
					<-term.Context().Done()
					believers.Add(-1)
					if !errors.Is(context.Cause(term.Context()), lease.ErrLeaseLost) {
						errs <- fmt.Errorf("the cut term ended with %v", context.Cause(term.Context()))
					}
					if e.IsLeader() {
						errs <- errors.New("IsLeader true after the term was lost")
					}
					rec.lostBy = term.Lease().Grant().CoordinatorExpiresAt
					cuts[i].fail.Store(false)
					deposed <- term.Token()
				} else {
					believers.Add(-1) // before the release: Resign ends the term's context first
					if err := term.Resign(ctx); err != nil {
						errs <- err
					}
					if err := term.Resign(ctx); !errors.Is(err, ErrNotLeader) {
						errs <- fmt.Errorf("resigning twice = %v, want ErrNotLeader", err)
					}
				}
				mu.Lock()
				terms = append(terms, rec)
				mu.Unlock()
			}
		}()
	}
	campaigners.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stopObserving()
	observers.Wait()

	slices.SortFunc(terms, func(a, b electTerm) int { return cmp.Compare(a.fence, b.fence) })
	if len(terms) != electors*rounds {
		t.Fatalf("%d terms, want %d", len(terms), electors*rounds)
	}
	want := make([]Leader, len(terms))
	for k, tm := range terms {
		want[k] = Leader{Identity: tm.identity, Fence: tm.fence}
		if k > 0 && tm.granted.Before(terms[k-1].granted) {
			t.Errorf("term %d granted at %v, before term %d at %v", tm.fence, tm.granted, terms[k-1].fence, terms[k-1].granted)
		}
		if k > 0 && !terms[k-1].lostBy.IsZero() && tm.granted.Before(terms[k-1].lostBy) {
			t.Errorf("term %d granted at %v, inside the lost term %d (until %v)", tm.fence, tm.granted, terms[k-1].fence, terms[k-1].lostBy)
		}
	}
	for i, seq := range obs.seqs {
		got := make([]Leader, len(seq))
		for k, l := range seq {
			got[k] = Leader{Identity: l.Identity, Fence: l.Fence}
		}
		if !slices.Equal(got, want) {
			t.Errorf("observer %d saw %v, want %v", i, got, want)
		}
	}

	// The deposed leader's late write is refused: a successor was granted.
	tok := <-deposed
	err := g.Do(ctx, tok, func(context.Context, TTx) error { return nil })
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.Fence != tok.Fence {
		t.Errorf("the deposed leader's write = %v, want a *gate.StaleFenceError", err)
	}
}

// Run calls OnStartedLeading with a context that ends with the term,
// OnStoppedLeading only after it and only for a participant that led, and
// OnNewLeader for every leader in fence order.
func TestElectorRunCallbacks(t *testing.T) {
	dbtest.ForEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// Nothing here waits for a term to run out; a renewal ran 581 ms
		// overdue under load with a 1 s term, and Check said so.
		coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
		mk := func(holder string, cb Options) *Elector {
			cb.Name = "run"
			e, err := New(coord, newClient(t, holder, lease.ClientOptions{}), &cb)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		var events []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
		started := make(chan struct{})
		release := make(chan struct{})
		a := mk("a", Options{
			OnStartedLeading: func(ctx context.Context, tm *Term) {
				note(fmt.Sprintf("a started %d", tm.Fence()))
				close(started)
				<-release
			},
			OnStoppedLeading: func() { note("a stopped") },
		})
		newLeaders := make(chan string, 4)
		bctx, stopB := context.WithCancel(ctx)
		b := mk("b", Options{
			OnStartedLeading: func(context.Context, *Term) { t.Error("b led") },
			OnStoppedLeading: func() { t.Error("OnStoppedLeading for b, which never led") },
			OnNewLeader:      func(id string, fence int64) { newLeaders <- fmt.Sprintf("%s %d", id, fence) },
		})
		aDone := make(chan error, 1)
		go func() { aDone <- a.Run(ctx) }()
		<-started
		bDone := make(chan error, 1)
		go func() { bDone <- b.Run(bctx) }()
		fence := a.Term().Fence()
		if got, want := <-newLeaders, fmt.Sprintf("a %d", fence); got != want {
			t.Errorf("OnNewLeader(%s), want %s", got, want)
		}
		if err := a.Check(nil); err != nil {
			t.Errorf("Check while leading: %v", err)
		}
		stopB() // b gives up its campaign: no callback but OnNewLeader
		if err := <-bDone; !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrHeld) {
			t.Errorf("b's Run = %v, want Canceled and lease.ErrHeld", err)
		}
		close(release)
		if err := <-aDone; err != nil {
			t.Errorf("a's Run = %v", err)
		}
		if want := []string{fmt.Sprintf("a started %d", fence), "a stopped"}; !slices.Equal(events, want) {
			t.Errorf("events %v, want %v", events, want)
		}
		if st, _ := coord.Status(ctx, "run"); st.Held {
			t.Errorf("Run did not resign: %+v", st)
		}
		if err := a.Resign(ctx); !errors.Is(err, ErrNotLeader) {
			t.Errorf("Resign after Run = %v, want ErrNotLeader", err)
		}
	})
}

// Check reports a leader whose renewals are cut for longer than
// HealthTimeout as unhealthy, and a participant that does not lead as
// healthy.
func TestElectorCheck(t *testing.T) {
	ctx := context.Background()
	store := &failingRenewals{Store: dbtest.SQLite(t)}
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 3 * time.Second})
	clk := clock.NewManual(time.Hour, 0)
	e, err := New(coord, newClient(t, "a", lease.ClientOptions{Clock: clk}), &Options{Name: "health", HealthTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Check(nil); err != nil {
		t.Fatalf("Check before leading: %v", err)
	}
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ttl := term.Lease().Grant().TTL
	clk.Advance(ttl/3 + 400*time.Millisecond) // due, 400 ms overdue: within the timeout
	if err := e.Check(nil); err != nil {
		t.Errorf("Check 400 ms overdue: %v", err)
	}
	clk.Advance(200 * time.Millisecond)
	if err := e.Check(nil); !errors.Is(err, ErrUnhealthy) {
		t.Errorf("Check 600 ms overdue = %v, want ErrUnhealthy", err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Check(nil); err != nil {
		t.Errorf("Check after resigning: %v", err)
	}
}

// Bad input changes nothing: an empty or invalid election name, nil
// arguments, resigning twice, and campaigning while leading.
func TestElectorBadInput(t *testing.T) {
	ctx := context.Background()
	store := dbtest.SQLite(t)
	coord := lease.NewCoordinator(store, nil)
	c := newClient(t, "a", lease.ClientOptions{})
	for name, opts := range map[string]Options{
		"empty name":       {},
		"control in name":  {Name: "a\x00b"},
		"negative observe": {Name: "x", ObserveInterval: -1},
	} {
		if _, err := New(coord, c, &opts); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("%s: New = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := New(coord, c, nil); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("nil options (no name): %v", err)
	}
	if _, err := New(nil, c, &Options{Name: "x"}); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("nil coordinator: %v", err)
	}
	e, err := New(coord, c, &Options{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Resign before leading = %v, want ErrNotLeader", err)
	}
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx); !errors.Is(err, ErrCampaigning) {
		t.Errorf("Campaign while leading = %v, want ErrCampaigning", err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := term.Resign(ctx); !errors.Is(err, ErrNotLeader) {
		t.Errorf("resigning twice = %v, want ErrNotLeader", err)
	}
	if ls, err := coord.List(ctx); err != nil || len(ls) != 1 || ls[0].Held {
		t.Errorf("leases after bad input: %+v (%v)", ls, err)
	}
}
