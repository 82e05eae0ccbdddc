package integration

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// EnvSummary names a file the summary is also written to (for
// docs/RELIABILITY.md).
const EnvSummary = "FENCEGATE_RELIABILITY_SUMMARY"

// tally adds up the histories of one row of the summary.
type tally struct {
	Histories  int
	Elapsed    time.Duration
	Ops        int
	Writes     map[history.Outcome]int
	Committed  int
	Grants     int
	Acquires   map[history.Outcome]int
	Refusals   int
	Unlogged   int
	UnknownIn  int // unknown writes that committed
	UnknownOut int // unknown writes that did not
	Rejections int
	Observed   int // transactions logical decoding observed
	Kills      int
	MidOpKills int
	Pauses     int
	Restarts   int
	OSCrashes  int
	CutAll     int64
	ConnsCut   int64
	CommitCuts int64
	LinearOps  int
	Linear     map[porcupine.CheckResult]int
	Violations map[string]int
	Skipped    bool
	NoObserver bool
}

var summary = struct {
	sync.Mutex
	rows map[string]*tally
}{rows: map[string]*tally{}}

func record(row string, o *outcome) {
	summary.Lock()
	defer summary.Unlock()
	s := summary.rows[row]
	if s == nil {
		s = &tally{Writes: map[history.Outcome]int{}, Acquires: map[history.Outcome]int{}, Linear: map[porcupine.CheckResult]int{}, Violations: map[string]int{}}
		summary.rows[row] = s
	}
	r := o.Report
	s.Histories++
	s.Elapsed += o.Elapsed
	s.Ops += r.Ops
	for k, v := range r.Outcomes[history.Write] {
		s.Writes[k] += v
	}
	for k, v := range r.Outcomes[history.Acquire] {
		s.Acquires[k] += v
	}
	s.Committed += r.Committed
	s.Grants += r.Grants
	s.Refusals += r.Count(history.Write, history.Refused)
	s.Unlogged += r.RefusedUnlogged
	s.UnknownIn += r.UnknownPresent
	s.UnknownOut += r.UnknownAbsent
	s.Rejections += r.Rejected
	s.Observed += r.Observed
	s.Kills += o.Kills
	s.MidOpKills += o.MidOpKills
	s.Pauses += o.Pauses
	s.Restarts += o.Restarts
	s.OSCrashes += o.OSCrashes
	s.CutAll += o.Proxy.CutAll
	s.ConnsCut += o.Proxy.ConnsCut
	s.CommitCuts += o.Proxy.CommitCuts
	s.LinearOps += r.LinearOps
	s.Linear[r.Linearizable]++
	for k, v := range r.ByCheck() {
		s.Violations[k] += v
	}
	s.Skipped = s.Skipped || o.RestartsSkipped
	s.NoObserver = s.NoObserver || o.ObserverSkipped
}

// describe is one history in a few lines.
func describe(o *outcome) string {
	r := o.Report
	w := r.Outcomes[history.Write]
	a := r.Outcomes[history.Acquire]
	return fmt.Sprintf("%s%s: %d procs × %d agents, %v, seed %d, took %v\n"+
		"  ops %d: acquire ok %d / denied %d / fail %d / unknown %d; write ok %d / refused %d / fail %d / unknown %d (%d of them committed)\n"+
		"  paths: writes %v; admit ok %d / refused %d / unknown %d; renewals %v (late %v); abandoned requests %v; waited their turn %v; hand-overs %v (%d acknowledged, %d to a waiter, %d returned by its wait)\n"+
		"  table: %d writes, %d grants; rejection log %d (refusals not logged: %d); reads of grants a failover lost: %d; commit order: %s; lease versions in database time: %d\n"+
		"  faults: %d kills (%d mid-operation), %d pauses, %d server crashes, %d OS crashes (%d right after an acknowledgement), %d cuts of all connections (%d conns), %d connections cut after COMMIT, %d delays, %d steps of the wall clock%s\n"+
		"  linearizability (porcupine, %d ops): %s; violations: %d %v",
		o.Dialect, map[bool]string{true: " (control: no gate)"}[o.Bypass], o.Procs, o.Agents, o.Duration, o.Seed, o.Elapsed.Round(time.Second),
		r.Ops, a[history.OK], a[history.Denied], a[history.Fail], a[history.Unknown],
		w[history.OK], w[history.Refused], w[history.Fail], w[history.Unknown], r.UnknownPresent,
		r.Via, r.Count(history.Admit, history.OK), r.Count(history.Admit, history.Refused), r.Count(history.Admit, history.Unknown), r.Outcomes[history.Renew], r.Late, r.Outcomes[history.Abandon], r.Waited,
		r.Outcomes[history.HandOver], r.HandOvers, r.HandedOver, r.HandedSeen,
		r.Committed, r.Grants, r.Rejected, r.RefusedUnlogged, r.LostReads, order(r.Observed, o), r.Leases,
		o.Kills, o.MidOpKills, o.Pauses, o.Restarts, o.OSCrashes, o.OSCrashesOnAck, o.Proxy.CutAll, o.Proxy.ConnsCut, o.Proxy.CommitCuts, o.Proxy.Delays, o.ClockSteps, failovers(o),
		r.LinearOps, r.Linearizable, len(r.Violations), r.ByCheck())
}

