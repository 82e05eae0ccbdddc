package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Names of the notify scenario's variants.
const (
	vNotifyGate   = "fencegate acquire+release"
	vNotifyAlways = "fencegate, every release announced (the trigger before announcements went only to waiters)"
	vNotifyPglock = "pglock Acquire+Close, heartbeat off"
	// vNotifyBare is the bound: scenario 3's bare SQL lease, a durable
	// grant (nextval in one upsert) and an asynchronous release, with no
	// floor, no request record and no announcement.
	vNotifyBare = "bound: bare SQL lease (durable grant, async release)"
)

// alwaysNotify is the fencegate_lease_notify from before announcements went only to waiters, which announced
// every release: the scenario's "before", installed in a schema of its own.
const alwaysNotify = `
CREATE OR REPLACE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    res   text;
    first bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        res := OLD.resource;
        IF EXISTS (SELECT 1 FROM fencegate_waiter w
                    WHERE w.resource = res AND w.seq < OLD.seq AND w.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM fencegate_lease l
                       WHERE l.resource = res AND NOT l.released AND l.expires_at > clock_timestamp()) THEN
            RETURN NULL;
        END IF;
    ELSE
        res := NEW.resource;
    END IF;
    SELECT min(w.seq) INTO first FROM fencegate_waiter w
     WHERE w.resource = res AND w.expires_at > clock_timestamp();
    PERFORM pg_notify('fencegate_lease', res || chr(31) || coalesce(first::text, '') || chr(31) || TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$`

// waitSampler reads pg_stat_activity every few milliseconds on a
// connection of its own and adds the active backends of the database, by
// wait event, to the variant that is running.
type waitSampler struct {
	mu      sync.Mutex
	current string
	samples map[string]int
	counts  map[string]map[string]int
	pools   []*pgxpool.Pool // wrapOn's
}

func (s *waitSampler) wrap(name string, op Op) Op {
	return s.wrapOn(name, nil, op)
}

// wrapOn is wrap for a variant whose connections come from pool: when a
// variant starts, the idle connections of every other pool wrapped so are
// closed, so that the pools of all paths fit the server's
// max_connections together (each holds a connection per acquirer).
func (s *waitSampler) wrapOn(name string, pool *pgxpool.Pool, op Op) Op {
	if pool != nil {
		s.mu.Lock()
		if !slices.Contains(s.pools, pool) {
			s.pools = append(s.pools, pool)
		}
		s.mu.Unlock()
	}
	return func(ctx context.Context, key int) error {
		s.mu.Lock()
		if s.current != name {
			s.current = name
			for _, p := range s.pools {
				if p != pool {
					p.Reset()
				}
			}
		}
		s.mu.Unlock()
		return op(ctx, key)
	}
}

func (s *waitSampler) run(ctx context.Context, conn *pgx.Conn) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rows, err := conn.Query(ctx, `
SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)
  FROM pg_stat_activity
 WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
   AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN%'
 GROUP BY 1`)
		if err != nil {
			return
		}
		got := map[string]int{}
		for rows.Next() {
			var ev string
			var n int
			if rows.Scan(&ev, &n) == nil {
				got[ev] = n
			}
		}
		rows.Close()
		s.mu.Lock()
		if s.current != "" {
			s.samples[s.current]++
			if s.counts[s.current] == nil {
				s.counts[s.current] = map[string]int{}
			}
			for ev, n := range got {
				s.counts[s.current][ev] += n
			}
		}
		s.mu.Unlock()
	}
}

