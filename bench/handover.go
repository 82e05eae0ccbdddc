package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// Names of scenario 7's variants.
const (
	vHandWait     = "fencegate AcquireWait, one coordinator"
	vHandWaitMany = "fencegate AcquireWait, 4 coordinators (NOTIFY)"
	vHandPoll     = "fencegate Acquire polling (the CLI's old --wait)"
	vHandAdvisory = "pg_advisory_lock queue"
)

// handoverCoordinators is how many coordinators the NOTIFY variant spreads
// its waiters over: each has one listening connection.
const handoverCoordinators = 4

// Handover is scenario 7: the time from a release to the next holder's
// grant, with 1, 16 and 64 workers contending for one lock, each taking it
// and releasing it at once.
func Handover(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	r.f("## 7. Hand-over: release → next holder's grant\n\n")
	r.f("N workers loop on one lock: take it, release it at once, take it again. The latency is from the release (read just before it is sent) to the next grant (read when it returns), on one process's monotonic clock, loopback, for %v per variant and worker count. ", cfg.Duration)
	r.f("*AcquireWait* queues in fencegate_waiter and is woken by the release (in-process with one coordinator; by LISTEN/NOTIFY across 4). *Polling* is the CLI's former loop: Acquire, and while held sleep the lease's remaining time clamped to 10–200 ms, jittered. *pg_advisory_lock* waits in Postgres's own lock queue on a pooled connection per worker. With one worker the next holder is the releaser itself.\n\n")
	r.f("| workers | variant | hand-overs | p50 | p99 |\n| ---: | --- | ---: | ---: | ---: |\n")
	for _, n := range []int{1, 16, 64} {
		for _, v := range []string{vHandWait, vHandWaitMany, vHandPoll, vHandAdvisory} {
			prog(cfg, fmt.Sprintf("7: %s, %d workers", v, n))
			lat, err := handover(ctx, cfg, pg, v, n)
			if err != nil {
				return fmt.Errorf("%s, %d workers: %w", v, n, err)
			}
			if len(lat) == 0 {
				r.f("| %d | %s | 0 | – | – |\n", n, v)
				continue
			}
			slices.Sort(lat)
			r.f("| %d | %s | %d | %s | %s |\n", n, v, len(lat), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]))
		}
	}
	r.f("\n")
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// handover runs one variant with n workers for cfg.Duration and returns the
// hand-over latencies.
func handover(ctx context.Context, cfg Config, pg *PG, variant string, n int) ([]time.Duration, error) {
	resource := fmt.Sprintf("handover/%s/%d/%s", variant, n, randomHex(3))
	var (
		mu          sync.Mutex
		lat         []time.Duration
		lastRelease time.Time
	)
	granted := func() {
		now := time.Now()
		mu.Lock()
		if !lastRelease.IsZero() {
			lat = append(lat, now.Sub(lastRelease))
			lastRelease = time.Time{}
		}
		mu.Unlock()
	}
	releasing := func() {
		mu.Lock()
		lastRelease = time.Now()
		mu.Unlock()
	}

	// A pool of the variant's own, a connection per worker: waiters do not
	// queue for connections, and the advisory lock needs one each.
	pcfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = int32(n + 2)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	store := pgxv5.New(pool)

	var cycle func(ctx context.Context, w int) error
	switch variant {
	case vHandWait, vHandWaitMany, vHandPoll:
		k := 1
		if variant == vHandWaitMany {
			k = handoverCoordinators
		}
		coords := make([]*lease.Coordinator, k)
		for i := range coords {
			coords[i] = lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 30 * time.Second})
		}
		clients := make([]*lease.Client, n)
		for w := range clients {
			c, err := lease.NewClient(lease.ClientOptions{Holder: fmt.Sprintf("w%d", w), TTL: 30 * time.Second})
			if err != nil {
				return nil, err
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
			granted()
			tok, _ := c.Release(l)
			releasing()
			_, err = coord.Release(context.WithoutCancel(ctx), tok)
			return err
		}
	case vHandAdvisory:
		key := advisoryBase + int64(rand.N(1<<20))
		cycle = func(ctx context.Context, _ int) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, advisoryLock, key); err != nil {
				return err
			}
			granted()
			releasing()
			_, err = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
			return err
		}
	}

	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	errs := make(chan error, n)
	for w := range n {
		go func() {
			for {
				if err := cycle(rctx, w); err != nil {
					if rctx.Err() != nil {
						err = nil
					}
					errs <- err
					return
				}
			}
		}()
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	return lat, errors.Join(all...)
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
