package integration

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/integration/internal/check"
	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// spec describes one history.
type spec struct {
	Dialect   sqlstore.Dialect
	Procs     int // worker processes
	Agents    int // agents per process
	Resources int
	External  int // resources whose fences come from outside the coordinator (gate.Admit)
	Duration  time.Duration
	TTL       time.Duration
	Bypass    bool // the control: no gate
	// Guarded guards fg_events (package guard, Postgres): a write that
	// skips the gate is refused by the database.
	Guarded bool
	Seed    uint64

	Kills  int // SIGKILLs of a worker mid-run, two in three as it sends a COMMIT (each followed by a new incarnation)
	Pauses int // SIGSTOPs of a worker for 1.2 to 3 ttls, then SIGCONT
	// LeaderPauses are SIGSTOPs, for 2 to 3 ttls, of the next worker to
	// announce that it leads an election (Coordination): a deposed leader.
	LeaderPauses int
	Cuts         int // cuts of every proxied connection at a random moment (Postgres)
	CommitCuts   int // times the proxy is armed to cut two connections right after their COMMIT (Postgres)
	Delays       int // times the proxy holds every client message for 0.3 to 1 ttl, for 2 to 4 ttls
	// ClockSteps are bursts of clockBurst steps forward of the machine's
	// wall clock (see clockBurst); root and FENCEGATE_MACHINE_FAULTS=1.
	// Every history running meanwhile sees them too.
	ClockSteps int
	Restarts   int // Postgres crashes mid-run (throwaway cluster only)
	// OSCrashes are crashes of the OS mid-run: the database's filesystem
	// (ext4 on a loop device, the history's own) is shut down without
	// flushing, and what was not fsynced is gone. Postgres: the server is
	// killed and recovers from what is left; SQLite: every worker is
	// killed with it. Root only.
	OSCrashes  int
	FinalCrash bool // Postgres: crash after the run, before checking; SQLite: kill -9 every worker mid-write at the end
	// Failover runs Postgres as a primary and a streaming standby (a
	// synchronous one unless AsyncStandby); mid-run the primary is killed
	// (-m immediate), the standby promoted, and the proxy moves the workers
	// to it.
	Failover     bool
	AsyncStandby bool
	// AdvanceFences runs the runbook's remedy (advanceFences) on the
	// promoted standby before the proxy moves the workers to it.
	AdvanceFences bool
	// LagGrants keeps the primary's WAL sender frozen, before the failover,
	// until at least this many more grants were acknowledged: an
	// asynchronous standby then lacks them all. Postgres logs a sequence
	// 32 values ahead, so a lag of fewer grants is covered by the promoted
	// sequence anyway, remedy or not.
	LagGrants int
	// Worker is the fgworker binary to run; empty for the one TestMain
	// built (a mutant's, in TestMutants).
	Worker string
	// WorkerAlt, when set, is the binary the odd-numbered workers run
	// instead (in TestMutants: the mutant with the fast acquisition path
	// off).
	WorkerAlt string
	// BeginStalls, when set, is the chance of a stall inside a write's
	// transaction for the writes begun with pgxgate.BeginFenced (Postgres).
	BeginStalls float64
	// Coordination runs elections and a semaphore in the workload.
	Coordination workload.Coordination
	// Claims runs claims of several resources and of paths in the
	// workload, judged per file by check.Claims (outcome.Claims); the
	// single-resource checks do not see their resources.
	Claims workload.Claims
}

// A clock fault is a burst of clockBurst steps of the wall clock, each
// clockStep forward, clockStepEvery apart: a VM paused and its clock set
// right when it resumes, again and again (CI's machine did it unasked). The
// monotonic clock does not move; a holder that trusts it alone believes in
// its lease for clockStep past the coordinator's expiry whenever a step
// comes between the grant and the holder's reading of it
// (deadline-after-expiry). Each step is slewed back afterwards (see
// faults.StepClockForward), at 0.5 ms a second, so a burst leaves the
// machine's clock ahead for up to 100 s: CI's histories take a burst each
// (0.35 s in all), the mutant that needs them ten.
const (
	clockBurst     = 10
	clockStep      = 5 * time.Millisecond
	clockStepEvery = 100 * time.Millisecond
)