// summary is the mean number of active backends per sample, in all and
// by wait event (the three commonest), for variant name.
func (s *waitSampler) summary(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.samples[name]
	if n == 0 {
		return "no samples"
	}
	type ev struct {
		name string
		c    int
	}
	var evs []ev
	total := 0
	for k, c := range s.counts[name] {
		evs = append(evs, ev{k, c})
		total += c
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].c > evs[j].c })
	parts := []string{fmt.Sprintf("%.1f busy", float64(total)/float64(n))}
	for _, e := range evs[:min(3, len(evs))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", e.name, float64(e.c)/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// Notify is the scenario "notify": lease acquire+release on distinct keys
// with cfg.Writers acquirers, fencegate (whose releases nobody waits for
// are announced to nobody) against pglock on every
// net (loopback, and cfg.RTT through a delay proxy), and, on loopback, the
// same with every release announced (the earlier trigger), with
// Postgres's wait events sampled beside each.
func Notify(ctx context.Context, cfg Config, r *Report) error {
	maxW := slices.Max(append([]int{1}, cfg.Writers...))
	now, doneNow, err := schemaOnNets(ctx, cfg, int32(maxW+4))
	if err != nil {
		return err
	}
	defer doneNow()
	before, doneBefore, err := schemaOnNets(ctx, Config{PostgresURL: cfg.PostgresURL}, int32(maxW+4))
	if err != nil {
		return err
	}
	defer doneBefore()
	if _, err := before[0].Pool.Exec(ctx, alwaysNotify); err != nil {
		return fmt.Errorf("install the always-announcing trigger: %w", err)
	}
	envs := make([]*leaseEnv, len(now))
	for i, pg := range now {
		if envs[i], err = newLeaseEnv(pg, 30*time.Second); err != nil {
			return err
		}
	}
	eBefore, err := newLeaseEnv(before[0], 30*time.Second)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	s := &waitSampler{samples: map[string]int{}, counts: map[string]map[string]int{}}
	sctx, stop := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { s.run(sctx, conn) })
	defer func() { stop(); sampling.Wait() }()

	cycle := func(e *leaseEnv) Op {
		return func(ctx context.Context, key int) error {
			l, err := e.acquire(ctx, fmt.Sprintf("notify/%d", key))
			if err != nil {
				return err
			}
			return e.release(ctx, l)
		}
	}
	r.f("## Notify only when someone waits: acquire+release with 1–64 acquirers\n\n")
	r.f("Distinct keys, Postgres through pgx, on every path (loopback, and a delay proxy adding a round trip where the run has one). *%s* is scenario 3's cycle; *%s* (loopback only) is the same in a schema whose trigger announces every release (the cost before announcements went only to waiters); pglock as in scenario 3; *%s* is scenario 3's bound, the least a lease with a durable grant costs: a faster fencegate would need a grant that is not durable. The pools of all paths do not fit the server's connections together, so a path's idle connections are closed when another's variant runs; each variant runs %d ops per acquirer, untimed, before each of its runs, so that no run pays for opening connections and the first statements on new backends. Busy backends and their wait events are pg_stat_activity sampled every 5 ms during each variant (mean per sample; the sampler sees the server, whatever path the client takes).\n\n", vNotifyGate, vNotifyAlways, vNotifyBare, warmOps)
	r.f("| acquirers | path | variant | median ops/s | p50 | p99 | ÷ pglock p50 | wait events (mean backends) |\n|---:|---|---|---:|---:|---:|---:|---|\n")
	for _, w := range cfg.Writers {
		type row struct{ net, name, label string }
		var rows []row
		var vs []Variant
		add := func(net, name string, pool *pgxpool.Pool, op Op) {
			label := fmt.Sprintf("%s @%d [%s]", name, w, net)
			rows = append(rows, row{net, name, label})
			vs = append(vs, Variant{Name: label, Op: s.wrapOn(label, pool, op), Rewarm: true})
		}
		for i, pg := range now {
			add(pg.Net, vNotifyGate, pg.Pool, cycle(envs[i]))
			add(pg.Net, vNotifyPglock, pg.Pool, pg.PglockAcquireRelease(false))
			add(pg.Net, vNotifyBare, pg.Pool, pg.BareLeaseAcquireRelease)
		}
		add(before[0].Net, vNotifyAlways, before[0].Pool, cycle(eBefore))
		res := Interleave(ctx, vs, w, Distinct, cfg.Duration, cfg.Rounds, prefix(cfg, fmt.Sprintf("notify/%d", w)))
		// on is variant name's result and label on net.
		on := func(net, name string) (Result, string) {
			for i, x := range rows {
				if x.net == net && x.name == name {
					return res[i], x.label
				}
			}
			return Result{}, ""
		}
		for i, x := range res {
			ref, _ := on(rows[i].net, vNotifyPglock)
			r.f("| %d | %s | %s | %.0f | %s | %s | %.2fx | %s |\n", w, rows[i].net, rows[i].name, x.MedianThroughput(), fmtDur(x.Latency(0.5)), fmtDur(x.Latency(0.99)),
				LatencyRatio(x, ref, 0.5), s.summary(rows[i].label))
			if rows[i].name == vNotifyGate {
				bare, _ := on(rows[i].net, vNotifyBare)
				r.set(LatencyRatio(x, ref, 0.5), "notify", w, rows[i].net, "pglock")
				r.set(LatencyRatio(x, bare, 0.5), "notify", w, rows[i].net, "bare")
			}
		}
	}
	r.f("\n")
	return nil
}
