package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/lease"
)

// leaseEnv is a coordinator and a client on a schema of their own.
type leaseEnv struct {
	pg     *PG
	coord  *lease.Coordinator
	client *lease.Client
}

func newLeaseEnv(ctx context.Context, cfg Config, conns int32, ttl time.Duration) (*leaseEnv, error) {
	pg, err := NewPG(ctx, cfg.PostgresURL, conns)
	if err != nil {
		return nil, err
	}
	client, err := lease.NewClient(lease.ClientOptions{Holder: "bench-holder", TTL: ttl})
	if err != nil {
		pg.Close(ctx)
		return nil, err
	}
	return &leaseEnv{pg: pg, coord: lease.NewCoordinator(pg.Pgx, &lease.CoordinatorOptions{TTL: ttl}), client: client}, nil
}

func (e *leaseEnv) acquire(ctx context.Context, resource string) (*lease.Lease, error) {
	req, err := e.client.BeginAcquire(resource)
	if err != nil {
		return nil, err
	}
	out, err := e.coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, fmt.Errorf("%s held by %s", resource, out.HeldBy)
	}
	return e.client.CompleteAcquire(req, out.Grant)
}

func (e *leaseEnv) release(ctx context.Context, l *lease.Lease) error {
	tok, err := e.client.Release(l)
	if err != nil {
		return err
	}
	_, err = e.coord.Release(ctx, tok)
	return err
}

func (e *leaseEnv) renew(ctx context.Context, l *lease.Lease) error {
	req, err := e.client.BeginRenewal(l)
	if err != nil {
		return err
	}
	out, err := e.coord.Renew(ctx, req)
	if err != nil {
		return err
	}
	if !out.OK {
		return errors.New("renewal refused")
	}
	_, err = e.client.CompleteRenewal(req, out.Grant)
	return err
}

// LeaseCosts is scenario 3 and the acquire+release comparison.
func LeaseCosts(ctx context.Context, cfg Config, r *Report) error {
	e, err := newLeaseEnv(ctx, cfg, 8, 30*time.Second)
	if err != nil {
		return err
	}
	defer e.pg.Close(context.WithoutCancel(ctx))

	r.f("## 3. Lease costs: acquire+release, and renewal per held lease\n\n")
	r.f("One worker, Postgres through pgx. *fencegate acquire+release* is BeginAcquire, Coordinator.Acquire (a new fence from the sequence, the lease row, and the floor raised in the same transaction), CompleteAcquire, Release, Coordinator.Release. ")
	r.f("*advisory session lock+unlock* is `pg_advisory_lock` then `pg_advisory_unlock` on one pooled connection. pglock's Acquire+Close could not be measured (see the top), so the target “≤ 0.6x pglock's p50” has no verdict.\n\n")
	var seq atomic.Int64
	acqRel := func(ctx context.Context, key int) error {
		l, err := e.acquire(ctx, fmt.Sprintf("lease/%d", key))
		if err != nil {
			return err
		}
		seq.Add(1)
		return e.release(ctx, l)
	}
	advisory := func(ctx context.Context, key int) error {
		conn, err := e.pg.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, advisoryLock, advisoryBase+int64(key)); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, advisoryUnlock, advisoryBase+int64(key))
		return err
	}
	res := Interleave(ctx, []Variant{
		{"fencegate acquire+release", acqRel},
		{"advisory session lock+unlock", advisory},
	}, 1, Distinct, cfg.Duration, cfg.Rounds, prefix(cfg, "3/acquire"))
	r.table(res, 1)
	r.Notes = append(r.Notes, fmt.Sprintf("lease acquire+release p50 %s (advisory lock+unlock %s; pglock: not measurable here)",
		fmtDur(res[0].Latency(0.5)), fmtDur(res[1].Latency(0.5))))

	var held []*lease.Lease
	for k := range 8 {
		l, err := e.acquire(ctx, fmt.Sprintf("renew/%d", k))
		if err != nil {
			return err
		}
		held = append(held, l)
	}
	renew := func(ctx context.Context, key int) error { return e.renew(ctx, held[(key-1)%len(held)]) }
	var rows []Result
	for _, w := range []int{1, 8} {
		res := Interleave(ctx, []Variant{{fmt.Sprintf("renewal, %d worker(s)", w), renew}}, w, Distinct, cfg.Duration, cfg.Rounds, prefix(cfg, "3/renew"))
		rows = append(rows, res[0])
	}
	r.f("Renewal (BeginRenewal, Coordinator.Renew: one conditional UPDATE; CompleteRenewal):\n\n| | median renewals/s | p50 | p99 |\n|---|---:|---:|---:|\n")
	for _, x := range rows {
		r.f("| %s | %.0f | %s | %s |\n", x.Name, x.MedianThroughput(), fmtDur(x.Latency(0.5)), fmtDur(x.Latency(0.99)))
	}
	capacity := rows[1].MedianThroughput()
	r.f("\nlease.Hold renews when a third of the term has passed, so a held lease costs 3/TTL renewals per second: at TTL 30s, 0.1/s, one %s round trip each. ", fmtDur(rows[0].Latency(0.5)))
	r.f("This database sustains about %.0f renewals/s with 8 workers, i.e. about %.0f leases held at TTL 30s before renewals alone saturate it. ", capacity, capacity/0.1)
	r.f("An advisory session lock needs no renewal, but pins a connection (a backend process) for as long as it is held, and never expires while that session lives (scenario 5).\n\n")
	r.Notes = append(r.Notes, fmt.Sprintf("renewal: p50 %s per renewal; capacity ≈ %.0f renewals/s ≈ %.0f leases at TTL 30s", fmtDur(rows[0].Latency(0.5)), capacity, capacity/0.1))
	return nil
}

