package lease

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// keeper renews every lease a Client keeps through Keep (and so Hold): one goroutine and
// one timer per Client, and one batch (Coordinator.RenewBatch) per
// Coordinator per tick, however many leases there are. The goroutine runs
// while the Client holds a lease and ends with the last one.
//
// Each lease keeps Hold's schedule: renewed once a third of its term has
// passed (up to renewSlack of its term earlier, to share a batch with
// leases due soon after), retried every tenth of its term after a failed
// batch, and lost at its deadline on the holder's clock, whatever a batch
// in flight is doing. The first renewal comes up to firstJitter of the term
// early, at random, so that leases taken together spread over the ticks.
//
// The zero value is ready to use.
type keeper struct {
	mu      sync.Mutex
	kept    map[*kept]struct{}
	running bool
	wakeAt  time.Time     // when the loop will look next; zero when it is not waiting
	wake    chan struct{} // buffered: a poke while the loop is busy is kept
}

// kept is one lease under Keep (and so Hold), embedded in its Kept so a
// kept lease costs one allocation.
type kept struct {
	l     *Lease
	coord *Coordinator
	ctx   context.Context         // Kept's context: once it ends, the lease is no longer renewed
	lose  context.CancelCauseFunc // cancels ctx with a *LostError
	ttl   time.Duration           // the term of the last grant

	// Guarded by keeper.mu.
	renewAt  time.Time // process clock: the next renewal is due
	inFlight bool
	lastErr  error // the last failed batch, for the LostError
	done     bool  // lost or dropped: never touched again
}

const (
	// renewSlack is how much of its term early a lease may be renewed to
	// share the batch of a lease due before it: it bounds the ticks to
	// about one per twelfth of a term, whatever the number of leases.
	renewSlack = 12
	// firstJitter is how much of its term early the first renewal may
	// come, drawn at random.
	firstJitter = 6
	// batchTimeout bounds each batch to a third of the shortest term in
	// it: a batch stuck on a dead connection is retried before the
	// deadlines, and a slow database still has time to answer.
	batchTimeout = 3
)

// add starts keeping e.l, renewed at e.coord; e.lose cancels e.ctx.
func (k *keeper) add(e *kept) {
	// The process clock first: read after the lease's remaining time, a
	// stall between the two readings would make the renewal late.
	now := time.Now()
	l := e.l
	ttl := l.Grant().TTL
	e.ttl = ttl
	wait := renewWait(l)
	if jitter := min(int64(ttl/firstJitter), int64(wait)); jitter > 0 {
		wait -= time.Duration(rand.Int64N(jitter))
	}
	e.renewAt = now.Add(wait)

	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kept == nil {
		k.kept = make(map[*kept]struct{})
		k.wake = make(chan struct{}, 1)
	}
	k.kept[e] = struct{}{}
	switch {
	case !k.running:
		k.running = true
		go k.run()
	case k.wakeAt.IsZero() || e.renewAt.Before(k.wakeAt):
		k.poke()
	}
}

// drop stops keeping e. Once it returns, e's lose is never called.
func (k *keeper) drop(e *kept) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.done = true
	delete(k.kept, e)
	if len(k.kept) == 0 {
		k.poke() // let the loop end
	}
}

func (k *keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// batch is one Coordinator.RenewBatch call and its answer.
type batch struct {
	coord *Coordinator
	kept  []*kept
	reqs  []*RenewRequest
	outs  []RenewOutcome
	err   error
}

// run is the keeper's loop: look (lose what is past its deadline, send what
// is due), then wait for the next due time, a deadline, a batch's answer or
// a poke.
func (k *keeper) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	answers := make(chan *batch)
	inFlight := 0
	for {
		k.mu.Lock()
		if len(k.kept) == 0 && inFlight == 0 {
			k.running, k.wakeAt = false, time.Time{}
			k.mu.Unlock()
			return
		}
		now := time.Now()
		batches, next := k.lookLocked(now)
		k.wakeAt = next
		k.mu.Unlock()

		for _, b := range batches {
			inFlight++
			go func() {
				b.outs, b.err = b.send()
				answers <- b
			}()
		}
		timer.Reset(next.Sub(now))
		select {
		case <-timer.C:
		case <-k.wake:
		case b := <-answers:
			inFlight--
			k.apply(b)
		}
	}
}

