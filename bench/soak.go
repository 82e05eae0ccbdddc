package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/lease"
)

// soakWorkers is the soak's concurrency: scenario 3's top writer count on
// this 2-core machine's useful range.
const soakWorkers = 16

// soakTerm is the soak's lease term and MaxTTL: short, so that a short run
// spans many terms and pruning has rows to prune (a request row may go one
// MaxTTL after it was made).
const soakTerm = time.Second

// soakVacuumEvery is how often the soak vacuums the tables it prunes when
// the server's autovacuum is off (as on the CI machine): a deleted row's
// space is reused only after a vacuum, which autovacuum would run.
const soakVacuumEvery = 20 * time.Second

// Soak is the scenario "soak": soakWorkers acquirers cycle acquire+release
// on distinct keys for cfg.SoakDuration (default 1 min), while a pruner
// runs Coordinator.Prune every term; it reports the tables' row counts and
// sizes, dead tuples and the cycle's p50/p99 after each of six windows.
// Pruning deletes rows; their space is reused after a vacuum: with the
// server's autovacuum off the soak runs VACUUM itself every
// soakVacuumEvery, and says so.
func Soak(ctx context.Context, cfg Config, r *Report) error {
	total := cfg.SoakDuration
	if total <= 0 {
		total = time.Minute
	}
	pgs, done, err := schemaOnNets(ctx, Config{PostgresURL: cfg.PostgresURL}, soakWorkers+4)
	if err != nil {
		return err
	}
	defer done()
	pg := pgs[0]
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "soak", TTL: soakTerm})
	if err != nil {
		return err
	}
	coord := lease.NewCoordinator(pg.Pgx, &lease.CoordinatorOptions{TTL: soakTerm, MaxTTL: soakTerm})
	e := &leaseEnv{pg: pg, coord: coord, client: client}
	op := func(ctx context.Context, key int) error {
		l, err := e.acquire(ctx, fmt.Sprintf("soak/%d", key))
		if err != nil {
			return err
		}
		return e.release(ctx, l)
	}
	var autovacuum string
	if err := pg.Pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		return err
	}
	vacuum := autovacuum != "on"
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var pruned lease.PruneResult
	prunerDone := make(chan error, 1)
	go func() {
		t := time.NewTicker(soakTerm)
		defer t.Stop()
		lastVacuum := time.Now()
		for {
			select {
			case <-pctx.Done():
				prunerDone <- nil
				return
			case <-t.C:
			}
			res, err := coord.Prune(pctx, lease.PruneOptions{RequestAge: soakTerm, KeepRejections: 1000})
			pruned.Requests += res.Requests
			pruned.Waiters += res.Waiters
			if err != nil && pctx.Err() == nil {
				prunerDone <- err
				return
			}
			if vacuum && time.Since(lastVacuum) >= soakVacuumEvery {
				lastVacuum = time.Now()
				if _, err := pg.Pool.Exec(pctx, `VACUUM fencegate_request, fencegate_waiter, fencegate_lease`); err != nil && pctx.Err() == nil {
					prunerDone <- fmt.Errorf("vacuum: %w", err)
					return
				}
			}
		}
	}()
	sizes := func() string {
		var req, wait, rej, bytes, leaseBytes, dead int64
		err := pg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fencegate_request), (SELECT count(*) FROM fencegate_waiter),
  (SELECT count(*) FROM fencegate_rejection), pg_total_relation_size('fencegate_request'), pg_total_relation_size('fencegate_lease'),
  coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'fencegate_request'::regclass), 0)`).Scan(&req, &wait, &rej, &bytes, &leaseBytes, &dead)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%d requests (%d kB with indexes, %d dead tuples), lease table %d kB, %d waiters, %d rejections", req, bytes/1024, dead, leaseBytes/1024, wait, rej)
	}
	r.f("## Soak: acquire+release with pruning\n\n")
	how := "the server's autovacuum is on and left to it"
	if vacuum {
		how = fmt.Sprintf("the server's autovacuum is %s, so the soak runs VACUUM on the pruned tables every %v, as autovacuum would", autovacuum, soakVacuumEvery)
	}
	r.f("%d acquirers on distinct keys, loopback, %s in six windows; term and MaxTTL %s, Coordinator.Prune every term (request rows older than one term, expired waiters, all but 1000 rejections); %s. Tables after each window:\n\n", soakWorkers, total, soakTerm, how)
	r.f("| window | cycles/s | p50 | p99 | tables after it |\n|---:|---:|---:|---:|---|\n")
	const windows = 6
	var first, last Sample
	for w := range windows {
		s := Run(ctx, op, soakWorkers, Distinct, total/windows)
		if w == 0 {
			first = s
		}
		last = s
		r.f("| %d | %.0f | %s | %s | %s |\n", w+1, s.Throughput(), fmtDur(Quantile(s.Lat, 0.5)), fmtDur(Quantile(s.Lat, 0.99)), sizes())
		prog(cfg, fmt.Sprintf("soak window %d/%d: %.0f cycles/s, p99 %s; %s", w+1, windows, s.Throughput(), fmtDur(Quantile(s.Lat, 0.99)), sizes()))
	}
	stop()
	if err := <-prunerDone; err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	r.f("\nPruned in all: %d request rows, %d waiter rows. Cycles/s first window %.0f, last %.0f; p99 first window %s, last %s. Tables at the end: %s.\n\n", pruned.Requests, pruned.Waiters,
		first.Throughput(), last.Throughput(), fmtDur(Quantile(first.Lat, 0.99)), fmtDur(Quantile(last.Lat, 0.99)), sizes())
	return nil
}