// ManyLeases is scenario 6: n leases held in one process with lease.Hold.
func ManyLeases(ctx context.Context, cfg Config, r *Report) error {
	r.f("## 6. Many leases held in one process\n\n")
	r.f("n goroutines each run lease.Hold (TTL 30s, renewing every 10s) around a function that blocks; a pgx pool of 8 connections serves them all. Memory is the Go heap in use after GC, measured before and while held; the renewal sweep renews all n leases once with 8 workers.\n\n")
	r.f("| leases | acquire all | heap per lease | goroutines per lease | renewal sweep | renewals/s | load at TTL 30s (n/10 per s) | release all |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range cfg.Leases {
		if err := manyLeases(ctx, cfg, n, r); err != nil {
			return err
		}
	}
	r.f("\n")
	return nil
}

func manyLeases(ctx context.Context, cfg Config, n int, r *Report) error {
	e, err := newLeaseEnv(ctx, cfg, 8, 30*time.Second)
	if err != nil {
		return err
	}
	defer e.pg.Close(context.WithoutCancel(ctx))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	holdCtx, release := context.WithCancel(ctx)
	var (
		mu     sync.Mutex
		leases = make([]*lease.Lease, 0, n)
		ready  sync.WaitGroup
		done   sync.WaitGroup
		failed atomic.Int64
	)
	start := time.Now()
	ready.Add(n)
	for i := range n {
		done.Go(func() {
			called := false
			err := lease.Hold(holdCtx, e.client, e.coord, fmt.Sprintf("many/%d", i), func(ctx context.Context, l *lease.Lease) error {
				called = true
				mu.Lock()
				leases = append(leases, l)
				mu.Unlock()
				ready.Done()
				<-ctx.Done()
				return nil
			})
			if !called {
				failed.Add(1)
				ready.Done()
				_ = err
			}
		})
	}
	ready.Wait()
	acquireAll := time.Since(start)
	prog(cfg, fmt.Sprintf("6: %d leases held (%d failed) in %s", len(leases), failed.Load(), acquireAll.Round(time.Millisecond)))
	runtime.GC()
	runtime.ReadMemStats(&m1)
	g1 := runtime.NumGoroutine()

	sweepStart := time.Now()
	var next atomic.Int64
	var sweepWG sync.WaitGroup
	var renewErr atomic.Int64
	for range 8 {
		sweepWG.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(leases) {
					return
				}
				if err := e.renew(ctx, leases[i]); err != nil {
					renewErr.Add(1)
				}
			}
		})
	}
	sweepWG.Wait()
	sweep := time.Since(sweepStart)
	rate := float64(len(leases)) / sweep.Seconds()

	relStart := time.Now()
	release()
	done.Wait()
	relAll := time.Since(relStart)
	heapPer := float64(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / float64(max(len(leases), 1))
	r.f("| %d | %s | %.1f KiB | %.1f | %s | %.0f | %.0f%% of that rate | %s |\n", n, acquireAll.Round(time.Millisecond),
		heapPer/1024, float64(g1-g0)/float64(max(len(leases), 1)), sweep.Round(time.Millisecond), rate, 100*float64(n)/10/rate, relAll.Round(time.Millisecond))
	r.Notes = append(r.Notes, fmt.Sprintf("%d leases in one process: %.1f KiB heap and %.1f goroutines per lease; renewing them at TTL 30s uses ≈ %.0f%% of the measured renewal rate",
		n, heapPer/1024, float64(g1-g0)/float64(max(len(leases), 1)), 100*float64(n)/10/rate))
	if failed.Load() > 0 || renewErr.Load() > 0 {
		r.f("\n(%d holds failed to acquire, %d renewals failed)\n", failed.Load(), renewErr.Load())
	}
	return nil
}
