package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/handover"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// Names of the variants of scenarios 7 and fairness.
const (
	vHandWait     = "fencegate AcquireWait, one coordinator"
	vHandWaitMany = "fencegate AcquireWait, 4 coordinators (NOTIFY)"
	vHandPoll     = "fencegate Acquire polling (the CLI's old --wait)"
	vHandOff      = "fencegate AcquireWait + hand-over in the write's commit, one coordinator"
	vHandOffMany  = "fencegate AcquireWait + hand-over in the write's commit, 4 coordinators (NOTIFY)"
	// vWriteAlone is the bound of a lock whose turn costs one durable
	// commit: one worker's fenced writes back to back, under one lease.
	vWriteAlone   = "fencegate fenced write alone, no lock turn"
	vHandPglock   = "pglock Acquire (1 s lease, heartbeat off)"
	vHandAdvisory = "pg_advisory_lock queue"
	// vBareHandOff is the fairness scenario's bound for a hand-over: the
	// least one costs (bareHandOff).
	vBareHandOff = "bound: bare SQL hand-over (next holder's fence in the write's commit, queue in memory)"
)

var lockVariants = []string{vHandWait, vHandWaitMany, vHandOff, vHandOffMany, vHandPoll, vHandPglock, vHandAdvisory}

// fairVariants are the fairness scenario's: the lock variants and the
// bare hand-over, its bound.
var fairVariants = append(slices.Clone(lockVariants), vBareHandOff)

// handoverCoordinators is how many coordinators the NOTIFY variant spreads
// its waiters over: each has one listening connection.
const handoverCoordinators = 4

// Handover is scenario 7: the time from a release to the next holder's
// grant, with 1, 16 and 64 workers contending for one lock, each taking it
// and releasing it at once.
func Handover(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	r.f("## 7. Hand-over: release → next holder's grant\n\n")
	r.f("N workers loop on one lock: take it, release it at once, take it again. The latency is from the release (read just before it is sent) to the next grant (read when it returns), on one process's monotonic clock, loopback, for %v per variant and worker count. ", cfg.Duration)
	r.f("*AcquireWait* queues in fencegate_waiter and is woken by the release (in-process with one coordinator; by LISTEN/NOTIFY across 4). *Polling* is the CLI's former loop: Acquire, and while held sleep the lease's remaining time clamped to 10–200 ms, jittered. *pglock* is cirello.io/pglock's AcquireContext, which sleeps a lease (1 s) between tries (an attempt that runs past its lease under contention fails with pglock's own deadline, and the worker tries again). *pg_advisory_lock* waits in Postgres's own lock queue on a pooled connection per worker. Hand-overs are counted from when every worker has taken the lock once (or after %v), so that none is a new connection's first. With one worker the next holder is the releaser itself; *to another* is the share of hand-overs that went to a worker other than the releaser (a lock that lets the releaser take it straight back shows fast hand-overs that hand nothing over).\n\n", lockWarmUp)
	r.f("*after return* is the same latency counted from when the release returned instead (for the hand-over variants, the holder's commit of its write, release and grant together: what is left is the waiter's wake-up); 0 when the grant was seen first.\n\n")
	r.f("| workers | variant | hand-overs | to another | p50 | p99 | after return p50 |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, n := range []int{1, 16, 64} {
		for _, v := range lockVariants {
			prog(cfg, fmt.Sprintf("7: %s, %d workers", v, n))
			lat, after, others, err := handOverTurns(ctx, cfg, pg, v, n)
			if err != nil {
				return fmt.Errorf("%s, %d workers: %w", v, n, err)
			}
			if len(lat) == 0 {
				r.f("| %d | %s | 0 | – | – | – | – |\n", n, v)
				continue
			}
			slices.Sort(lat)
			slices.Sort(after)
			afterP50 := "–"
			if len(after) > 0 {
				afterP50 = ms(after[len(after)/2])
			}
			r.f("| %d | %s | %d | %.0f%% | %s | %s | %s |\n", n, v, len(lat), 100*float64(others)/float64(len(lat)), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), afterP50)
			r.set(float64(lat[len(lat)/2])/float64(time.Millisecond), "7", n, v, "p50 ms")
		}
	}
	r.f("\n")
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// handOverTurns runs one variant with n workers for cfg.Duration and returns the
// hand-over latencies from the release's sending and from its return, and
// how many of them went to another worker.
func handOverTurns(ctx context.Context, cfg Config, pg *PG, variant string, n int) (lat, after []time.Duration, others int, err error) {
	var (
		mu          sync.Mutex
		lastRelease time.Time
		lastHolder  = -1
		returned    time.Time // the last release's return
		grantedAt   time.Time // the grant that followed it, seen before its return
	)
	hooks := cycleHooks{
		granted: func(w int) {
			now := time.Now()
			mu.Lock()
			if !lastRelease.IsZero() {
				lat = append(lat, now.Sub(lastRelease))
				if w != lastHolder {
					others++
				}
				lastRelease = time.Time{}
				if returned.IsZero() {
					grantedAt = now
				} else {
					after = append(after, now.Sub(returned))
				}
			}
			mu.Unlock()
		},
		releasing: func(w int) {
			mu.Lock()
			lastRelease, lastHolder, returned, grantedAt = time.Now(), w, time.Time{}, time.Time{}
			mu.Unlock()
		},
		released: func(w int) {
			now := time.Now()
			mu.Lock()
			if w == lastHolder && returned.IsZero() {
				returned = now
				if !grantedAt.IsZero() {
					after = append(after, 0) // the grant was seen first
					grantedAt = time.Time{}
				}
			}
			mu.Unlock()
		},
	}
	_, err = runLockWorkers(ctx, pg, variant, n, cfg.Duration, false, hooks)
	return lat, after, others, err
}