// lookLocked loses every lease past its deadline, sends a batch to each
// Coordinator one of whose leases is due, with every lease of it due within
// renewSlack, and returns when to look next. A batch goes only when a lease
// is due, so batches are at least renewSlack of a term apart, however many
// leases there are.
func (k *keeper) lookLocked(now time.Time) (batches []*batch, next time.Time) {
	next = now.Add(time.Hour)
	type pending struct {
		kept []*kept
		due  bool // one of them is due now
	}
	byCoord := map[*Coordinator]*pending{}
	for e := range k.kept {
		if e.ctx.Err() != nil {
			// Keep's ctx ended (or Hold is ending): no longer renewed.
			e.done = true
			delete(k.kept, e)
			continue
		}
		rem := e.l.Remaining()
		if rem <= 0 {
			k.loseLocked(e, "deadline", "its deadline passed without a successful renewal", e.lastErr)
			continue
		}
		if at := now.Add(rem); at.Before(next) {
			next = at // the deadline timer, checked again on the Client's clock
		}
		if e.inFlight {
			continue
		}
		if e.renewAt.After(now.Add(e.ttl / renewSlack)) {
			if e.renewAt.Before(next) {
				next = e.renewAt
			}
			continue
		}
		p := byCoord[e.coord]
		if p == nil {
			p = &pending{}
			byCoord[e.coord] = p
		}
		p.kept = append(p.kept, e)
		p.due = p.due || !e.renewAt.After(now)
	}
	for coord, p := range byCoord {
		if !p.due {
			for _, e := range p.kept {
				if e.renewAt.Before(next) {
					next = e.renewAt
				}
			}
			continue
		}
		b := &batch{coord: coord}
		for _, e := range p.kept {
			req, err := e.l.client.BeginRenewal(e.l)
			if err != nil {
				k.loseLocked(e, "released", "it could not be renewed", err)
				continue
			}
			b.kept, b.reqs = append(b.kept, e), append(b.reqs, req)
			e.inFlight = true
		}
		if len(b.kept) > 0 {
			batches = append(batches, b)
		}
	}
	return batches, next
}

// send renews the batch, for at most a third of its shortest term.
func (b *batch) send() ([]RenewOutcome, error) {
	shortest := b.kept[0].ttl
	for _, e := range b.kept {
		shortest = min(shortest, e.ttl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(shortest/batchTimeout, MinTTL))
	defer cancel()
	return b.coord.RenewBatch(ctx, b.reqs)
}

// apply takes a batch's answer: each lease renewed is due again when a
// third of its new term has passed, each refused is lost, and after a
// failed batch every lease in it is retried a tenth of its term later.
func (k *keeper) apply(b *batch) {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, e := range b.kept {
		e.inFlight = false
		if e.done {
			continue
		}
		if b.err != nil {
			// Maybe a blip: retry soon, while the deadline guards the lease.
			e.coord.obs.renewal(e.ctx, e.l, "failed")
			e.lastErr = b.err
			e.renewAt = now.Add(retryWait(e.l))
			continue
		}
		if !b.outs[i].OK {
			e.coord.obs.renewal(e.ctx, e.l, "refused")
			k.loseLocked(e, "refused", "the coordinator reports it expired, released or superseded", nil)
			continue
		}
		if _, err := e.l.client.CompleteRenewal(b.reqs[i], b.outs[i].Grant); err != nil {
			k.loseLocked(e, "renewal_incomplete", "its renewal could not be completed", err)
			continue
		}
		e.coord.obs.renewal(e.ctx, e.l, renewedOutcome(e.lastErr))
		e.lastErr, e.ttl = nil, b.outs[i].Grant.TTL
		e.renewAt = now.Add(renewWait(e.l))
	}
}

// loseLocked cancels e's Kept context with a *LostError and stops keeping
// e; code is the reason attribute of the lost count.
func (k *keeper) loseLocked(e *kept, code, reason string, err error) {
	e.coord.obs.lose(e.ctx, e.l, code)
	e.lose(&LostError{Resource: e.l.token.Name(), Fence: e.l.token.Fence, Reason: reason, Err: err})
	e.done = true
	delete(k.kept, e)
}

// renewWait is how long until l should be renewed: when two thirds of its
// term remain.
func renewWait(l *Lease) time.Duration {
	return max(l.Remaining()-2*l.Grant().TTL/3, 0)
}

// retryWait is the pause after a failed renewal: a tenth of the term, so
// several attempts fit before the deadline.
func retryWait(l *Lease) time.Duration {
	return max(l.Grant().TTL/10, time.Millisecond)
}