// outcome is what one history did and what the checker said.
type outcome struct {
	spec
	Report     *check.Report
	Claims     *check.ClaimReport // with spec.Claims
	Kills      int
	MidOpKills int // kills that left an operation without a return
	Pauses     int
	ClockSteps int // steps of the wall clock taken (each clockStep)
	Restarts   int
	OSCrashes  int
	// OSCrashesOnAck are the OS crashes that came right after the
	// acknowledgement they waited for (the others came after two seconds
	// without one).
	OSCrashesOnAck int
	Failovers      int
	// DecodedOld is how many of the decoded transactions committed on the
	// old primary before a failover (the rest on the promoted standby).
	DecodedOld int
	StandbyLag time.Duration // how long the primary's WAL sender was stopped before the primary died
	AdvancedTo int64         // with AdvanceFences: the lowest fence a grant could get after it
	// LostGrants is how many grants the old primary committed after the
	// promoted standby's switch point (decoded, never replicated).
	LostGrants int
	Proxy      faults.ProxyStats
	Elapsed    time.Duration
	// RestartsSkipped is set when the spec asked for Postgres crashes but the
	// server is not one the harness may crash.
	RestartsSkipped bool
	// Picture is where porcupine's picture of a failed history was kept.
	Picture string
	// ObserverSkipped is set when a Postgres history ran without logical
	// decoding (a server without wal_level=logical): commit order is then
	// id order, which trusts the floor row's lock.
	ObserverSkipped bool
}

