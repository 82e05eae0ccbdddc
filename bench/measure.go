package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is one timed run of one variant.
type Sample struct {
	Ops      int
	Errors   int
	FirstErr error
	Elapsed  time.Duration
	Lat      []time.Duration // per successful op
}

// Throughput is successful ops per second.
func (s Sample) Throughput() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// KeyOf picks the row a worker writes.
type KeyOf func(worker int) int

// OneKey makes every worker write row 1; Distinct gives each its own row.
var (
	OneKey   KeyOf = func(int) int { return 1 }
	Distinct KeyOf = func(w int) int { return w%Keys + 1 }
)

// stragglerGrace is how long Run waits at least for ops still running when
// a round ends: longer than pglock's lease, so that a pglock waiter's sleep
// ends and it takes the lock over instead of being cut off in every round.
const stragglerGrace = 2 * pglockLease

// Run runs op in workers goroutines for d and returns what happened. An op
// still running max(d, stragglerGrace) after the end has its context
// cancelled, and is counted neither as an op nor as an error.
func Run(ctx context.Context, op Op, workers int, keyOf KeyOf, d time.Duration) Sample {
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		mu      sync.Mutex
		out     Sample
		started = time.Now()
	)
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range workers {
		wg.Go(func() {
			key := keyOf(w)
			lat := make([]time.Duration, 0, 4096)
			var errs int
			var first error
			for !stop.Load() {
				t0 := time.Now()
				if err := op(opCtx, key); err != nil {
					if opCtx.Err() != nil {
						break
					}
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			out.Lat = append(out.Lat, lat...)
			out.Ops += len(lat)
			out.Errors += errs
			if out.FirstErr == nil {
				out.FirstErr = first
			}
			mu.Unlock()
		})
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	stop.Store(true)
	straggler := time.AfterFunc(max(d, stragglerGrace), cancel)
	wg.Wait()
	straggler.Stop()
	out.Elapsed = time.Since(started)
	return out
}

// Variant is one contender in a comparison.
type Variant struct {
	Name string
	Op   Op
	// Rewarm says that the variant's connections may have been closed
	// since its last run (waitSampler.wrapOn closes the other pools' when
	// the variant running changes): Interleave warms it again before each
	// run, so that no run pays for opening connections and planning on
	// new backends.
	Rewarm bool
}

// warmOps is how many ops each worker runs in Warm.
const warmOps = 3

// Warm runs op warmOps times in each of workers goroutines, every one
// under its own key, and ignores what happens: with a pool of about
// workers connections, each is opened and has run op once.
func Warm(ctx context.Context, op Op, workers int, keyOf KeyOf) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range warmOps {
				_ = op(ctx, keyOf(w))
			}
		})
	}
	wg.Wait()
}

// Result is every round of one variant.
type Result struct {
	Name   string
	Rounds []Sample
}

// Interleave runs each variant once per round, alternating their order
// (forward on even rounds, backward on odd ones) so that drift on a shared
// machine hits every variant alike. Each variant warms up for a fifth of d
// first (statement preparation on every connection), and a Rewarm one
// again before each run.
func Interleave(ctx context.Context, vs []Variant, workers int, keyOf KeyOf, d time.Duration, rounds int, progress func(string)) []Result {
	res := make([]Result, len(vs))
	for i, v := range vs {
		res[i].Name = v.Name
		Run(ctx, v.Op, workers, keyOf, d/5)
	}
	for r := range rounds {
		order := make([]int, len(vs))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			if vs[i].Rewarm {
				Warm(ctx, vs[i].Op, workers, keyOf)
			}
			s := Run(ctx, vs[i].Op, workers, keyOf, d)
			res[i].Rounds = append(res[i].Rounds, s)
			msg := fmt.Sprintf("round %d/%d %-28s %8.0f ops/s  p99 %s", r+1, rounds, vs[i].Name, s.Throughput(), fmtDur(Quantile(s.Lat, 0.99)))
			if s.Errors > 0 {
				msg += fmt.Sprintf("  (%d errors: %v)", s.Errors, s.FirstErr)
			}
			progress(msg)
		}
	}
	return res
}

// MedianThroughput is the median over rounds of ops per second.
func (r Result) MedianThroughput() float64 {
	t := make([]float64, len(r.Rounds))
	for i, s := range r.Rounds {
		t[i] = s.Throughput()
	}
	return median(t)
}

// Latency is a quantile of every round's latencies pooled.
func (r Result) Latency(q float64) time.Duration {
	var all []time.Duration
	for _, s := range r.Rounds {
		all = append(all, s.Lat...)
	}
	return Quantile(all, q)
}

// Errors counts failed ops over all rounds.
func (r Result) Errors() int {
	n := 0
	for _, s := range r.Rounds {
		n += s.Errors
	}
	return n
}

// Ratio is the median over rounds of a's throughput over b's in the same
// round: paired, so drift between rounds cancels. It is NaN when b
// completed nothing in any round.
func Ratio(a, b Result) float64 {
	n := min(len(a.Rounds), len(b.Rounds))
	rs := make([]float64, 0, n)
	for i := range n {
		if bt := b.Rounds[i].Throughput(); bt > 0 {
			rs = append(rs, a.Rounds[i].Throughput()/bt)
		}
	}
	if len(rs) == 0 {
		return math.NaN() // b never completed an op: no ratio, rather than 0
	}
	return median(rs)
}

// RatioSpread is the lowest and highest per-round ratio.
func RatioSpread(a, b Result) (lo, hi float64) {
	n := min(len(a.Rounds), len(b.Rounds))
	lo, hi = 1e18, 0
	for i := range n {
		if bt := b.Rounds[i].Throughput(); bt > 0 {
			x := a.Rounds[i].Throughput() / bt
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	return lo, hi
}

// Quantile returns the q-quantile of ds (nearest rank); 0 when empty.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}

// LatencyRatio is the median over rounds of a's q-quantile latency over
// b's in the same round: below 1, a is the faster.
func LatencyRatio(a, b Result, q float64) float64 {
	n := min(len(a.Rounds), len(b.Rounds))
	rs := make([]float64, 0, n)
	for i := range n {
		if bl := Quantile(b.Rounds[i].Lat, q); bl > 0 {
			rs = append(rs, float64(Quantile(a.Rounds[i].Lat, q))/float64(bl))
		}
	}
	return median(rs)
}
