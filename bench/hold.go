package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// holdPoolConns is the pool the hold and queue scenarios share among all
// their leases: small, as max_connections is shared.
const holdPoolConns = 8

// renewalCounter is a pgx tracer that counts batch renewals (statements,
// the leases they renewed, and failures) while on.
type renewalCounter struct {
	on                        atomic.Bool
	statements, rows, failure atomic.Int64
}

type renewalKey struct{}

func (c *renewalCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if c.on.Load() && strings.Contains(d.SQL, "fencegate_renew_leases(") {
		return context.WithValue(ctx, renewalKey{}, true)
	}
	return ctx
}

func (c *renewalCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(renewalKey{}) == nil {
		return
	}
	c.statements.Add(1)
	if d.Err != nil {
		c.failure.Add(1)
		return
	}
	c.rows.Add(d.CommandTag.RowsAffected())
}

// tracedPool opens a pool of conns on pg's schema (along pg's net) with
// tracer.
func tracedPool(ctx context.Context, pg *PG, conns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = conns
	cfg.ConnConfig.Tracer = tracer
	return pgxpool.NewWithConfig(ctx, cfg)
}

// rssBytes reads the process's resident set from /proc (0 where there is
// none).
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// HoldMany is the hold scenario: n leases held in one process with
// lease.Hold, renewed by the Client's one keeper in batch statements,
// over every net.
func HoldMany(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 2)
	if err != nil {
		return err
	}
	defer done()
	r.f("## Leases held in one process, one keeper per Client (`-only hold`)\n\n")
	r.f("n goroutines each run lease.Hold around a function that blocks, all through one Client and a pgx pool of %d connections; the Client's keeper renews every due lease in one statement per tick (Coordinator.RenewBatch). The *Keep* rows hold the same leases as lease.Kept handles (acquired by %d workers, then lease.Keep), with no goroutine per lease. The leases are held for two terms once all are acquired (one term at 100k, whose TTL is 30 s); statements/s and leases renewed/s are counted over that window. RSS is the whole process's resident set, the pools included: *while held* after one GC, *settled* after returning freed memory to the OS (debug.FreeOSMemory, three times: stacks grown during the acquisitions shrink by half per GC), as a process holding its leases for long settles at; per lease, less the settled RSS before the Holds started. Goroutines per lease counts the callers' own (one each, blocked in Hold; none with Keep). Keep runs before Hold at each size, so its baseline is the lower. Above 10k leases only Keep is run, on the first network only, to keep the scenario within minutes. The lost column counts leases lost from their start to the end of the window.\n\n", holdPoolConns, keepWorkers)
	r.f("| API | leases | TTL | network | acquire all | RSS while held | RSS settled | settled RSS per lease | heap per lease | goroutines per lease | renewal statements/s | leases renewed/s | failed batches | lost | not acquired |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range cfg.HoldLeases {
		ttl, window := 6*time.Second, 12*time.Second
		if n > 10_000 {
			// Acquiring 100k takes longer than a 6s term's first renewal;
			// one term (three renewals each) keeps the run short.
			ttl, window = 30*time.Second, 30*time.Second
		}
		apis := []string{"Keep", "Hold"} // Keep first: its RSS owes nothing to Hold's stacks
		for i, pg := range pgs {
			if n > 10_000 {
				// 100k: Keep only, on the first net only, to keep the run
				// within minutes (Hold's cost per lease is the 10k rows').
				if i > 0 {
					break
				}
				apis = apis[:1]
			}
			for _, api := range apis {
				if err := holdMany(ctx, cfg, pg, api, n, ttl, window, r); err != nil {
					return err
				}
			}
		}
	}
	r.f("\n")
	return nil
}