func failovers(o *outcome) string {
	if o.Failovers == 0 {
		return ""
	}
	return fmt.Sprintf(", %d failover after the standby fell %v behind (%d transactions decoded on the old primary, %d on the promoted standby)",
		o.Failovers, o.StandbyLag, o.DecodedOld, o.Report.Observed-o.DecodedOld)
}

func order(observed int, o *outcome) string {
	if o.Dialect == pgsql.Dialect && !o.ObserverSkipped {
		return fmt.Sprintf("logical decoding, %d transactions", observed)
	}
	return "id order"
}

// printSummary prints the one-screen summary of every history run, and
// writes it to $FENCEGATE_RELIABILITY_SUMMARY when set.
func printSummary(w io.Writer) {
	summary.Lock()
	defer summary.Unlock()
	if len(summary.rows) == 0 {
		return
	}
	var b strings.Builder
	mode := "CI size"
	if d := soak(); d > 0 {
		mode = "soak " + d.String()
	}
	fmt.Fprintf(&b, "\n== fencegate reliability summary (%s) ==\n", mode)
	fmt.Fprintf(&b, "%-18s %4s %6s %7s %7s %7s %7s %6s %7s %7s %5s %5s %5s %12s %9s %s\n",
		"", "hist", "time", "ops", "writes", "refused", "unknown", "grants", "decoded", "kills", "pause", "crash", "cuts", "conns/COMMIT", "linear", "violations")
	for _, name := range slices.Sorted(maps.Keys(summary.rows)) {
		s := summary.rows[name]
		lin := fmt.Sprintf("%d/%d ok", s.Linear[porcupine.Ok], s.Histories)
		viol := 0
		for _, v := range s.Violations {
			viol += v
		}
		vs := fmt.Sprint(viol)
		if viol > 0 {
			vs += " " + fmt.Sprint(s.Violations)
		}
		crash := fmt.Sprint(s.Restarts)
		if s.OSCrashes > 0 {
			crash += fmt.Sprintf("+%dos", s.OSCrashes)
		}
		fmt.Fprintf(&b, "%-18s %4d %6s %7d %7d %7d %7d %6d %7d %7s %5d %5s %5d %12s %9s %s\n",
			name, s.Histories, s.Elapsed.Round(time.Second), s.Ops, s.Committed, s.Refusals,
			s.Writes[history.Unknown]+s.Acquires[history.Unknown], s.Grants, s.Observed, fmt.Sprintf("%d/%d", s.Kills, s.MidOpKills),
			s.Pauses, crash, s.CutAll, fmt.Sprintf("%d/%d", s.ConnsCut, s.CommitCuts), lin, vs)
	}
	fmt.Fprintf(&b, "writes: committed rows; unknown: acquires and writes whose outcome the agent never saw;\n")
	fmt.Fprintf(&b, "decoded: transactions whose commit order logical decoding observed (Postgres; SQLite: id order);\n")
	fmt.Fprintf(&b, "kills: SIGKILLs / those that left an operation unanswered; pause: SIGSTOP for 1.2-3 ttl;\n")
	fmt.Fprintf(&b, "crash: pg_ctl restart -m immediate (MariaDB: SIGKILL of mariadbd, restart on its data directory; +Nos: the filesystem shut down unflushed, an OS crash); ")
	fmt.Fprintf(&b, "conns/COMMIT: connections cut at random moments / right after a COMMIT; control rows must show violations.\n")
	for _, name := range slices.Sorted(maps.Keys(summary.rows)) {
		if summary.rows[name].Skipped {
			fmt.Fprintf(&b, "*** %s: the Postgres restart fault was skipped (no throwaway cluster) ***\n", name)
		}
		if summary.rows[name].NoObserver {
			fmt.Fprintf(&b, "*** %s: no logical decoding: commit order was id order, which trusts the lock under test ***\n", name)
		}
	}
	fmt.Fprint(w, b.String())
	if path := os.Getenv(EnvSummary); path != "" {
		_ = os.WriteFile(path, []byte(b.String()), 0o644)
	}
}
