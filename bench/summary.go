package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadSampler reads the 1-minute load average every interval while a run
// goes on, so that the results can say how busy the machine was.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
	stop    context.CancelFunc
	done    chan struct{}
}

// sampleLoad starts a sampler; stop it with its Stop. Where /proc/loadavg
// cannot be read it samples nothing.
func sampleLoad(ctx context.Context, interval time.Duration) *loadSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &loadSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if v, ok := loadAvg1(); ok {
				s.mu.Lock()
				s.samples = append(s.samples, v)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the samples.
func (s *loadSampler) Stop() []float64 {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

func loadAvg1() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// loadLine states the machine's load during the run.
func loadLine(samples []float64, every time.Duration) string {
	if len(samples) == 0 {
		return fmt.Sprintf("**Load during the run:** not known (no /proc/loadavg). %d CPUs.", runtime.NumCPU())
	}
	sorted := slices.Sorted(slices.Values(samples))
	return fmt.Sprintf("**Load during the run:** the 1-minute load average (sampled every %s) was %.1f at the start, %.1f at the end, median %.1f, max %.1f, on %d CPUs. "+
		"Above the CPU count, the benchmark, its proxy and Postgres waited for a CPU beside other work: absolute figures are lower and noisier than on a quiet machine. "+
		"Every ratio below compares variants run in the same interleaved rounds, under the same load, so ratios hold better than absolute figures.",
		every, samples[0], samples[len(samples)-1], sorted[len(sorted)/2], sorted[len(sorted)-1], runtime.NumCPU())
}

// revision names the commit the benchmark was built from: as Go stamped
// it, or else as git says of the working directory (a build with
// -buildvcs=false stamps nothing); "" when neither knows.
func revision(ctx context.Context) string {
	var rev, modified string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (with uncommitted changes)"
				}
			}
		}
	}
	if rev == "" {
		out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
		if err != nil {
			return ""
		}
		rev = strings.TrimSpace(string(out))
		// RESULTS.md and chart.svg are what this run rewrites.
		st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!RESULTS.md", ":!chart.svg").Output()
		if err == nil && len(strings.TrimSpace(string(st))) > 0 {
			modified = " (with uncommitted changes)"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return "commit " + rev + modified
}

// x formats a ratio, or says it was not measured in this run.
func (r *Report) x(name ...any) string {
	v, ok := r.get(name...)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2fx", v)
}

// Opening is the top of RESULTS.md: when to pick what, and the few ratios
// that decide it, from this run's figures.
func (r *Report) Opening(cfg Config) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	nets := cfg.nets()
	netNames := make([]string, len(nets))
	for i, n := range nets {
		netNames[i] = n.Name
	}
	per := func(name func(net string) []any) string {
		var parts []string
		for _, n := range netNames {
			parts = append(parts, fmt.Sprintf("%s %s", r.x(name(n)...), n))
		}
		return strings.Join(parts, ", ")
	}

	w("## When to pick what\n\n")
	w("- **An advisory transaction lock** (`pg_advisory_xact_lock`) when every write the lock guards is in that one transaction, on that one connection. It is the cheapest guard measured here (its lock lives in the server's memory), and it ends with the transaction: a holder that stalls and is killed loses its writes with it.\n")
	w("- **fencegate** when the holder writes through a connection pool, from another process, or may write after a stall (a GC pause, a frozen VM, a partition that heals). Each write carries the holder's fence, and the database refuses it once a later holder has been granted the resource: the stalled holder's late write is refused, not merged.\n")
	w("- **Not pglock, nor a session advisory lock (`pg_advisory_lock`), for that case**: both let a late write land. pglock's lease passes to the next holder when the old one stops heartbeating, but nothing at the database refuses the old holder's write; a session lock is held for as long as its session lives, and once that session is killed a holder writing through another connection still writes.\n\n")
	if len(r.wedged) > 0 {
		var landed, kept []string
		for _, m := range []string{"fencegate", "advisory-xact", "advisory-session", "pglock", "pglock-heartbeat", "mariadb fencegate", "mariadb GET_LOCK"} {
			lateWrite, ok := r.wedged[m]
			switch {
			case !ok:
			case lateWrite:
				landed = append(landed, wedgeNames[m])
			default:
				kept = append(kept, wedgeNames[m])
			}
		}
		w("In this run's wedged holder (scenario 5: holder A is frozen with SIGSTOP just before its write, B takes over and writes, A is resumed and writes), A's late write landed with %s; it was kept out with %s", strings.Join(landed, ", "), strings.Join(kept, ", "))
		if lateWrite, ok := r.wedged["advisory-xact"]; ok && !lateWrite {
			w(" (the transaction lock only because B could take over solely by killing A's session, which also aborted A's one transaction)")
		}
		w(".\n\n")
	}

	w("## The ratios that decide it\n\n")
	w("Throughput of fencegate ÷ throughput of the alternative, both measured in the same interleaved rounds (median of the per-round ratios): 1 is the same speed, below 1 fencegate is slower. A ratio of latencies says so (there, below 1 fencegate's is shorter). Paths: loopback, and %s through a delaying proxy (a network's round trip).\n\n", strings.Join(netNames[1:], ", "))
	w("- **The price of the fence on one write** (one writer, pgx): a `pgxgate.BeginFenced` transaction ÷ the same unfenced BEGIN/UPDATE/COMMIT: %s. `pgxgate.CommitBatch` (fence, write and commit in one round trip) ÷ the unfenced BEGIN/UPDATE/COMMIT: %s; ÷ an unfenced autocommit UPDATE (also one round trip): %s. `gate.Commit` in a database/sql transaction ÷ unfenced: %s.\n",
		per(func(n string) []any { return []any{"1", n, "begin"} }),
		per(func(n string) []any { return []any{"1", n, "batch/tx"} }),
		per(func(n string) []any { return []any{"1", n, "batch/auto"} }),
		per(func(n string) []any { return []any{"1", n, "sql"} }))
	for _, keys := range []string{"one key", "distinct keys"} {
		var parts []string
		for _, wr := range cfg.Writers {
			parts = append(parts, fmt.Sprintf("%s %s", plural(wr, "writer"), per(func(n string) []any { return []any{"2", keys, wr, n, "tx/advisory"} })))
		}
		w("- **Against the advisory transaction lock, %s** (scenario 2; fencegate tx ÷ `pg_advisory_xact_lock` tx, each guarding the same UPDATE): %s.\n", keys, strings.Join(parts, "; "))
	}
	if len(cfg.Writers) > 0 {
		wr := cfg.Writers[len(cfg.Writers)-1]
		w("- **Against pglock on one key, %s** (scenario 2): fencegate tx ÷ pglock with its heartbeat off: %s. pglock's waiter sleeps a whole lease (1 s) before it looks again, so on one key its throughput is about writers ÷ lease whatever the database could do. With pglock's heartbeat on: %s; that many times more writes, because pglock's Close races the heartbeat it cancels and often leaves the lock row behind, so the next holder waits out a lease (section 2 counts those errors and shows the lease-long p99).\n",
			plural(wr, "writer"), per(func(n string) []any { return []any{"2", "one key", wr, n, "tx/pglock"} }), per(func(n string) []any { return []any{"2", "one key", wr, n, "tx/pglock hb"} }))
	}
	w("- **A lease on its own** (scenario 3, one acquirer, acquire+release p50; below 1 fencegate's is shorter): fencegate ÷ pglock (heartbeat off): %s; fencegate ÷ the bare SQL lease (one durable upsert and a release, the least a lease with a durable grant costs; not a lease to use): %s.\n",
		per(func(n string) []any { return []any{"3", n, "pglock"} }), per(func(n string) []any { return []any{"3", n, "bare"} }))
	if _, ok := r.get("notify", 16, "loopback", "pglock"); ok {
		var parts, bare []string
		for _, wr := range cfg.Writers {
			parts = append(parts, fmt.Sprintf("%s %s", plural(wr, "acquirer"), per(func(n string) []any { return []any{"notify", wr, n, "pglock"} })))
			bare = append(bare, fmt.Sprintf("%s %s", plural(wr, "acquirer"), per(func(n string) []any { return []any{"notify", wr, n, "bare"} })))
		}
		w("- **Leases under concurrency** (distinct keys, acquire+release p50, fencegate ÷ pglock; below 1 fencegate's is shorter): %s. Fencegate ÷ the bare SQL lease (the bound, in the same rounds): %s.\n", strings.Join(parts, "; "), strings.Join(bare, "; "))
	}
	if _, ok := r.get("fairness", vHandAdvisory, "vs advisory"); ok {
		w("- **64 workers taking turns on one lock** (throughput ÷ `pg_advisory_lock`'s queue, which fences nothing): AcquireWait, a fenced `pgxgate.CommitBatch`, Release: %s; the same with the release and the next holder's grant in the write's commit (`handover.CommitBatch`): %s with one coordinator, %s with four woken by NOTIFY. Busiest ÷ least busy worker: %s and %s (1 is perfectly even; pglock's is in the table).\n",
			r.x("fairness", vHandWait, "vs advisory"), r.x("fairness", vHandOff, "vs advisory"), r.x("fairness", vHandOffMany, "vs advisory"),
			strings.TrimSuffix(r.x("fairness", vHandOff, "max/min"), "x"), strings.TrimSuffix(r.x("fairness", vHandOffMany, "max/min"), "x"))
	}
	if v, ok := r.get("7", 64, vHandOffMany, "p50 ms"); ok {
		adv, _ := r.get("7", 64, vHandAdvisory, "p50 ms")
		w("- **Hand-over latency, 64 waiters** (release → the next holder's grant, p50, loopback): %.2f ms with the hand-over in the write's commit across four coordinators, against %.2f ms for `pg_advisory_lock`'s queue (whose grant is in the server's memory, not durable).\n", v, adv)
	}
	if _, ok := r.get("mariadb", "commit"); ok {
		w("- **MariaDB** (loopback): fenced ÷ unfenced transaction %s; fencegate ÷ `GET_LOCK` on one key: %s with 1 writer, %s with 16.\n", r.x("mariadb", "commit"), r.x("mariadb", 1, "get_lock"), r.x("mariadb", 16, "get_lock"))
	}
	if _, ok := r.get("1", "sqlite", 1); ok {
		w("- **SQLite** (in-process, no round trip): fenced ÷ unfenced transaction %s with 1 writer, %s with 4.\n", r.x("1", "sqlite", 1), r.x("1", "sqlite", 4))
	}
	w("\nThe full tables follow, with each scenario's method; [README.md](README.md) says how to run them.\n\n")
	return b.String()
}

// wedgeNames are the wedged holder's guards as the opening names them.
var wedgeNames = map[string]string{
	"fencegate":         "fencegate",
	"advisory-xact":     "`pg_advisory_xact_lock`",
	"advisory-session":  "**`pg_advisory_lock` (session)**",
	"pglock":            "**pglock (heartbeat off)**",
	"pglock-heartbeat":  "**pglock (heartbeat on)**",
	"mariadb fencegate": "fencegate on MariaDB",
	"mariadb GET_LOCK":  "**MariaDB's `GET_LOCK`**",
}

// plural is "1 writer" or "16 writers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