// cycleHooks see one worker's cycle: granted when its acquisition returned,
// releasing just before it releases.
type cycleHooks struct {
	granted, released func(w int)
	releasing         func(w int)
}

// runLockWorkers runs n workers on one lock of the variant for d, each
// looping acquire → (with write, a write under the lock) → release.
// fencegate's write is fenced (pgxgate.CommitBatch with the lease's token);
// the others' is the same UPDATE, unfenced (they have no fence).
//
// The variant's pool is new, so the window d starts only after a warm-up:
// until every worker completed a cycle, or lockWarmUp passed. Until then
// the hooks see nothing. It returns the window's length. Without it every
// window began with n connections opening and each new backend planning
// the statements and functions it runs for the first time: a cost paid
// once per connection, not per turn, which fell on the variants unevenly.
func runLockWorkers(ctx context.Context, pg *PG, variant string, n int, d time.Duration, write bool, h cycleHooks) (time.Duration, error) {
	resource := fmt.Sprintf("lockrun/%s/%d/%s", variant, n, randomHex(3))
	var (
		measuring atomic.Bool
		cycled    = make([]atomic.Bool, n) // worker w completed a cycle
		warmed    atomic.Int64             // how many have
		allWarm   = make(chan struct{})
	)
	for _, f := range []*func(int){&h.granted, &h.released, &h.releasing} {
		if *f == nil {
			*f = func(int) {}
		}
		hook := *f
		*f = func(w int) {
			if measuring.Load() {
				hook(w)
			}
		}
	}
	released := h.released
	h.released = func(w int) {
		released(w)
		if !cycled[w].Swap(true) && warmed.Add(1) == int64(n) {
			close(allWarm)
		}
	}

	// A pool of the variant's own, a connection per worker: waiters do not
	// queue for connections, and the advisory lock needs one each.
	pcfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		return 0, err
	}
	pcfg.MaxConns = int32(n + 2)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	store := pgxv5.New(pool)
	g := gate.New(store, nil)
	const key = 1

	var cycle func(ctx context.Context, w int) error
	switch variant {
	case vHandWait, vHandWaitMany, vHandPoll, vHandOff, vHandOffMany, vWriteAlone:
		k := 1
		if variant == vHandWaitMany || variant == vHandOffMany {
			k = handoverCoordinators
		}
		handOff := variant == vHandOff || variant == vHandOffMany
		coords := make([]*lease.Coordinator, k)
		for i := range coords {
			coords[i] = lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 30 * time.Second})
		}
		clients := make([]*lease.Client, n)
		for w := range clients {
			c, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("w%d", w), TTL: 30 * time.Second})
			if err != nil {
				return 0, err
			}
			clients[w] = c
		}
		cycle = func(ctx context.Context, w int) error {
			coord, c := coords[w%k], clients[w]
			var l *lease.Lease
			var err error
			if variant == vHandPoll {
				l, err = poll(ctx, coord, c, resource)
			} else {
				l, err = coord.AcquireWait(ctx, c, resource)
			}
			if err != nil {
				return err
			}
			h.granted(w)
			if variant == vWriteAlone {
				return writeAlone(ctx, g, pool, coord, c, l, h, w)
			}
			if handOff {
				// The write (if any), the release and the next waiter's
				// grant in one pipelined transaction.
				b := &pgx.Batch{}
				if write {
					b.Queue(updateItem, key)
				}
				h.releasing(w)
				_, err := handover.CommitBatch(ctx, g, pool, coord, l, b)
				if err != nil && ctx.Err() != nil {
					// The run ended mid-commit: release what may be left.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
					_, _ = coord.Release(rctx, l.Token())
					cancel()
				}
				return err
			}
			if write {
				b := &pgx.Batch{}
				b.Queue(updateItem, key)
				err = pgxgate.CommitBatch(ctx, g, pool, l.Token(), b)
			}
			tok, _ := c.Release(l)
			h.releasing(w)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			_, rerr := coord.Release(rctx, tok)
			cancel()
			if err == nil && rerr != nil {
				err = fmt.Errorf("release (the lock may still be held until its lease ends): %w", rerr)
			}
			return err
		}
	case vHandPglock:
		// pglock on the variant's pool (through database/sql), so that its
		// connections go when the variant ends.
		db := stdlib.OpenDBFromPool(pool)
		defer db.Close()
		pl, err := newPglock(db, pglockLease, 0, "bench")
		if err != nil {
			return 0, err
		}
		name := resource
		cycle = func(ctx context.Context, w int) error {
			l, err := pl.AcquireContext(ctx, name)
			for err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				// pglock bounds each attempt by its lease (1 s): under
				// contention one can run past it. The worker tries again.
				l, err = pl.AcquireContext(ctx, name)
			}
			if err != nil {
				return err
			}
			h.granted(w)
			if write {
				_, err = pool.Exec(ctx, updateItem, key)
			}
			h.releasing(w)
			if cerr := l.Close(); err == nil {
				err = cerr
			}
			return err
		}
	case vBareHandOff:
		cycle = bareHandOff(pool, resource, key, h)
	case vHandAdvisory:
		lockKey := advisoryBase + int64(rand.N(1<<20))
		cycle = func(ctx context.Context, w int) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, advisoryLock, lockKey); err != nil {
				return err
			}
			h.granted(w)
			if write {
				_, err = conn.Exec(ctx, updateItem, key)
			}
			h.releasing(w)
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			_, uerr := conn.Exec(uctx, advisoryUnlock, lockKey)
			cancel()
			if err == nil && uerr != nil {
				err = fmt.Errorf("advisory unlock (the lock may still be held by this session): %w", uerr)
			}
			return err
		}
	default:
		return 0, fmt.Errorf("unknown variant %q", variant)
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for w := range n {
		go func() {
			for {
				err := cycle(rctx, w)
				if err == nil {
					h.released(w)
					continue
				}
				if rctx.Err() != nil {
					err = nil
				}
				errs <- err
				return
			}
		}()
	}
	warm := time.NewTimer(lockWarmUp)
	select {
	case <-allWarm:
	case <-warm.C:
	case <-rctx.Done():
	}
	warm.Stop()
	measuring.Store(true)
	start := time.Now()
	window := time.NewTimer(d)
	select {
	case <-window.C:
	case <-rctx.Done():
	}
	window.Stop()
	measuring.Store(false)
	elapsed := time.Since(start)
	cancel()
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	return elapsed, errors.Join(all...)
}

