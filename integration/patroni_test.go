//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/integration/internal/check"
	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// EnvRequirePatroni makes the Patroni history fail instead of skipping when
// patroni, patronictl or etcd is missing; .ci/run sets it.
const EnvRequirePatroni = "FENCEGATE_REQUIRE_PATRONI"

// patroniOutcome is a Patroni history's outcome, with its operations.
type patroniOutcome struct {
	outcome
	ops []history.Op
}

// patroniFault is one step of a Patroni history's fault plan.
type patroniFault struct {
	name string
	do   func(ctx context.Context, t *testing.T, p *faults.Patroni, leader *faults.PatroniNode)
}

// patroniFaults are the faults every Patroni history runs through, in
// order, each followed by a wait until the cluster is healthy again (a
// leader, every node replicating): the leader's Postgres killed (Patroni
// starts it again), the leader's patroni killed (its Postgres runs on as a
// primary until the restarted patroni demotes it or keeps the key), a
// patronictl switchover, the leader cut from etcd (it must demote itself;
// another node is promoted), and an etcd member killed and started again.
var patroniFaults = []patroniFault{
	{"kill -9 postgres on the leader", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		if err := l.KillPostgres(ctx); err != nil {
			t.Fatal(err)
		}
	}},
	{"kill -9 patroni on the leader, started again 3 s later", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		l.KillPatroni()
		wait(3 * time.Second) // the fault model: an agent down for a while
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
	}},
	{"patronictl switchover", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		c, err := p.Candidate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Switchover(ctx, l.Name, c.Name); err != nil {
			t.Fatal(err)
		}
	}},
	{"the leader cut from etcd", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		l.CutFromEtcd(true)
		defer l.CutFromEtcd(false)
		if _, err := p.WaitHealthyWithout(ctx, l.Name); err != nil {
			t.Fatal(err)
		}
	}},
	{"an etcd member killed, started again 2 s later", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		m := p.Etcd[len(p.Etcd)-1]
		m.Kill()
		wait(2 * time.Second)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestPatroni runs one history on a three-node Patroni cluster in
// synchronous mode (synchronous_mode and synchronous_mode_strict), with
// three etcd members as its DCS, the workers connecting by multi-host DSN
// with target_session_attrs=read-write, through every fault of
// patroniFaults. Every check must pass. Commit order is id order here: the
// logical replication slot the other Postgres histories read does not
// follow a failover (before Postgres 17), so the checker trusts the floor
// row's lock for it.
func TestPatroni(t *testing.T) {
	if err := faults.CanPatroni(); err != nil {
		if os.Getenv(EnvRequirePatroni) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, EnvRequirePatroni)
		}
		t.Skipf("\n*** PATRONI HISTORY SKIPPED: %v ***\n", err)
	}
	// Not parallel: a Patroni cluster (three Postgres, three etcd, three
	// patroni) loads both cores, and the histories beside it then judge
	// their timing checks under that load; it runs before they start.
	o := runPatroniHistory(t, faults.PatroniOptions{Synchronous: true, EtcdMembers: 3}, baseSeed(t), patroniFaults, []string{"ext-0"}, nil)
	record("patroni/sync", &o.outcome)
	t.Log(describe(&o.outcome))
	r := o.Report
	if len(r.Errors) > 0 {
		t.Logf("errors the agents saw:\n%s", r.TopErrors(12))
	}
	if r.Failed() {
		t.Errorf("%d violations on Patroni in synchronous mode (replay with %s=%d):\n%s", len(r.Violations), EnvSeed, o.Seed, r.Summary(5))
	}
	if o.Failovers != len(patroniFaults) || r.Committed == 0 || r.Grants == 0 {
		t.Errorf("%d faults (want %d), %d writes, %d grants: the history did not run", o.Failovers, len(patroniFaults), r.Committed, r.Grants)
	}
}

