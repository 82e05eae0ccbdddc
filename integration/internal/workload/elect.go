package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencegate/fencegate/elect"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/semaphore"
)

// Coordination is the part of a Config that runs elections and semaphores
// (elect.Elector, semaphore.Semaphore) beside the plain leases. It is embedded
// in Config; its zero value runs none.
type Coordination struct {
	// Elections are election names: a cycle that campaigns picks one. Each
	// agent is a participant of every election (an elect.Elector of its own,
	// on its own Client) and observes each of them (Elector.Observe) for
	// as long as it lives, recording every leader reported.
	Elections []string `json:"elections"`
	// ElectProb is the chance that a cycle campaigns.
	ElectProb float64 `json:"electProb"`
	// Semaphore is a semaphore's name and Permits its N: a cycle that
	// takes a permit waits for one (Semaphore.Acquire), writes under its
	// token and releases it.
	Semaphore string `json:"semaphore"`
	Permits   int    `json:"permits"`
	// PermitProb is the chance that a cycle takes a permit.
	PermitProb float64 `json:"permitProb"`
	// ObserveInterval is elect.Options.ObserveInterval; 0 for a third of
	// the TTL. A leader keeps its term for at least three of them, so that
	// every observer that is not stopped can read it.
	ObserveInterval time.Duration `json:"observeInterval"`
	// WaiterTTL is CoordinatorOptions.WaiterTTL (0: its default): how long
	// the place in line of a killed or stopped participant blocks the line.
	WaiterTTL time.Duration `json:"waiterTTL"`
}

// coordAgent is an agent's side of the elections and the semaphore, made
// on its first such cycle and kept for its life.
type coordAgent struct {
	electors map[string]*elect.Elector
	sem      *semaphore.Semaphore
	stop     context.CancelFunc
	wg       sync.WaitGroup // the observers
}

// coordCycle runs one election or semaphore cycle when the dice say so,
// and reports whether it did.
func (e *env[TTx]) coordCycle(ctx context.Context, a *agent) bool {
	c := e.cfg.Coordination
	if len(c.Elections) == 0 && c.Semaphore == "" {
		return false // no dice drawn: the rest of the workload is unchanged
	}
	x := a.rng.Float64()
	switch {
	case len(c.Elections) > 0 && x < c.ElectProb:
		if err := e.coordStart(ctx, a); err != nil {
			panic(fmt.Sprintf("workload: %v", err)) // a bad Config
		}
		sleep(ctx, e.electCycle(ctx, a, a.coord.electors[c.Elections[a.rng.IntN(len(c.Elections))]]))
		return true
	case c.Semaphore != "" && x < c.ElectProb+c.PermitProb:
		if err := e.coordStart(ctx, a); err != nil {
			panic(fmt.Sprintf("workload: %v", err))
		}
		sleep(ctx, e.permitCycle(ctx, a))
		return true
	}
	return false
}