// lockWarmUp bounds runLockWorkers' warm-up: a lock that starves some
// workers (pglock's) may leave one without a cycle for longer.
const lockWarmUp = 3 * time.Second

// bareHandOver hands scenario 3's bare SQL lease on in the write's
// implicit transaction: the fence checked, the next one drawn, the lease
// released when nobody waits.
const bareHandOver = `
UPDATE bench_lease SET fence = nextval('bench_lease_seq'), released = $3, expires_at = clock_timestamp() + interval '30 seconds'
 WHERE resource = $1 AND fence = $2 AND NOT released
RETURNING fence`

// bareHandOff is vBareHandOff's cycle, the least a durable hand-over
// costs: the write, the holder's fence checked and the next holder's drawn
// in one pipelined implicit transaction (one round trip, one durable
// commit), the next holder taken from a queue in this process's memory and
// woken by a channel. No waiter rows, no request rows, no floor, no
// announcement, no term dated from a touch: not a lock to use, the floor
// under fencegate's hand-over.
func bareHandOff(pool *pgxpool.Pool, resource string, key int, h cycleHooks) func(ctx context.Context, w int) error {
	var (
		mu    sync.Mutex
		held  bool
		queue []chan int64
	)
	take := func(ctx context.Context) (int64, error) {
		mu.Lock()
		if !held {
			held = true
			mu.Unlock()
			for {
				// The last holder marked the lock free before its release
				// was sent: a grant that comes first finds the lease live
				// (no row), and one that comes while it commits waits for
				// the row. Try again until the release is in.
				var fence int64
				err := pool.QueryRow(ctx, bareLeaseAcquire, resource).Scan(&fence)
				if !errors.Is(err, pgx.ErrNoRows) {
					return fence, err
				}
				runtime.Gosched()
			}
		}
		turn := make(chan int64, 1)
		queue = append(queue, turn)
		mu.Unlock()
		select {
		case fence := <-turn:
			return fence, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return func(ctx context.Context, w int) error {
		fence, err := take(ctx)
		if err != nil {
			return err
		}
		h.granted(w)
		mu.Lock()
		var next chan int64
		if len(queue) > 0 {
			next, queue = queue[0], queue[1:]
		} else {
			held = false // the next comes after this commit: its grant waits for the row
		}
		mu.Unlock()
		b := &pgx.Batch{}
		b.Queue(updateItem, key)
		var handed int64
		b.Queue(bareHandOver, resource, fence, next == nil).QueryRow(func(row pgx.Row) error { return row.Scan(&handed) })
		h.releasing(w)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if next != nil {
			next <- handed
		}
		return nil
	}
}

// writeAlone is vWriteAlone's worker: fenced writes under l, each its own
// durable commit, until ctx ends; each counts as a cycle.
func writeAlone(ctx context.Context, g *gate.Gate[pgx.Tx], pool *pgxpool.Pool, coord *lease.Coordinator, c *lease.Client, l *lease.Lease, h cycleHooks, w int) error {
	defer func() {
		tok, _ := c.Release(l)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		_, _ = coord.Release(rctx, tok)
		cancel()
	}()
	for ctx.Err() == nil {
		b := &pgx.Batch{}
		b.Queue(updateItem, 1)
		if err := pgxgate.CommitBatch(ctx, g, pool, l.Token(), b); err != nil {
			return err
		}
		h.released(w)
	}
	return ctx.Err()
}

// fairWorkers is the fairness run's worker count.
const fairWorkers = 64

// Fairness is scenario fairness: 64 workers loop acquire → write under the
// lock → release on one resource, and the run counts each worker's
// completed cycles. The variants take turns in cfg.Rounds interleaved rounds
// (forward, then backward), each round a share of cfg.FairDuration, and a
// worker's count is its sum over the rounds.
func Fairness(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	d := cfg.FairDuration
	if d <= 0 {
		d = 10 * time.Second
	}
	rounds := max(cfg.Rounds, 1)
	r.f("## Fairness: %d workers on one lock for %v\n\n", fairWorkers, d)
	r.f("Each worker loops: acquire the lock, write the same row under it, release. fencegate's write is fenced (pgxgate.CommitBatch with the lease's token: the fence check and the UPDATE in one round trip); pglock's and the advisory lock's is the bare UPDATE, on the advisory lock's own connection. Cycles are counted per worker when its release returns; a lock that starves workers shows a min of 0 and no ratio. Each run opens a pool of its own, and its window starts once every worker has completed a cycle (or after %v): opening the connections and each new backend's first statements are a cost per connection, not per turn, and are not counted. The variants take turns in %d interleaved rounds of %v each (forward, then backward), loopback; a worker's cycles are summed over the rounds, and *vs advisory* is the median of the per-round throughput ratios.\n\n", lockWarmUp, rounds, d/time.Duration(rounds))
	r.f("| variant | cycles/s | vs advisory | cycles per worker: min | median | max | max ÷ min |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	counts := make(map[string][]int64, len(fairVariants))
	elapsed := make(map[string]time.Duration, len(fairVariants))
	rates := make(map[string][]float64, len(fairVariants)) // per round
	for _, v := range fairVariants {
		counts[v] = make([]int64, fairWorkers)
	}
	// The bound: fencegate's worker alone, never waiting. Only one holder
	// writes at a time, so fencegate's throughput under contention cannot
	// exceed its lone worker's (a hand-over only adds to each cycle).
	alone := []string{vHandWait, vWriteAlone, vHandAdvisory}
	aloneRates := map[string][]float64{}
	for round := range rounds {
		order := slices.Clone(fairVariants)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range alone {
			prog(cfg, fmt.Sprintf("fairness: round %d/%d, %s, 1 worker alone, %v", round+1, rounds, v, d/time.Duration(rounds)))
			var n atomic.Int64
			el, err := runLockWorkers(ctx, pg, v, 1, d/time.Duration(rounds), true, cycleHooks{released: func(int) { n.Add(1) }})
			if err != nil {
				return fmt.Errorf("%s alone: %w", v, err)
			}
			aloneRates[v] = append(aloneRates[v], float64(n.Load())/el.Seconds())
		}
		for _, v := range order {
			prog(cfg, fmt.Sprintf("fairness: round %d/%d, %s, %d workers, %v", round+1, rounds, v, fairWorkers, d/time.Duration(rounds)))
			var mu sync.Mutex
			var n int64
			el, err := runLockWorkers(ctx, pg, v, fairWorkers, d/time.Duration(rounds), true, cycleHooks{released: func(w int) {
				mu.Lock()
				counts[v][w]++
				n++
				mu.Unlock()
			}})
			if err != nil {
				return fmt.Errorf("%s: %w", v, err)
			}
			elapsed[v] += el
			rates[v] = append(rates[v], float64(n)/el.Seconds())
		}
	}
	for _, v := range fairVariants {
		c := slices.Clone(counts[v])
		slices.Sort(c)
		lo, med, hi := c[0], c[len(c)/2], c[len(c)-1]
		var total int64
		for _, x := range c {
			total += x
		}
		ratio := "–"
		if lo > 0 {
			ratio = fmt.Sprintf("%.2f", float64(hi)/float64(lo))
		}
		per := ratios(rates[v], rates[vHandAdvisory])
		vs := "–"
		if len(per) > 0 {
			slices.Sort(per)
			vs = fmt.Sprintf("%.2fx", per[len(per)/2])
		}
		r.f("| %s | %.0f | %s | %d | %d | %d | %s |\n", v, float64(total)/elapsed[v].Seconds(), vs, lo, med, hi, ratio)
		if len(per) > 0 {
			r.set(per[len(per)/2], "fairness", v, "vs advisory")
		}
		if lo > 0 {
			r.set(float64(hi)/float64(lo), "fairness", v, "max/min")
		}
	}
	bound := median(ratios(aloneRates[vHandWait], rates[vHandAdvisory]))
	boundOne := median(ratios(aloneRates[vWriteAlone], rates[vHandAdvisory]))
	r.f("\nThe bound: one worker alone (no one waiting) ran %.0f cycles/s with fencegate and %.0f with the advisory lock (medians of %d rounds, in the same rounds). ", median(aloneRates[vHandWait]), median(aloneRates[vHandAdvisory]), rounds)
	r.f("On one lock only one holder writes at a time, so fencegate's throughput under contention cannot exceed its lone worker's: each cycle waits for two durable commits in series (the grant, and the fenced write) where the advisory lock's waits for one (its grant is in the server's memory), and a hand-over only adds to that. ")
	r.f("fencegate alone ÷ the advisory lock's queue with %d workers = **%.2fx** (median of per-round ratios): the most fencegate's contended ratio can reach.\n\n", fairWorkers, bound)
	r.f("With the hand-over in the write's commit a turn costs one durable commit, as the advisory lock's does, so that bound no longer holds; the next is one worker's fenced writes back to back under one lease (%.0f/s): a turn cannot be cheaper than its write's commit, and it adds the waiter's wake-up (an announcement) and its read of its lease. Fenced write alone ÷ the advisory lock's queue = **%.2fx**: the most the hand-over variants can reach.\n\n", median(aloneRates[vWriteAlone]), boundOne)
	boundBare := median(ratios(rates[vBareHandOff], rates[vHandAdvisory]))
	r.f("Beside them, the *bare SQL hand-over*, with the same %d workers, is the protocol without fencegate's rules: a lease row whose fence the write's own commit checks and hands to the next holder (one round trip, one durable commit), that holder taken from a queue in this process's memory and woken by a channel. It has none of what makes fencegate's hand-over safe to use: no waiter rows (a waiter in another process, or after a crash, has no place), no request rows (a retried acquisition could be granted twice), no batch guard (the write's SQL could end its transaction), no floor, no announcement, no term dated from the waiter's touch. Bare SQL hand-over ÷ the advisory lock's queue = **%.2fx**: one durable commit per turn passes the advisory queue's three round trips; what fencegate's turn adds to it is the server time of those rules.\n\n", fairWorkers, boundBare)
	return nil
}

// ratios are xs ÷ ref round by round, for the rounds where ref ran.
func ratios(xs, ref []float64) []float64 {
	var out []float64
	for i, a := range ref {
		if a > 0 && i < len(xs) {
			out = append(out, xs[i]/a)
		}
	}
	return out
}

// poll is the CLI's former --wait: Acquire, and while held sleep the
// remaining time clamped to [10ms, 200ms], jittered by ±25%.
func poll(ctx context.Context, coord *lease.Coordinator, c *lease.Client, resource string) (*lease.Lease, error) {
	for {
		req, err := c.BeginAcquire(resource)
		if err != nil {
			return nil, err
		}
		out, err := coord.Acquire(ctx, req)
		delay := 200 * time.Millisecond
		switch {
		case err == nil && out.OK:
			return c.CompleteAcquire(req, out.Grant)
		case err == nil:
			delay = min(max(out.RetryAfter, 10*time.Millisecond), delay)
		case !errors.Is(err, lease.ErrBusy):
			return nil, err
		}
		delay = delay*3/4 + rand.N(delay/2+1)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