// runHistory runs one history and checks it. It fails t on harness errors
// (a worker that crashed by itself, a database that would not come back),
// not on violations: the caller judges the report.
func runHistory(t *testing.T, sp spec) *outcome {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	dir := t.TempDir()
	rng := mrand.New(mrand.NewPCG(sp.Seed, 0x5eed))
	out := &outcome{spec: sp}

	var (
		cluster   *faults.Cluster
		mdb       *faults.MariaDB // MySQL: the throwaway server
		standby   *faults.Cluster // Failover: the standby, until it is promoted
		proxy     *faults.Proxy
		slot      *observe.Slot // the commit-order observer (Postgres)
		schema    string
		checkDSN  string // where the checker reads (direct, never through the proxy)
		workerDSN string
		// After a failover: the old primary, its slot, and the new
		// primary's, which together observe the whole history.
		oldPrimary *faults.Cluster
		oldSlot    *observe.Slot
		disk       *faults.Disk // SQLite with OSCrashes: the file's filesystem
	)
	switch sp.Dialect {
	case pgsql.Dialect:
		var base string
		if sp.Failover {
			cluster, standby = replicatedPair(t, !sp.AsyncStandby)
			base = cluster.URL("postgres")
		} else if sp.OSCrashes > 0 {
			cluster = clusterOnDisk(t)
			base = cluster.URL("postgres")
		} else {
			base, cluster = postgresServer(t)
		}
		schema = leftover.Name("fgrel", time.Now())
		// The shared throwaway cluster may be mid-crash for another
		// history: setting up waits for it to be back (sharedUp).
		whileShared(cluster, func() {
			checkDSN = dbtest.CreateSchema(t, base, schema, cluster == nil) // a throwaway cluster goes away whole
			setup(t, checkDSN, schema, sp.Worker)
			if sp.Guarded {
				guardEvents(t, checkDSN, sp.Worker)
			}
		})
		var err error
		u, _ := url.Parse(checkDSN)
		proxy, err = faults.NewProxy(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		u.Host = proxy.Addr()
		q := u.Query()
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
		workerDSN = u.String()
		if cluster == nil && sp.Restarts > 0 {
			out.RestartsSkipped = true
		}
		if err = whileDown(func() (err error) { slot, err = observe.Create(ctx, checkDSN, schema, schema); return err }); err != nil {
			if !errors.Is(err, observe.ErrUnsupported) {
				t.Fatal(err)
			}
			t.Logf("*** NO COMMIT-ORDER OBSERVER: %v; commit order is id order ***", err)
			out.ObserverSkipped = true
		} else if !sp.Failover { // a replicated pair goes away whole
			defer func() {
				if err := whileDown(func() error { return slot.Drop(ctx, checkDSN) }); err != nil {
					t.Errorf("dropping the replication slot: %v", err)
				}
			}()
		}
	case mysql.Dialect:
		mdb = mariadbServer(t)
		var err error
		if checkDSN, err = mdb.CreateDatabase(ctx, "fgrel"); err != nil {
			t.Fatal(err)
		}
		setup(t, checkDSN, "", sp.Worker)
		if proxy, err = faults.NewMySQLProxy(mdb.Addr()); err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		u, _ := url.Parse(checkDSN)
		u.Host = proxy.Addr()
		u.RawQuery = "timeout=2s"
		workerDSN = u.String()
		sp.External, out.External = 0, 0 // unrecorded on MariaDB: see workload's mysqlSchema
	case sqlite.Dialect:
		checkDSN = filepath.Join(dir, "fencegate.db")
		if sp.OSCrashes > 0 {
			disk = diskOf(t)
			checkDSN = filepath.Join(disk.Mount, "fencegate.db")
		}
		workerDSN = checkDSN
		setup(t, checkDSN, "", sp.Worker)
	}

	until := time.Now().Add(sp.Duration)
	resources := make([]string, sp.Resources)
	for i := range resources {
		resources[i] = fmt.Sprintf("hot-%d", i)
	}
	var external []string
	for i := range sp.External {
		external = append(external, fmt.Sprintf("ext-%d", i))
	}
	base := workload.Config{
		DSN:            workerDSN,
		Agents:         sp.Agents,
		History:        "", // per incarnation
		Resources:      resources,
		External:       external,
		ExternalProb:   0.1,
		TTL:            sp.TTL,
		LockTimeout:    sp.TTL,
		OpTimeout:      5 * time.Second,
		Until:          until,
		StallProb:      0.2,
		StallMin:       1.2,
		StallMax:       3,
		HoldProb:       0.25,
		WaitProb:       0.3, // of the cycles that are not external
		HandOverProb:   0.6, // of the explicit holds: write, release and grant to the next waiter in one transaction
		LateRenewProb:  0.1,
		AbandonProb:    0.2,  // after a lease was freed: the next request spent, then sent anyway
		ShortRenewProb: 0.05, // after a write: a renewal shorter than the time left
		TwinRenewProb:  0.05, // after a write: two renewals at once
		BatchProb:      0.25,
		Bypass:         sp.Bypass,
		Announce:       true,
		Coordination:   sp.Coordination,
		Claims:         sp.Claims,
	}
	if sp.Dialect == pgsql.Dialect {
		// A stall inside the transaction holds the floor row: acquisitions
		// wait for it, or give up after LockTimeout. On SQLite it would hold
		// the whole file, so it is for Postgres only.
		base.TxStallProb = 0.03
		base.BeginStallProb = sp.BeginStalls
	} else {
		base.MaxConns = 3
	}
	fl := &fleet{t: t, dir: dir, base: base, seed: sp.Seed, bin: cmp.Or(sp.Worker, workerBin), alt: sp.WorkerAlt}
	for i := range sp.Procs {
		fl.start(i)
	}

	// The faults, at random moments between 10% and 85% of the run.
	type fault struct {
		at   time.Duration
		kind string
	}
	var plan []fault
	addFaults := func(kind string, n int) {
		for range n {
			at := time.Duration((0.1 + 0.75*rng.Float64()) * float64(sp.Duration))
			plan = append(plan, fault{at, kind})
		}
	}
	addFaults("kill", sp.Kills)
	if canPause {
		addFaults("pause", sp.Pauses)
		addFaults("pause-leader", sp.LeaderPauses)
	}
	if proxy != nil {
		addFaults("cut", sp.Cuts)
		addFaults("commit-cut", sp.CommitCuts)
		addFaults("delay", sp.Delays)
	}
	if cluster != nil || mdb != nil {
		addFaults("restart", sp.Restarts)
	}
	addFaults("oscrash", sp.OSCrashes)
	if sp.ClockSteps > 0 {
		if err := faults.CanStepClock(); err != nil {
			requireMachineFault(t, "the clock-step fault", err)
			t.Logf("\n*** CLOCK STEPS LEFT OUT OF THIS HISTORY: %v ***\n", err)
		} else {
			addFaults("clock", sp.ClockSteps)
		}
	}
	if standby != nil {
		plan = append(plan, fault{time.Duration((0.3 + 0.4*rng.Float64()) * float64(sp.Duration)), "failover"})
	}
	slices.SortFunc(plan, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
	t0 := time.Now()
	for _, f := range plan {
		wait(time.Until(t0.Add(f.at)))
		switch f.kind {
		case "kill":
			i := rng.IntN(sp.Procs)
			killed := false
			if rng.IntN(3) > 0 {
				killed = fl.killAtCommit(i)
			} else {
				killed = fl.kill(i)
			}
			if killed {
				out.Kills++
			}
			wait(time.Duration(50+rng.IntN(250)) * time.Millisecond)
			if time.Until(until) > time.Second {
				fl.start(i)
			}
		case "pause":
			if fl.pause(rng.IntN(sp.Procs), time.Duration((1.2+1.8*rng.Float64())*float64(sp.TTL))) {
				out.Pauses++
			}
		case "pause-leader":
			if fl.pauseNextLeader(time.Duration((2+rng.Float64())*float64(sp.TTL)), 2*time.Second) {
				out.Pauses++
			}
		case "clock":
			for range clockBurst {
				if err := faults.StepClockForward(clockStep); err != nil {
					t.Fatal(err)
				}
				out.ClockSteps++
				wait(clockStepEvery)
			}
		case "cut":
			proxy.CutAll()
		case "commit-cut":
			proxy.ArmCommitCuts(2)
		case "delay":
			by := time.Duration((0.3 + 0.7*rng.Float64()) * float64(sp.TTL))
			proxy.DelayFor(by, time.Duration((2+2*rng.Float64())*float64(sp.TTL)))
		case "restart":
			if err := restart(ctx, cluster, mdb); err != nil {
				t.Fatalf("the server did not come back: %v", err)
			}
			out.Restarts++
		case "oscrash":
			// Right after an acknowledgement (a grant, a write, a renewal,
			// a refusal, in turn): if its commit was not flushed, the crash
			// takes it.
			var crashErr error
			acked := fl.atNextAck(osCrashAfter[out.OSCrashes%len(osCrashAfter)], func() {
				if cluster != nil {
					crashErr = cluster.Disk().Crash()
				} else {
					crashErr = disk.Crash()
				}
			})
			if crashErr != nil {
				t.Fatal(crashErr)
			}
			if acked {
				out.OSCrashesOnAck++
			}
			if cluster != nil {
				if err := cluster.OSCrash(ctx); err != nil {
					t.Fatalf("the OS crash: %v\n%s", err, cluster.LogTail(20))
				}
			} else {
				// The file's filesystem stopped; the machine's processes die
				// with it; the "reboot" mounts what had reached the device.
				for i := range sp.Procs {
					if fl.kill(i) {
						out.Kills++
					}
				}
				if err := disk.Reattach(ctx); err != nil {
					t.Fatal(err)
				}
				if time.Until(until) > time.Second {
					for i := range sp.Procs {
						fl.start(i)
					}
				}
			}
			out.OSCrashes++
		case "failover":
			// First the standby falls behind: the primary's WAL sender
			// stops for 0.3 to 0.8 s while the workers go on (a
			// synchronous primary makes their commits wait; an
			// asynchronous one acknowledges what the standby does not
			// have), then it is killed with the primary, so what it had
			// not sent is lost. The standby is promoted, given a slot of
			// its own before any client can reach it, and the proxy moves
			// the clients to it.
			pid, err := cluster.WALSenderPID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lag := time.Duration(300+rng.IntN(500)) * time.Millisecond
			frozenAt := time.Now()
			if freezeThenKill(pid, func() {
				wait(lag)
				if sp.LagGrants > 0 && !fl.awaitGrants(sp.LagGrants, 20*time.Second) {
					t.Errorf("fewer than %d grants acknowledged in 20 s while the standby lagged", sp.LagGrants)
				}
			}) {
				out.StandbyLag = time.Since(frozenAt)
			}
			if err := cluster.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if err := standby.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			oldPrimary, oldSlot = cluster, slot
			cluster, standby = standby, nil
			checkDSN = withSearchPath(t, cluster.URL("postgres"), schema)
			if slot, err = observe.Create(ctx, checkDSN, schema+"_promoted", schema); err != nil {
				t.Fatal(err)
			}
			if sp.AdvanceFences {
				if out.AdvancedTo, err = advanceFences(ctx, cmp.Or(sp.Worker, workerBin), checkDSN); err != nil {
					t.Fatal(err)
				}
			}
			proxy.SetUpstream(cluster.Addr())
			out.Failovers++
		}
	}

	if sp.Dialect == sqlite.Dialect && sp.FinalCrash {
		// The end: every worker killed in the middle of its writes.
		wait(time.Until(until.Add(-time.Duration(300+rng.IntN(400)) * time.Millisecond)))
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range sp.Procs {
			wg.Go(func() {
				if fl.killAtCommit(i) {
					mu.Lock()
					out.Kills++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	fl.waitAll(until.Add(30 * time.Second))
	if proxy != nil {
		out.Proxy = proxy.Stats()
		proxy.Close()
	}
	if (cluster != nil || mdb != nil) && sp.FinalCrash {
		// Crash once more before looking: what was acknowledged must have
		// been durable, not merely in the server's memory.
		if err := restart(ctx, cluster, mdb); err != nil {
			t.Fatalf("the server did not come back: %v", err)
		}
		out.Restarts++
	}

	in := check.Input{Timeout: time.Minute, TTL: sp.TTL, AdvancedTo: out.AdvancedTo}
	if !sp.Bypass {
		in.VisualizeTo = filepath.Join(dir, "linearizability.html")
	}
	var err error
	whileShared(cluster, func() { // the checks below read no server
		in.Events, in.Rejections, in.LeaseLog = readDatabase(t, sp.Dialect, checkDSN)
		if slot != nil {
			err = whileDown(func() (err error) { in.Commits, err = slot.Read(ctx, checkDSN); return err })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if oldPrimary != nil {
		before, lost := beforeFailover(t, oldPrimary, oldSlot, cluster, schema)
		out.DecodedOld, in.OldPrimary, in.Lost = len(before), append(slices.Clone(before), lost...), lost
		out.LostGrants = check.Grants(lost)
		in.Commits = append(before, in.Commits...)
		for i := range in.Commits {
			in.Commits[i].Pos = i
		}
	}
	in.Ops, err = history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, o := range in.Ops {
		if !o.Returned() {
			open[o.Proc] = true
		}
	}
	for _, w := range fl.ended {
		if w.killed && open[w.name] {
			out.MidOpKills++
		}
	}
	if len(sp.Claims.SetResources) > 0 || len(sp.Claims.Paths) > 0 {
		out.Claims = check.Claims(in.Ops, readFileWrites(t, checkDSN), in.LeaseLog, in.Commits)
		withoutClaims(&in, sp.Claims)
	}
	out.Report = check.Run(in)
	out.Elapsed = time.Since(start)
	out.Picture = keepPicture(out.Report, os.TempDir())
	return out
}

// osCrashAfter are the acknowledgements the OS crashes follow, in turn:
// each is a commit that must have been flushed before it was acknowledged
// (the grant, the write, the renewal, the refusal's log record).
var osCrashAfter = []string{"granted", "wrote", "renewed", "refused"}

// keepPicture copies porcupine's picture of the history (1 to 1.5 MB of
// HTML, in the test's own temporary directory, which is removed) into dir,
// only when the history failed its checks, and returns where it put it ("" when
// it kept none). A passing run leaves nothing behind.
func keepPicture(r *check.Report, dir string) string {
	if r == nil || !r.Failed() || r.Visualization == "" {
		return ""
	}
	keep := filepath.Join(dir, fmt.Sprintf("fencegate-linearizability-%s.html", randomHex(4)))
	b, err := os.ReadFile(r.Visualization)
	if err != nil || os.WriteFile(keep, b, 0o644) != nil {
		return ""
	}
	return keep
}

// restart crashes the history's server (Postgres or MariaDB) and starts it
// again.
func restart(ctx context.Context, cluster *faults.Cluster, mdb *faults.MariaDB) error {
	if mdb != nil {
		return mdb.Crash(ctx)
	}
	if cluster == pgCluster {
		sharedUp.Lock()
		defer sharedUp.Unlock()
	}
	return cluster.Restart(ctx) // pg_ctl -w: back up, accepting connections, when it returns
}

// sharedUp is held to write while a history crashes the shared throwaway
// cluster (pgCluster) and waits for it to come back, and to read while a
// history sets itself up on it, which, unlike the histories' workers, does
// not ride out a server that is down: two parallel histories on 2 loaded
// cores met each other there ("connection refused" from CreateSchema).
var sharedUp sync.RWMutex

// whileShared runs f, which reads or writes the history's server directly,
// while no other history crashes it, when it is the shared cluster. f may
// end its goroutine (t.Fatal): the hold is released all the same.
func whileShared(cluster *faults.Cluster, f func()) {
	if cluster == nil || cluster != pgCluster {
		f()
		return
	}
	sharedUp.RLock()
	defer sharedUp.RUnlock()
	f()
}

// mariadbServer starts a throwaway mariadbd for one history, removed with
// it. Without mariadbd and mariadb-install-db it skips t, or fails it under
// FENCEGATE_REQUIRE_MYSQL=true.
func mariadbServer(t *testing.T) *faults.MariaDB {
	t.Helper()
	if err := faults.CanMariaDB(); err != nil {
		if os.Getenv(mysqltest.EnvRequire) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, mysqltest.EnvRequire)
		}
		t.Skipf("\n*** MARIADB HISTORY SKIPPED: %v ***\n", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := faults.StartMariaDB(ctx)
	if err != nil {
		setupFailed(t, "a throwaway MariaDB (mariadb-install-db, mariadbd)", err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return m
}

// setup migrates a fresh database and adds the workload's tables.
//
// A mutant's worker (worker not empty) runs the migrations itself, so that
// a mutant of the migrations' SQL (say, of fencegate_acquire) is what the
// database runs.
func setup(t *testing.T, dsn, schema, worker string) {
	t.Helper()
	ctx := context.Background()
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if worker != "" {
		cmd := exec.CommandContext(ctx, worker, "-migrate")
		cmd.Env = append(os.Environ(), "FGWORKER_DSN="+dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the mutant's worker did not migrate the database: %v\n%s", err, out)
		}
	} else if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := workload.Setup(ctx, d.DB(), d.Dialect(), schema); err != nil {
		t.Fatal(err)
	}
}

// guardEvents guards fg_events by its resource column: the writes and the
// floor raises (inserted by a trigger in the raising transaction) pass, a
// write that skipped the gate does not. A mutant's worker (worker not
// empty) installs the guard itself, so that a mutant of the guard's
// trigger is what the database runs.
func guardEvents(t *testing.T, dsn, worker string) {
	t.Helper()
	ctx := context.Background()
	if worker != "" {
		cmd := exec.CommandContext(ctx, worker, "-guard", "fg_events")
		cmd.Env = append(os.Environ(), "FGWORKER_DSN="+dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the mutant's worker did not guard fg_events: %v\n%s", err, out)
		}
		return
	}
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	admin, err := guard.New(d.DB(), d.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Install(ctx, guard.Spec{Table: "fg_events", ResourceExpr: "resource"}); err != nil {
		t.Fatal(err)
	}
}

// whileDown runs f until it succeeds or fails for a reason other than a
// server that is down: another history on the same cluster may be
// crashing it.
func whileDown(f func() error) error {
	var err error
	for range 50 {
		var pgErr *pgconn.PgError
		if err = f(); err == nil || errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "57P") {
			return err // done, or the server answered: 57P is its shutting down or starting up
		}
		wait(200 * time.Millisecond)
	}
	return err
}

// readDatabase reopens the database (after the crash: SQLite recovers its
// WAL here) and reads the events, the rejection log and, on SQLite and
// MariaDB, the log of lease versions.
func readDatabase(t *testing.T, dialect sqlstore.Dialect, dsn string) ([]workload.Event, []sqlstore.Rejection, []observe.Mark) {
	t.Helper()
	ctx := context.Background()
	var d sqlopen.Driver
	var err error
	for range 50 { // Postgres may still be finishing crash recovery
		if d, err = sqlopen.Open(ctx, dsn); err == nil {
			break
		}
		wait(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if dialect == sqlite.Dialect {
		var res string
		if err := d.DB().QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
			t.Errorf("SQLite integrity check after the crash: %q, %v", res, err)
		}
	}
	events, err := workload.ReadEvents(ctx, d.DB())
	if err != nil {
		t.Fatal(err)
	}
	rejections, err := workload.ReadRejections(ctx, d.DB(), dialect)
	if err != nil {
		t.Fatal(err)
	}
	var leases []observe.Mark
	if dialect == sqlite.Dialect || dialect == mysql.Dialect {
		if leases, err = workload.ReadLeaseLog(ctx, d.DB()); err != nil {
			t.Fatal(err)
		}
	}
	return events, rejections, leases
}

// withSearchPath returns base with schema as its sessions' search_path.
func withSearchPath(t *testing.T, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// replicatedPair starts a primary and a standby for one history, removed
// with it.
func replicatedPair(t *testing.T, synchronous bool) (primary, standby *faults.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, s, err := faults.StartReplicated(ctx, synchronous)
	if err != nil {
		setupFailed(t, "a replicated Postgres pair (initdb, pg_basebackup)", err)
	}
	t.Cleanup(func() {
		_ = s.Stop()
		_ = p.Stop()
	})
	return p, s
}

// clusterOnDisk starts a throwaway Postgres cluster of the history's own
// with its data directory on a loop-device filesystem (OS crashes), removed
// with it. Where that cannot run (FENCEGATE_MACHINE_FAULTS unset, not root,
// not Linux, no initdb) it skips t loudly, or fails it under
// FENCEGATE_REQUIRE_POSTGRES=true (see requireOSCrash).
func clusterOnDisk(t *testing.T) *faults.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := faults.StartClusterOnDisk(ctx, 512)
	if err != nil {
		requireOSCrash(t, err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// diskOf makes a loop-device filesystem for a SQLite history's file (OS
// crashes), removed with the history; it skips or fails t like
// clusterOnDisk.
func diskOf(t *testing.T) *faults.Disk {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := faults.NewDisk(ctx, t.TempDir(), 256, -1, -1)
	if err != nil {
		requireOSCrash(t, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("removing the loop-device filesystem: %v", err)
		}
	})
	return d
}

// requireOSCrash skips t, or fails it under FENCEGATE_REQUIRE_POSTGRES=true
// when the fault could run but did not; without the opt-in to faults that
// change the machine it always skips.
func requireOSCrash(t *testing.T, err error) {
	t.Helper()
	requireMachineFault(t, "the OS-crash fault's filesystem", err)
	t.Skipf("\n*** OS-CRASH HISTORY SKIPPED: %v ***\n", err)
}

// requireMachineFault fails t, under FENCEGATE_REQUIRE_POSTGRES=true, when
// a fault that changes the machine (what) cannot run for a reason other
// than the missing opt-in (err); otherwise it returns, and t goes on
// without the fault.
func requireMachineFault(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, faults.ErrMachineFaultsOff) && os.Getenv(dbtest.EnvRequirePostgres) == "true" {
		setupFailed(t, what, fmt.Errorf("%w (and %s=true makes that a failure)", err, dbtest.EnvRequirePostgres))
	}
}

// setupFailed fails t because what a fault needs could not be set up: its
// first line says what to do, the details follow.
func setupFailed(t *testing.T, what string, err error) {
	t.Helper()
	test, _, _ := strings.Cut(t.Name(), "/")
	t.Fatalf("%s could not be set up: fix the cause below, or run the others without it: go test -skip '^%s$' ./integration\n%v", what, test, err)
}

// beforeFailover reads what the old primary's slot saw commit, starting the
// old primary again on its own for it (the proxy no longer leads there),
// and splits them at the new primary's timeline's switch point: those up to
// it reached the new primary (kept); those after it never did (lost). With
// synchronous replication a lost commit was never acknowledged either, with
// asynchronous replication it may have been.
func beforeFailover(t *testing.T, old *faults.Cluster, slot *observe.Slot, promoted *faults.Cluster, schema string) (kept, lost []observe.Commit) {
	t.Helper()
	ctx := context.Background()
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	commits, err := slot.Read(ctx, withSearchPath(t, old.URL("postgres"), schema))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := promoted.SwitchPoint()
	if err != nil {
		t.Fatal(err)
	}
	end, err := observe.ParseLSN(sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commits {
		lsn, err := observe.ParseLSN(c.LSN)
		if err != nil {
			t.Fatal(err)
		}
		if lsn <= end {
			kept = append(kept, c)
		} else {
			lost = append(lost, c)
		}
	}
	if len(lost) > 0 {
		t.Logf("failover: %d transactions committed on the old primary after the switch point %s, never replicated", len(lost), sp)
	}
	return kept, lost
}

// fleet runs the worker processes of one history.
type fleet struct {
	t    *testing.T
	dir  string
	base workload.Config
	seed uint64
	bin  string // the fgworker binary
	alt  string // the odd-numbered workers' binary, when set

	mu    sync.Mutex
	procs map[int]*worker
	incs  map[int]int
	ended []*worker

	grants    atomic.Int64  // acknowledged grants the workers announced
	grantSeen chan struct{} // a poke on each announcement
}

type worker struct {
	name   string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	commit commitWatch
	done   chan struct{}
	killed bool
	err    error
}

// commitWatch reads a worker's stdout, where it announces each COMMIT just
// before sending it ("commit …") and each acknowledged grant ("granted …"),
// and runs a hook on the next announcement of each.
type commitWatch struct {
	mu     sync.Mutex
	onNext func()            // on the next COMMIT
	onAck  map[string]func() // on the next acknowledgement of a kind: "granted", "wrote", "renewed", "refused"
	fleet  *fleet            // counts the grants
}

func (c *commitWatch) Write(p []byte) (int, error) {
	if n := bytes.Count(p, []byte("granted ")); n > 0 {
		c.fleet.grants.Add(int64(n))
		select {
		case c.fleet.grantSeen <- struct{}{}:
		default:
		}
	}
	var fns []func()
	c.mu.Lock()
	if c.onNext != nil && bytes.Contains(p, []byte("commit ")) {
		fns, c.onNext = append(fns, c.onNext), nil
	}
	for what, fn := range c.onAck {
		if bytes.Contains(p, []byte(what+" ")) {
			fns = append(fns, fn)
			delete(c.onAck, what)
		}
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return len(p), nil
}

// start runs a new incarnation of worker i. Even workers run the gate over
// pgx.Tx, odd ones over *sql.Tx (on Postgres; SQLite is always *sql.Tx).
func (f *fleet) start(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.procs == nil {
		f.procs, f.incs = map[int]*worker{}, map[int]int{}
		if f.grantSeen == nil {
			f.grantSeen = make(chan struct{}, 1)
		}
		f.t.Cleanup(f.killAll) // a history that stops half-way leaves no workers behind
	}
	f.incs[i]++
	name := fmt.Sprintf("p%d.%d", i, f.incs[i])
	cfg := f.base
	cfg.Proc = name
	cfg.History = filepath.Join(f.dir, name+".jsonl")
	cfg.Seed = f.seed*1000 + uint64(i)*100 + uint64(f.incs[i])
	cfg.Driver = "sql"
	if i%2 == 0 {
		cfg.Driver = "pgx"
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.dir, name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
	w := &worker{name: name, done: make(chan struct{}), commit: commitWatch{fleet: f}}
	bin := f.bin
	if i%2 == 1 && f.alt != "" {
		bin = f.alt
	}
	w.cmd = exec.Command(bin, "-config", path)
	w.cmd.Stdout = &w.commit
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	f.procs[i] = w
}

// kill sends SIGKILL to worker i and waits for it to die. It reports
// whether the worker was still running.
func (f *fleet) kill(i int) bool {
	f.mu.Lock()
	w := f.procs[i]
	delete(f.procs, i)
	f.mu.Unlock()
	if w == nil {
		return false
	}
	_ = w.cmd.Process.Kill()
	<-w.done
	w.killed = !w.cmd.ProcessState.Exited() // by a signal: ours, now or from killAtCommit's hook
	f.mu.Lock()
	f.ended = append(f.ended, w)
	f.mu.Unlock()
	return w.killed
}

// killAtCommit sends SIGKILL to worker i as it announces its next COMMIT
// (or after two seconds without one), and waits for it to die. It reports
// whether the worker was still running.
func (f *fleet) killAtCommit(i int) bool {
	f.mu.Lock()
	w := f.procs[i]
	f.mu.Unlock()
	if w == nil {
		return false
	}
	w.commit.mu.Lock()
	w.commit.onNext = func() { _ = w.cmd.Process.Kill() }
	w.commit.mu.Unlock()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
	}
	return f.kill(i)
}

// atNextAck runs fn once, as soon as any running worker announces an
// acknowledgement of the kind what ("granted", "wrote", "renewed",
// "refused"; see workload.Config.Announce), or after two seconds without
// one, and returns after it ran, reporting whether the acknowledgement came.
func (f *fleet) atNextAck(what string, fn func()) bool {
	var once sync.Once
	done := make(chan struct{})
	hook := func() { once.Do(func() { fn(); close(done) }) }
	f.mu.Lock()
	var armed []*worker
	for _, w := range f.procs {
		w.commit.mu.Lock()
		if w.commit.onAck == nil {
			w.commit.onAck = map[string]func(){}
		}
		w.commit.onAck[what] = hook
		w.commit.mu.Unlock()
		armed = append(armed, w)
	}
	f.mu.Unlock()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	acked := true
	select {
	case <-done:
	case <-timer.C:
		acked = false
		hook()
	}
	for _, w := range armed {
		w.commit.mu.Lock()
		delete(w.commit.onAck, what)
		w.commit.mu.Unlock()
	}
	return acked
}

// awaitGrants waits until the workers announced n more acknowledged grants,
// or timeout passed, and reports whether they did.
func (f *fleet) awaitGrants(n int, timeout time.Duration) bool {
	target := f.grants.Load() + int64(n)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for f.grants.Load() < target {
		select {
		case <-f.grantSeen:
		case <-timer.C:
			return false
		}
	}
	return true
}

// killAll kills every worker still running.
func (f *fleet) killAll() {
	f.mu.Lock()
	procs := f.procs
	f.procs = nil
	f.mu.Unlock()
	for _, w := range procs {
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// waitAll waits for every worker to finish its run, killing (and failing
// the test for) any still running at the deadline, and checks that no
// worker died by itself.
func (f *fleet) waitAll(deadline time.Time) {
	f.mu.Lock()
	procs := f.procs
	f.procs = nil
	f.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, w := range procs {
		select {
		case <-w.done:
		case <-timer.C:
			f.t.Errorf("worker %s still running 30s after the end of the run; killed", w.name)
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		f.mu.Lock()
		f.ended = append(f.ended, w)
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.ended {
		if w.err != nil && !w.killed {
			f.t.Errorf("worker %s failed: %v\n%s", w.name, w.err, w.stderr.String())
		}
	}
}

// wait sleeps. The harness sleeps only to place faults in time (the fault
// model), never to wait for something to happen.
func wait(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var errNoViolations = errors.New("the control history broke no rule: the checker (or the workload) is too weak to catch a missing gate")

// readFileWrites reads fg_file_writes, the writes under claims.
func readFileWrites(t *testing.T, dsn string) []workload.FileWrite {
	t.Helper()
	ctx := context.Background()
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ws, err := workload.ReadFileWrites(ctx, d.DB())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// withoutClaims removes from in what the database recorded of the claims'
// resources (their floors, leases and refusals): check.Claims judges them,
// and the single-resource checks, which know nothing of sets and paths,
// must not.
func withoutClaims(in *check.Input, c workload.Claims) {
	claimed := func(res string) bool { return fence.IsPath(res) || slices.Contains(c.SetResources, res) }
	in.Events = slices.DeleteFunc(in.Events, func(e workload.Event) bool { return claimed(e.Resource) })
	in.Rejections = slices.DeleteFunc(in.Rejections, func(r sqlstore.Rejection) bool { return claimed(r.Resource) })
	in.LeaseLog = slices.DeleteFunc(in.LeaseLog, func(m observe.Mark) bool { return claimed(m.Resource) })
	commits := in.Commits[:0]
	for _, c := range in.Commits {
		c.Marks = slices.DeleteFunc(c.Marks, func(m observe.Mark) bool { return claimed(m.Resource) })
		if len(c.Marks) > 0 {
			c.Pos = len(commits)
			commits = append(commits, c)
		}
	}
	in.Commits = commits
}
