package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/lease"
)

// leaseEnv is a coordinator and a client over one PG.
type leaseEnv struct {
	pg     *PG
	coord  *lease.Coordinator
	client *lease.Client
}

func newLeaseEnv(pg *PG, ttl time.Duration) (*leaseEnv, error) {
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench-holder", TTL: ttl})
	if err != nil {
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

// Names of scenario 3's variants.
const (
	vLeaseGate     = "fencegate acquire+release"
	vLeasePglock   = "pglock Acquire+Close, heartbeat off"
	vLeasePglockHB = "pglock Acquire+Close, heartbeat on"
	vLeaseAdvisory = "advisory session lock+unlock"
	vLeaseBare     = "bound: bare SQL lease (one durable upsert with nextval, one release)"
	vRenewGate     = "fencegate renewal"
	vRenewPglock   = "pglock SendHeartbeat"
)

// LeaseCosts is scenario 3: acquire+release against pglock and an advisory
// lock, and renewal against pglock's heartbeat, over every net.
func LeaseCosts(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 8)
	if err != nil {
		return err
	}
	defer done()
	envs := map[string]*leaseEnv{}
	for _, t := range pgs {
		if envs[t.Net], err = newLeaseEnv(t, 30*time.Second); err != nil {
			return err
		}
	}

	r.f("## 3. Lease costs: acquire+release, and renewal per held lease\n\n")
	r.f("One worker, Postgres through pgx. *fencegate acquire+release* is BeginAcquire, Coordinator.Acquire (a new fence from the sequence, the lease row, and the floor raised in the same transaction), CompleteAcquire, Release, Coordinator.Release. ")
	r.f("*pglock Acquire+Close* is cirello.io/pglock's AcquireContext (nextval, then an upsert) and Lock.Close (a DELETE) through database/sql on the same pool; with the heartbeat on, Acquire also starts a goroutine whose first heartbeat (nextval, UPDATE) runs at once, and Close stops it first. ")
	r.f("*advisory session lock+unlock* is `pg_advisory_lock` then `pg_advisory_unlock` on one pooled connection. ")
	r.f("*bound: bare SQL lease* is not a lease to use: one autocommit upsert that takes nextval and writes the lease row (a durable commit), then one autocommit release that does not wait for its WAL (fencegate's own release does not either); no floor raise, no request record, no retry. It is the least any SQL lease with a fence and a durable grant can do in two round trips, so fencegate cannot go below it. \n\n")
	var g grid
	for _, t := range pgs {
		e := envs[t.Net]
		g.add(t.Net, vLeaseGate, func(ctx context.Context, key int) error {
			l, err := e.acquire(ctx, fmt.Sprintf("lease/%d", key))
			if err != nil {
				return err
			}
			return e.release(ctx, l)
		})
		g.add(t.Net, vLeasePglock, t.PglockAcquireRelease(false))
		g.add(t.Net, vLeasePglockHB, t.PglockAcquireRelease(true))
		g.add(t.Net, vLeaseBare, t.BareLeaseAcquireRelease)
		g.add(t.Net, vLeaseAdvisory, func(ctx context.Context, key int) error {
			conn, err := t.Pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, advisoryLock, advisoryBase+int64(key)); err != nil {
				return err
			}
			_, err = conn.Exec(ctx, advisoryUnlock, advisoryBase+int64(key))
			return err
		})
	}
	g.run(ctx, cfg, 1, Distinct, "3/acquire")
	for _, n := range cfg.nets() {
		r.f("### acquire+release, %s\n\n", n.Name)
		res := g.rows(n.Name, vLeaseGate, vLeasePglock, vLeasePglockHB, vLeaseAdvisory, vLeaseBare)
		r.table(res, 3)
		off, on := LatencyRatio(res[0], res[1], 0.5), LatencyRatio(res[0], res[2], 0.5)
		bareOff, overBare := LatencyRatio(res[4], res[1], 0.5), LatencyRatio(res[0], res[4], 0.5)
		r.f("p50, paired per round (below 1: fencegate's is shorter): fencegate ÷ pglock (heartbeat off) = **%.2fx**, fencegate ÷ pglock (heartbeat on) = **%.2fx**. ", off, on)
		r.f("The bound: bare SQL lease ÷ pglock (heartbeat off) = %.2fx, fencegate ÷ bare SQL lease = %.2fx.\n\n", bareOff, overBare)
		r.set(off, "3", n.Name, "pglock")
		r.set(overBare, "3", n.Name, "bare")
		r.set(float64(res[0].Latency(0.5))/float64(time.Millisecond), "3", n.Name, "p50 ms")
	}

	// Renewal: 8 held leases and 8 held pglock locks per net, renewed in turn.
	type held struct {
		leases []*lease.Lease
		locks  []*pglock.Lock
	}
	hs := map[string]*held{}
	for i, t := range pgs {
		h := &held{}
		for k := range 8 {
			name := fmt.Sprintf("renew/%d/%d", i, k)
			l, err := envs[t.Net].acquire(ctx, name)
			if err != nil {
				return err
			}
			h.leases = append(h.leases, l)
			pl, err := t.Pglock.AcquireContext(ctx, name)
			if err != nil {
				return err
			}
			defer pl.Close()
			h.locks = append(h.locks, pl)
		}
		hs[t.Net] = h
	}
	r.f("### renewal\n\nfencegate: BeginRenewal, Coordinator.Renew (one conditional UPDATE), CompleteRenewal. pglock: SendHeartbeat (nextval, then a conditional UPDATE), what its heartbeat goroutine runs every %s.\n\n", pglockHeartbeat)
	r.f("| workers | network | variant | median renewals/s | p50 | p99 |\n|---:|---|---|---:|---:|---:|\n")
	var capacity float64
	var renew1 time.Duration
	for _, w := range []int{1, 8} {
		var g grid
		for _, t := range pgs {
			e, h, c := envs[t.Net], hs[t.Net], t.Pglock
			g.add(t.Net, vRenewGate, func(ctx context.Context, key int) error { return e.renew(ctx, h.leases[(key-1)%len(h.leases)]) })
			g.add(t.Net, vRenewPglock, func(ctx context.Context, key int) error {
				return c.SendHeartbeat(ctx, h.locks[(key-1)%len(h.locks)])
			})
		}
		g.run(ctx, cfg, w, Distinct, "3/renew")
		for _, n := range cfg.nets() {
			for _, x := range g.rows(n.Name, vRenewGate, vRenewPglock) {
				r.f("| %d | %s | %s | %.0f | %s | %s |\n", w, n.Name, x.Name, x.MedianThroughput(), fmtDur(x.Latency(0.5)), fmtDur(x.Latency(0.99)))
			}
		}
		lo := g.get(cfg.nets()[0].Name, vRenewGate)
		if w == 1 {
			renew1 = lo.Latency(0.5)
		} else {
			capacity = lo.MedianThroughput()
		}
	}
	r.f("\nlease.Hold renews when a third of the term has passed, so a held lease costs 3/TTL renewals per second: at TTL 30s, 0.1/s, one %s round trip each on loopback. ", fmtDur(renew1))
	r.f("This database sustains about %.0f renewals/s with 8 workers, i.e. about %.0f leases held at TTL 30s before renewals alone saturate it. ", capacity, capacity/0.1)
	r.f("An advisory session lock needs no renewal, but pins a connection (a backend process) for as long as it is held, and never expires while that session lives (scenario 5).\n\n")
	return nil
}