func (e *env[TTx]) observeInterval() time.Duration {
	return cmpOr(e.cfg.ObserveInterval, e.cfg.TTL/3)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// coordStart makes the agent's electors and semaphore, and starts its
// observers, once.
func (e *env[TTx]) coordStart(ctx context.Context, a *agent) error {
	if a.coord != nil {
		return nil
	}
	c := e.cfg.Coordination
	ca := &coordAgent{electors: map[string]*elect.Elector{}}
	for _, name := range c.Elections {
		el, err := elect.New(e.coord, a.client, &elect.Options{Name: name, ObserveInterval: e.observeInterval()})
		if err != nil {
			return err
		}
		ca.electors[name] = el
	}
	if c.Semaphore != "" {
		s, err := semaphore.New(e.coord, a.client, c.Semaphore, c.Permits)
		if err != nil {
			return err
		}
		ca.sem = s
	}
	octx, stop := context.WithDeadline(ctx, e.cfg.Until.Add(e.cfg.TTL))
	ca.stop = stop
	for _, el := range ca.electors {
		// The observer is an operation sequence of its own (its op ids
		// "p1.2/a3/observe-name#n"), concurrent with the agent's.
		ops := fmt.Sprintf("%s/observe-%s", a.ops, el.Name())
		ca.wg.Go(func() {
			n := 0
			for l := range el.Observe(octx) {
				n++
				now := history.Now()
				r := history.Record{Op: fmt.Sprintf("%s#%d", ops, n), Phase: "inv", Time: now, Type: history.Observe,
					Proc: e.cfg.Proc, Agent: a.name, Holder: a.name, Resource: el.Name()}
				e.record(r)
				e.record(history.Record{Op: r.Op, Phase: "ret", Time: now, Outcome: history.OK, Granted: l.Fence, HeldBy: l.Identity})
			}
		})
	}
	a.coord = ca
	return nil
}

func (e *env[TTx]) record(r history.Record) {
	if err := e.rec.Write(r); err != nil {
		panic(fmt.Sprintf("workload: recording %s: %v", r.Op, err)) // a history with holes would lie
	}
}

// coordStop ends the agent's observers and waits for them: none records
// after the history is closed.
func (a *agent) coordStop() {
	if a.coord != nil {
		a.coord.stop()
		a.coord.wg.Wait()
	}
}

// electCycle campaigns for up to eight terms and, leading, writes under the
// term's token one to four times over two to six terms (at least three
// observe intervals),
// then resigns. The history holds it as lease.Hold's cycles are held (the
// keeper's renewals are unseen): an acquisition that waited (Elect), the
// writes, and a release with no observable outcome. A leader deposed while
// it ran (its process stopped past its term, its connection cut) writes
// once more with the old token: the gate must refuse it if the next term
// was granted. It returns how long to wait before the next cycle.
func (e *env[TTx]) electCycle(ctx context.Context, a *agent, el *elect.Elector) time.Duration {
	name := el.Name()
	inv := e.invoke(a, history.Record{Type: history.Acquire, Resource: name, Request: fmt.Sprintf("%s/elect#%d", a.ops, a.seq+1), Hold: true, Wait: true, Elect: true})
	// Eight terms: a waiter ahead that was killed or stopped keeps its
	// place until its WaiterTTL runs out.
	cctx, cancel := context.WithTimeout(ctx, 8*e.cfg.TTL)
	t, err := el.Campaign(cctx)
	cancel()
	if err != nil {
		// The wait ended, or a call failed: an attempt may have been
		// granted as it did (its term then expires unrenewed).
		e.ret(inv, history.Record{Outcome: history.Unknown, Attempts: 1}, err)
		return time.Duration(5+a.rng.IntN(50)) * time.Millisecond
	}
	l := t.Lease()
	g := l.Grant()
	e.ret(inv, history.Record{Outcome: history.OK, Granted: g.Fence, TTL: int64(g.TTL), Until: believedUntil(l, a.clock), Expires: expiresAt(g), Attempts: 1}, nil)
	e.announce("granted", inv.Op)
	e.announce("leading", inv.Op)
	tok := t.Token()
	// The term lasts two to six ttls, and at least three observe
	// intervals: a stopped leader is then often one that leads.
	writes := 1 + a.rng.IntN(4)
	lead := max(time.Duration((2+4*a.rng.Float64())*float64(e.cfg.TTL)), 3*e.observeInterval())
	gap := lead / time.Duration(writes)
	for range writes {
		if t.Context().Err() != nil {
			break
		}
		wctx := t.Context()
		if a.rng.IntN(2) == 0 {
			wctx = context.WithoutCancel(wctx) // the write already on its way when the term ends
		}
		if e.write(wctx, a, e.gate, tok) == history.Refused {
			break
		}
		sleep(ctx, gap)
	}
	if t.Context().Err() != nil {
		// Deposed (stopped past its term, its renewals cut): one more write
		// under the old token, the one a leader that did not look would
		// send. Refused once the next term was granted.
		e.write(context.WithoutCancel(ctx), a, e.gate, tok)
	}
	rel := e.invoke(a, history.Record{Type: history.Release, Resource: name, Fence: tok.Fence, Hold: true, Elect: true})
	rctx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	err = t.Resign(rctx)
	cancel()
	// Resign releases the lease, or finds it gone (a no-op): its effect
	// is not observable here.
	e.ret(rel, history.Record{Outcome: history.Unknown}, err)
	return time.Duration(a.rng.IntN(20)) * time.Millisecond
}

// permitCycle waits up to four terms for a permit of the semaphore, writes
// under its token one to three times over 0.3 to 0.9 of its term, so that
// permits are held long enough for more participants than permits to
// contend (stalling past its term now and then, unrenewed: the gate must
// refuse the stale slot's writes once another holder took the slot), and
// releases it.
func (e *env[TTx]) permitCycle(ctx context.Context, a *agent) time.Duration {
	s := a.coord.sem
	inv := e.invoke(a, history.Record{Type: history.Permit, Resource: s.Name(), Permits: s.Permits(), Wait: true})
	actx, cancel := context.WithTimeout(ctx, 4*e.cfg.TTL)
	p, err := s.Acquire(actx)
	cancel()
	if err != nil {
		r := history.Record{Outcome: Classify(err)}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || r.Outcome != history.Fail {
			r.Outcome = history.Unknown // a slot may have been granted as the wait ended
		}
		e.ret(inv, r, err)
		return time.Duration(5+a.rng.IntN(50)) * time.Millisecond
	}
	l := p.Lease()
	g := l.Grant()
	tok := p.Token()
	e.ret(inv, history.Record{Outcome: history.OK, Granted: tok.Fence, Slot: tok.Resource, TTL: int64(g.TTL), Until: believedUntil(l, a.clock), Expires: expiresAt(g)}, nil)
	e.announce("granted", inv.Op)
	writes := 1 + a.rng.IntN(3)
	gap := time.Duration((0.3 + 0.6*a.rng.Float64()) * float64(e.cfg.TTL) / float64(writes))
	for range writes {
		if a.rng.Float64() < e.cfg.StallProb {
			f := e.cfg.StallMin + a.rng.Float64()*(e.cfg.StallMax-e.cfg.StallMin)
			sleep(ctx, time.Duration(f*float64(e.cfg.TTL)))
		}
		if e.write(ctx, a, e.gate, tok) == history.Refused {
			break
		}
		sleep(ctx, gap)
	}
	rel := e.invoke(a, history.Record{Type: history.Release, Resource: tok.Resource, Fence: tok.Fence})
	rctx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	released, err := s.Release(rctx, tok)
	cancel()
	r := history.Record{Outcome: Classify(err)}
	if err == nil && !released {
		r.Outcome = history.Noop
	}
	e.ret(rel, r, err)
	return time.Duration(a.rng.IntN(20)) * time.Millisecond
}