// runPatroniHistory starts a Patroni cluster, runs the workload on it by
// multi-host DSN while plan's faults happen one after the other, and
// checks the history. With open set, it waits for open (given the first
// leader) before it migrates the database. With external nil the workload has no outside fence
// source (the remedy's callback advances only the coordinator's). The history lasts as long as the faults
// take, plus 3 s before the first and after the last. Failovers counts the
// faults run.
func runPatroniHistory(t *testing.T, opts faults.PatroniOptions, seed uint64, plan []patroniFault, external []string, open func(*testing.T, *faults.PatroniNode)) *patroniOutcome {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	p, err := faults.StartPatroni(sctx, opts)
	cancel()
	if err != nil {
		setupFailed(t, "a throwaway Patroni cluster (patroni, etcd, initdb)", err)
	}
	t.Cleanup(p.Stop)
	dsn := p.URL("postgres")
	if open != nil {
		leader, err := p.WaitHealthy(ctx, "")
		if err != nil {
			t.Fatalf("no leader: %v", err)
		}
		open(t, leader)
	}
	setup(t, dsn, "public", "")

	sp := ciSpec(pgsql.Dialect, seed)
	sp.Duration = 10 * time.Minute // the end is set when the faults are done
	out := &patroniOutcome{outcome: outcome{spec: sp, ObserverSkipped: true}}
	dir := t.TempDir()
	base := workload.Config{
		DSN: dsn, Agents: sp.Agents, Resources: []string{"hot-0", "hot-1", "hot-2", "hot-3"},
		External: external, ExternalProb: 0.1,
		TTL: sp.TTL, LockTimeout: sp.TTL, OpTimeout: 5 * time.Second,
		StallProb: 0.2, StallMin: 1.2, StallMax: 3, HoldProb: 0.25, LateRenewProb: 0.1, BatchProb: 0.25,
		TxStallProb: 0.03, Announce: true,
	}
	// The workers run until the faults are over; each incarnation reads
	// its end from the config, so the fleet is stopped by killing it.
	base.Until = time.Now().Add(sp.Duration)
	fl := &fleet{t: t, dir: dir, base: base, seed: seed, bin: workerBin}
	for i := range sp.Procs {
		fl.start(i)
	}
	wait(3 * time.Second)
	for _, f := range plan {
		leader, err := p.WaitHealthy(ctx, "")
		if err != nil {
			t.Fatalf("no leader before %q: %v", f.name, err)
		}
		t0 := time.Now()
		f.do(ctx, t, p, leader)
		now, err := p.WaitHealthy(ctx, "")
		if err != nil {
			t.Fatalf("after %q: %v", f.name, err)
		}
		t.Logf("%s (leader %s): healthy again after %v, leader %s", f.name, leader.Name, time.Since(t0).Round(time.Millisecond), now.Name)
		out.Failovers++
	}
	wait(3 * time.Second)
	for i := range sp.Procs {
		if fl.kill(i) {
			out.Kills++
		}
	}
	fl.waitAll(time.Now().Add(30 * time.Second))

	// The history is read through the leader: wait for one, as after each
	// fault (a single look could meet a REST call slowed by a loaded
	// machine, or etcd between two leader keys, and see none).
	leader, err := p.WaitHealthy(ctx, "")
	if err != nil {
		t.Fatalf("no leader at the end: %v", err)
	}
	in := check.Input{Timeout: time.Minute, TTL: sp.TTL, VisualizeTo: filepath.Join(dir, "linearizability.html")}
	in.Events, in.Rejections, in.LeaseLog = readDatabase(t, pgsql.Dialect, dsn)
	if in.Ops, err = history.Load(dir); err != nil {
		t.Fatal(err)
	}
	out.ops = in.Ops
	out.Report = check.Run(in)
	out.Elapsed = time.Since(start)
	out.Duration = out.Elapsed
	out.Picture = keepPicture(out.Report, os.TempDir())
	if out.Report.Failed() {
		t.Log(fmt.Sprint("final leader ", leader.Name))
	}
	return out
}