// ManyLeases is scenario 6: n leases held in one process with lease.Hold,
// over every net.
func ManyLeases(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 8)
	if err != nil {
		return err
	}
	defer done()
	r.f("## 6. Many leases held in one process\n\n")
	r.f("n goroutines each run lease.Hold (TTL 30s, renewing every 10s) around a function that blocks; a pgx pool of 8 connections serves them all. Memory is the Go heap in use after GC, measured before and while held; the renewal sweep renews all n leases once with 8 workers.\n\n")
	r.f("| leases | network | acquire all | heap per lease | goroutines per lease | renewal sweep | renewals/s | load at TTL 30s (n/10 per s) | release all |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, n := range cfg.Leases {
		for _, t := range pgs {
			note, err := manyLeases(ctx, cfg, t, n, r)
			if err != nil {
				return err
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
	}
	r.f("\n")
	for _, note := range notes {
		r.f("%s\n\n", note)
	}
	return nil
}

// manyLeases adds n leases' row to the table, and returns a note of what
// failed, if anything did.
func manyLeases(ctx context.Context, cfg Config, pg *PG, n int, r *Report) (string, error) {
	e, err := newLeaseEnv(pg, 30*time.Second)
	if err != nil {
		return "", err
	}
	// Open the pool's connections first (and the proxy's goroutines for
	// them), so that they are not counted per lease.
	var conns []*pgxpool.Conn
	for range pg.Pool.Config().MaxConns {
		c, err := pg.Pool.Acquire(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
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
		// The first error of each kind, for the report.
		firstFail, firstRenewErr atomic.Pointer[error]
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
				if failed.Add(1) == 1 {
					firstFail.Store(&err)
				}
				ready.Done()
			}
		})
	}
	ready.Wait()
	acquireAll := time.Since(start)
	prog(cfg, fmt.Sprintf("6 [%s]: %d leases held (%d failed) in %s", pg.Net, len(leases), failed.Load(), acquireAll.Round(time.Millisecond)))
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
				if err := e.renew(ctx, leases[i]); err != nil && renewErr.Add(1) == 1 {
					firstRenewErr.Store(&err)
				}
			}
		})
	}
	sweepWG.Wait()
	sweep := time.Since(sweepStart)
	rate := float64(len(leases)-int(renewErr.Load())) / sweep.Seconds() // renewals that succeeded

	relStart := time.Now()
	release()
	done.Wait()
	relAll := time.Since(relStart)
	heapPer := float64(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / float64(max(len(leases), 1))
	r.f("| %d | %s | %s | %.1f KiB | %.1f | %s | %.0f | %.0f%% of that rate | %s |\n", n, pg.Net, acquireAll.Round(time.Millisecond),
		heapPer/1024, float64(g1-g0)/float64(max(len(leases), 1)), sweep.Round(time.Millisecond), rate, 100*float64(n)/10/rate, relAll.Round(time.Millisecond))
	if failed.Load() > 0 || renewErr.Load() > 0 {
		first := func(p *atomic.Pointer[error]) string {
			if e := p.Load(); e != nil && *e != nil {
				return fmt.Sprintf(" (first: `%v`)", *e)
			}
			return ""
		}
		return fmt.Sprintf("%s, %d leases: %d holds failed to acquire%s, %d renewals of the sweep failed%s.", pg.Net, n, failed.Load(), first(&firstFail), renewErr.Load(), first(&firstRenewErr)), nil
	}
	return "", nil
}