// holdMany holds n leases for window through api: "Hold" (a goroutine per
// lease blocked in lease.Hold) or "Keep" (a lease.Kept handle per lease,
// no goroutine of its own).
func holdMany(ctx context.Context, cfg Config, pg *PG, api string, n int, ttl, window time.Duration, r *Report) error {
	counter := &renewalCounter{}
	pool, err := tracedPool(ctx, pg, holdPoolConns, counter)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := pgxv5.New(pool)
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench-hold", TTL: ttl})
	if err != nil {
		return err
	}
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: ttl})
	prefix := fmt.Sprintf("hold/%s/%d/%d/", pg.Net, n, time.Now().UnixNano())

	runtime.GC()
	debug.FreeOSMemory()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rss0, g0 := rssBytes(), runtime.NumGoroutine()

	holdCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		ready, done      sync.WaitGroup
		held, lost, fail atomic.Int64
		firstErr         atomic.Pointer[error]
	)
	start := time.Now()
	var kept []*lease.Kept // the Keep variant's handles
	if api == "Keep" {
		kept = make([]*lease.Kept, n)
		keepMany(holdCtx, client, coord, prefix, kept, &held, &fail, &firstErr)
	} else {
		ready.Add(n)
	}
	for i := range n {
		if api == "Keep" {
			break // no goroutine per lease
		}
		done.Go(func() {
			called := false
			err := lease.Hold(holdCtx, client, coord, prefix+strconv.Itoa(i), func(ctx context.Context, l *lease.Lease) error {
				called = true
				held.Add(1)
				ready.Done()
				<-ctx.Done()
				if errors.Is(context.Cause(ctx), lease.ErrLeaseLost) {
					lost.Add(1)
				}
				return nil
			})
			if !called {
				fail.Add(1)
				ready.Done()
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	ready.Wait()
	acquireAll := time.Since(start)
	prog(cfg, fmt.Sprintf("hold [%s, %s]: %d leases held (%d not acquired) in %s", pg.Net, api, held.Load(), fail.Load(), acquireAll.Round(time.Millisecond)))

	counter.on.Store(true)
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return ctx.Err()
	}
	counter.on.Store(false)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	rss1, g1 := rssBytes(), runtime.NumGoroutine()
	// Stacks grown during the acquisitions shrink by half per GC, and
	// freed pages go back to the OS only when scavenged: what a process
	// holding its leases for long settles at.
	for range 3 {
		debug.FreeOSMemory()
	}
	rss2 := rssBytes()
	for _, k := range kept {
		if k != nil && errors.Is(context.Cause(k.Context()), lease.ErrLeaseLost) {
			lost.Add(1)
		}
	}
	lostInWindow := lost.Load()
	stop()
	done.Wait()
	releaseAll(ctx, kept)

	per := float64(max(held.Load(), 1))
	r.f("| %s | %d | %s | %s | %s | %.1f MiB | %.1f MiB | %.1f KiB | %.1f KiB | %.2f | %.1f | %.0f | %d | %d | %d |\n",
		api, n, ttl, pg.Net, acquireAll.Round(time.Millisecond), float64(rss1)/(1<<20), float64(rss2)/(1<<20), float64(rss2-rss0)/per/1024,
		float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/per/1024, float64(g1-g0)/per,
		float64(counter.statements.Load())/window.Seconds(), float64(counter.rows.Load())/window.Seconds(),
		counter.failure.Load(), lostInWindow, fail.Load())
	if e := firstErr.Load(); e != nil {
		r.f("\n%s, %d leases: first error `%v`\n\n", pg.Net, n, *e)
	}
	return nil
}

// keepWorkers is how many goroutines acquire (and release) the Keep
// variant's leases.
const keepWorkers = 64

// keepMany acquires len(kept) leases named prefix+i and keeps each with
// lease.Keep, keepWorkers at a time.
func keepMany(ctx context.Context, client *lease.Client, coord *lease.Coordinator, prefix string, kept []*lease.Kept, held, fail *atomic.Int64, firstErr *atomic.Pointer[error]) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range keepWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(kept); i = int(next.Add(1) - 1) {
				k, err := keepOne(ctx, client, coord, prefix+strconv.Itoa(i))
				if err != nil {
					fail.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				kept[i] = k
				held.Add(1)
			}
		})
	}
	wg.Wait()
}

func keepOne(ctx context.Context, client *lease.Client, coord *lease.Coordinator, resource string) (*lease.Kept, error) {
	req, err := client.BeginAcquire(resource)
	if err != nil {
		return nil, err
	}
	out, err := coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, fmt.Errorf("%s held by %s", resource, out.HeldBy)
	}
	l, err := client.CompleteAcquire(req, out.Grant)
	if err != nil {
		return nil, err
	}
	return lease.Keep(ctx, client, coord, l)
}

