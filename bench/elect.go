package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencegate/fencegate/elect"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// electKillTTL is the term of the leader the kill measurement kills: the
// time to a new leader is bounded by it.
const electKillTTL = time.Second

// Elect is the election scenario (run only when named: -only elect): the
// time from a leader's end to the next leader's term, when the leader
// resigns (a hand-over to the participant waiting in line) and when it is
// killed (nothing released: the term's ttl bounds it), against client-go's
// leaderelection defaults for context.
func Elect(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	r.f("## Elections: time to a new leader\n\n")
	r.f("Two electors (elect.Elector) take turns on one election, loopback: the leader resigns (Term.Resign) and the other, waiting in line (Campaign), leads. The latency is from just before the resignation is sent to the other's Campaign returning, on one process's monotonic clock, for %v per variant. *One coordinator*: both electors share a Coordinator, which wakes the waiter in-process. *Two coordinators*: each has its own pool and Coordinator, so the waiter is woken by LISTEN/NOTIFY, as in another process. *Killed*: the leader's lease (ttl %v) is renewed once and then abandoned, as by a killed process: the time from that last renewal to the next leader is the ttl plus the waiter's look at the expiry. client-go's defaults for context: a 15 s lease, a 10 s renew deadline, a 2 s retry period, so a released lease is taken at a candidate's next try (up to 2 s) and a crashed leader's after its 15 s lease (and up to 2 s more).\n\n", cfg.Duration, electKillTTL)
	r.f("| variant | hand-overs | p50 | p99 |\n| --- | ---: | ---: | ---: |\n")
	for _, two := range []bool{false, true} {
		name := "resign, one coordinator"
		if two {
			name = "resign, two coordinators (NOTIFY)"
		}
		prog(cfg, "elect: "+name)
		lat, err := electResign(ctx, cfg, pg, two)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		slices.Sort(lat)
		r.f("| %s | %d | %s | %s |\n", name, len(lat), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]))
	}
	prog(cfg, "elect: killed")
	lat, err := electKilled(ctx, pg, 3)
	if err != nil {
		return fmt.Errorf("killed: %w", err)
	}
	slices.Sort(lat)
	r.f("| killed (ttl %v) | %d | %s | %s |\n\n", electKillTTL, len(lat), ms(lat[len(lat)/2]), ms(lat[len(lat)-1]))
	return nil
}

// electResign alternates two electors for cfg.Duration and returns the
// hand-over latencies.
func electResign(ctx context.Context, cfg Config, pg *PG, two bool) ([]time.Duration, error) {
	name := "elect/" + randomHex(3)
	coords := []*lease.Coordinator{lease.NewCoordinator(pg.Pgx, nil)}
	if two {
		other, err := pg.Attach(ctx, Net{Name: "loopback", URL: pg.BaseURL}, 4, pg.Mode)
		if err != nil {
			return nil, err
		}
		defer other.Close(context.WithoutCancel(ctx))
		coords = append(coords, lease.NewCoordinator(other.Pgx, nil))
	} else {
		coords = append(coords, coords[0])
	}
	els := make([]*elect.Elector, 2)
	for i := range els {
		c, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("elector-%d", i), TTL: 10 * time.Second})
		if err != nil {
			return nil, err
		}
		if els[i], err = elect.New(coords[i], c, &elect.Options{Name: name}); err != nil {
			return nil, err
		}
	}
	term, err := els[0].Campaign(ctx)
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	leader := 0
	for end := time.Now().Add(cfg.Duration); time.Now().Before(end); {
		next := 1 - leader
		won := make(chan *elect.Term, 1)
		errc := make(chan error, 1)
		go func() {
			t, err := els[next].Campaign(ctx)
			if err != nil {
				errc <- err
				return
			}
			won <- t
		}()
		if err := waitQueued(ctx, coords[next], name); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := term.Resign(ctx); err != nil {
			return nil, err
		}
		select {
		case term = <-won:
			lat = append(lat, time.Since(start))
		case err := <-errc:
			return nil, err
		}
		leader = next
	}
	return lat, term.Resign(ctx)
}

// waitQueued returns once someone waits in the election's line, so that
// the resignation measured hands over rather than finds nobody, and the
// waiter is past its first look at the line: a waiter that just joined
// still has its first touch of its place (a round trip) to make before it
// waits, and a resignation in the middle of it measured that round trip
// too, which a leader's successor, in line long before, never pays.
func waitQueued(ctx context.Context, coord *lease.Coordinator, name string) error {
	for {
		ws, err := coord.Waiters(ctx, name)
		if err != nil {
			return err
		}
		if len(ws) > 0 {
			time.Sleep(2 * time.Millisecond) // outside the measured span
			return nil
		}
		time.Sleep(100 * time.Microsecond) // polling the queue, outside the measured span
	}
}

// electKilled kills n leaders in turn and returns the time from each one's
// last renewal to the next leader.
func electKilled(ctx context.Context, pg *PG, n int) ([]time.Duration, error) {
	name := "elect-killed/" + randomHex(3)
	store := pgxv5.New(pg.Pool)
	coord := lease.NewCoordinator(store, nil)
	var lat []time.Duration
	for i := range n {
		doomed, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("doomed-%d", i), TTL: electKillTTL})
		if err != nil {
			return nil, err
		}
		l, err := coord.AcquireWait(ctx, doomed, name)
		if err != nil {
			return nil, err
		}
		rreq, err := doomed.BeginRenewal(l)
		if err != nil {
			return nil, err
		}
		killed := time.Now() // the last renewal's send instant: the term runs a ttl from here
		if out, err := coord.Renew(ctx, rreq); err != nil || !out.OK {
			return nil, errors.Join(err, errors.New("the doomed leader's renewal failed"))
		}
		c, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("next-%d", i), TTL: 10 * time.Second})
		if err != nil {
			return nil, err
		}
		e, err := elect.New(coord, c, &elect.Options{Name: name})
		if err != nil {
			return nil, err
		}
		t, err := e.Campaign(ctx)
		if err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(killed))
		if err := t.Resign(ctx); err != nil {
			return nil, err
		}
	}
	return lat, nil
}