// releaseAll releases every handle, keepWorkers at a time.
func releaseAll(ctx context.Context, kept []*lease.Kept) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range keepWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(kept); i = int(next.Add(1) - 1) {
				if kept[i] != nil {
					_ = kept[i].Release(ctx) // the lease expires by itself otherwise
				}
			}
		})
	}
	wg.Wait()
}

// QueuedAcquirers is the queue scenario: 1,000 acquirers at once for a
// small pool at TTL 3s. Each acquisition's lost term is measured twice from
// the same grant: as dated from the request's making (BeginAcquire, before
// the wait for a connection: what the coordinator did before) and from its
// SentAt (read again once the connection is in hand).
func QueuedAcquirers(ctx context.Context, cfg Config, r *Report) error {
	const (
		acquirers = 1000
		conns     = 4
		ttl       = 3 * time.Second
	)
	pgs, done, err := schemaOnNets(ctx, cfg, conns)
	if err != nil {
		return err
	}
	defer done()
	r.f("## Term lost before the request leaves (`-only queue`)\n\n")
	r.f("%d goroutines acquire distinct resources at once through a pgx pool of %d connections, TTL %s. The term lost is TTL minus the time the holder has left when the grant arrives. Both columns come from the same grants: *stamped at BeginAcquire* dates the lease from before the wait for a connection (as the coordinator did before); *stamped with the connection in hand* from Request.SentAt, which the coordinator now reads again once it holds the connection, just before the statement goes out.\n\n", acquirers, conns, ttl)
	r.f("| network | stamp | term lost p50 | p99 | max | grants with no time left |\n|---|---|---:|---:|---:|---:|\n")
	clk := clock.System() // the Client's clock: one origin per process
	for _, pg := range pgs {
		client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench-queue", TTL: ttl})
		if err != nil {
			return err
		}
		coord := lease.NewCoordinator(pg.Pgx, &lease.CoordinatorOptions{TTL: ttl})
		prefix := fmt.Sprintf("queue/%s/%d/", pg.Net, time.Now().UnixNano())
		before, after := make([]time.Duration, acquirers), make([]time.Duration, acquirers)
		leases := make([]*lease.Lease, acquirers)
		var wg sync.WaitGroup
		var firstErr atomic.Pointer[error]
		start := make(chan struct{})
		for i := range acquirers {
			wg.Go(func() {
				<-start
				made := clk.Now()
				req, err := client.BeginAcquire(prefix + strconv.Itoa(i))
				if err == nil {
					var out lease.AcquireOutcome
					if out, err = coord.Acquire(ctx, req); err == nil && out.OK {
						arrival := clk.Now()
						before[i] = ttl - (made.Add(out.Grant.TTL).Sub(arrival))
						after[i] = ttl - (req.SentAt().Add(out.Grant.TTL).Sub(arrival))
						leases[i], err = client.CompleteAcquire(req, out.Grant)
					} else if err == nil {
						err = fmt.Errorf("%s held by %s", req.Resource, out.HeldBy)
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			})
		}
		close(start)
		wg.Wait()
		if e := firstErr.Load(); e != nil {
			return fmt.Errorf("queue [%s]: %w", pg.Net, *e)
		}
		for _, l := range leases {
			tok, _ := client.Release(l)
			if _, err := coord.Release(ctx, tok); err != nil {
				return err
			}
		}
		for _, v := range []struct {
			name string
			lost []time.Duration
		}{{"stamped at BeginAcquire", before}, {"stamped with the connection in hand", after}} {
			slices.Sort(v.lost)
			none := 0
			for _, d := range v.lost {
				if d >= ttl {
					none++
				}
			}
			q := func(p float64) time.Duration { return v.lost[min(int(p*float64(len(v.lost))), len(v.lost)-1)] }
			r.f("| %s | %s | %s (%.1f%%) | %s (%.1f%%) | %s (%.1f%%) | %d |\n", pg.Net, v.name,
				fmtDur(q(0.5)), 100*q(0.5).Seconds()/ttl.Seconds(), fmtDur(q(0.99)), 100*q(0.99).Seconds()/ttl.Seconds(),
				fmtDur(v.lost[len(v.lost)-1]), 100*v.lost[len(v.lost)-1].Seconds()/ttl.Seconds(), none)
		}
		prog(cfg, fmt.Sprintf("queue [%s]: done", pg.Net))
	}
	r.f("\n")
	return nil
}
