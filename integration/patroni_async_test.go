//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/integration/internal/history"
)

// patroniMargin is the --margin the on_role_change callback passes to
// fencegate fence advance: far above the grants the workload makes in the
// replicas' lag (about 20 a second, for 5 s).
const patroniMargin = 1000

// TestPatroniAsyncAdvanced runs a history on Patroni with asynchronous
// replication, wired the way an operator runs the remedy: Patroni's
// on_role_change callback runs `fencegate fence advance` on the new
// primary. The leader's WAL senders stop for 5 s (the replicas fall more
// than the 32 values Postgres WAL-logs ahead of a sequence behind), then
// the leader crashes whole; Patroni promotes a replica, the callback runs,
// the old leader comes back as a replica. Asserted: the advanced fence is
// above every fence the old primary granted (from the history), and no
// fence is issued twice nor a stale write committed after a higher grant
// (duplicate-fence, stale-after-grant). The rules about what the replicas
// never received (lost grants and writes) are measured, not asserted: only
// synchronous replication keeps them.
func TestPatroniAsyncAdvanced(t *testing.T) {
	if err := faults.CanPatroni(); err != nil {
		if os.Getenv(EnvRequirePatroni) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, EnvRequirePatroni)
		}
		t.Skipf("\n*** PATRONI HISTORY SKIPPED: %v ***\n", err)
	}
	// Not parallel: a Patroni cluster (three Postgres, three etcd, three
	// patroni) loads both cores, and the histories beside it then judge
	// their timing checks under that load; it runs before they start.
	margin := int64(patroniMargin)
	if v := os.Getenv("FENCEGATE_PATRONI_MARGIN"); v != "" { // to see the test fail with 0
		margin, _ = strconv.ParseInt(v, 10, 64)
	}
	cb := newAdvanceCallback(t, margin)
	var crashedAt int64
	plan := []patroniFault{laggedCrash(cb, &crashedAt)}
	opts := faults.PatroniOptions{Callback: cb.script + " {port} {bin}"}
	o := runPatroniHistory(t, opts, baseSeed(t), plan, nil, cb.open)
	record("patroni/async+advance", &o.outcome)
	t.Log(describe(&o.outcome))
	by := o.Report.ByCheck()
	t.Logf("violations after an asynchronous Patroni failover with fence advance (margin %d): %v\n%s", margin, by, o.Report.Summary(3))
	var oldMax int64
	for _, op := range o.ops {
		if op.Type == history.Acquire && op.Outcome == history.OK && op.Return != 0 && op.Return < crashedAt {
			oldMax = max(oldMax, op.Granted)
		}
	}
	adv := cb.advanced(t)
	if len(adv) == 0 {
		t.Fatal("the callback never advanced the fences")
	}
	next := adv[len(adv)-1]
	t.Logf("the old primary granted fences up to %d; the callback advanced the next fence to %d", oldMax, next)
	if next <= oldMax {
		t.Errorf("fence advance (margin %d) moved the next fence to %d, not above %d, a fence the old primary granted", margin, next, oldMax)
	}
	// AdvanceFences returns the highest fence the new primary knew of +
	// margin + 1: the old primary must have gone further than the 32
	// values Postgres WAL-logs ahead of a sequence, or the history
	// tested nothing.
	if known := next - margin - 1; oldMax-known <= 32 {
		t.Errorf("the lag was too short to matter: the old primary granted up to %d, the new one knew of %d (want more than 32 apart)", oldMax, known)
	}
	for _, kind := range []string{"duplicate-fence", "stale-after-grant"} {
		if by[kind] > 0 {
			t.Errorf("%d %s violations after fence advance", by[kind], kind)
		}
	}
}

// TestPatroniAsync is TestPatroniAsyncAdvanced without the remedy: a
// measurement, opt-in with FENCEGATE_FAILOVER_ASYNC=1 like
// TestFailoverAsynchronous, that fails on nothing but harness errors.
func TestPatroniAsync(t *testing.T) {
	if os.Getenv(EnvFailoverAsync) != "1" {
		t.Skipf("opt-in: set %s=1 to run it", EnvFailoverAsync)
	}
	if err := faults.CanPatroni(); err != nil {
		t.Skipf("\n*** PATRONI HISTORY SKIPPED: %v ***\n", err)
	}
	// Not parallel: a Patroni cluster (three Postgres, three etcd, three
	// patroni) loads both cores, and the histories beside it then judge
	// their timing checks under that load; it runs before they start.
	var crashedAt int64
	o := runPatroniHistory(t, faults.PatroniOptions{}, baseSeed(t), []patroniFault{laggedCrash(nil, &crashedAt)}, nil, nil)
	record("patroni/async", &o.outcome)
	t.Log(describe(&o.outcome))
	t.Logf("violations after an asynchronous Patroni failover: %v\n%s", o.Report.ByCheck(), o.Report.Summary(3))
}

// laggedCrash is the asynchronous failover: the leader's WAL senders
// stopped for 5 s, then the leader crashed whole (its time is put in
// crashedAt); once another node leads (and, with cb, the callback has
// advanced the fences, and the command line reaches the new primary by the
// multi-host URL), the old leader is started again.
func laggedCrash(cb *advanceCallback, crashedAt *int64) patroniFault {
	return patroniFault{"the leader's replicas 5 s behind, then the leader crashed", func(ctx context.Context, t *testing.T, p *faults.Patroni, l *faults.PatroniNode) {
		before := 0
		if cb != nil {
			before = len(cb.advanced(t))
		}
		pids, err := l.StopWALSenders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wait(5 * time.Second) // the fault model: the lag
		*crashedAt = history.Now()
		if err := l.Crash(ctx, pids); err != nil {
			t.Fatal(err)
		}
		now, err := p.WaitHealthyWithout(ctx, l.Name)
		if err != nil {
			t.Fatal(err)
		}
		if cb != nil {
			if err := cb.wait(t, before+1); err != nil {
				t.Fatal(err)
			}
			cb.open(t, now) // the callback opens the server after it printed the fence
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if out, err := exec.CommandContext(cctx, cb.bin, "--dsn", p.URL("postgres"), "status").CombinedOutput(); err != nil {
				t.Fatalf("fencegate status by the multi-host URL after the failover: %v\n%s", err, out)
			}
		}
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
	}}
}

// advanceCallback is an on_role_change script that runs fencegate fence
// advance when its node becomes the primary and appends what it prints
// (the lowest next fence) to a log.
type advanceCallback struct {
	dir, script, log, bin string
}

// newAdvanceCallback builds the fencegate command and writes the script,
// in a directory the cluster's OS user can read (and its log, write).
func newAdvanceCallback(t *testing.T, margin int64) *advanceCallback {
	t.Helper()
	dir, err := os.MkdirTemp("", "fencegate-callback-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fencegate")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fencegate")
	build.Dir = ".." // the repository's root, in workspace mode
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fencegate: %v\n%s", err, out)
	}
	cb := &advanceCallback{dir: dir, script: filepath.Join(dir, "on_role_change.sh"), log: filepath.Join(dir, "advance.log"), bin: bin}
	for _, f := range []string{cb.log, cb.log + ".err"} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(f, 0o666)
	}
	// Patroni calls it with the action, the new role and the cluster's
	// name; the DSN is the multi-host one, which reaches the new primary.
	script := fmt.Sprintf(`#!/bin/sh
# Patroni runs it as: on_role_change|on_start ROLE CLUSTER (after the
# node's port and binaries' directory, which the test puts first). A replica
# is closed (ALTER SYSTEM SET default_transaction_read_only = on), so that
# clients asking for a read-write session (target_session_attrs=read-write)
# skip it once promoted, until this script has advanced its fences (on
# Patroni's on_role_change, which runs after the promotion, not before) and
# opened it.
psql() { "$BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c "$1" -c 'SELECT pg_reload_conf()' >/dev/null 2>>%[3]s.err; }
PORT=$1 BIN=$2; shift 2
case "$1:$2" in
*:master|*:primary)
	# Patroni runs on_role_change as soon as it asked for the promotion
	# (pg_ctl promote without waiting): wait, boundedly, for its end.
	for _ in $(seq 120); do
		[ "$("$BIN/psql" -X -At -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break
		sleep 0.5
	done
	FENCEGATE_DSN="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable&options=-c%%20default_transaction_read_only%%3Doff" \
		%[1]s fence advance --margin %[2]d >>%[3]s 2>>%[3]s.err || exit 1
	psql 'ALTER SYSTEM SET default_transaction_read_only = off' ;;
*:replica|*:standby_leader)
	psql 'ALTER SYSTEM SET default_transaction_read_only = on' ;;
esac
`, bin, margin, cb.log)
	if err := os.WriteFile(cb.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cb
}

// open waits (a minute at most) until the callback has opened leader: the
// first one, on which Patroni ran it at the bootstrap (on_start) and
// fencegate fence advance migrated the database, or a promoted one.
func (cb *advanceCallback) open(t *testing.T, leader *faults.PatroniNode) {
	t.Helper()
	if err := cb.wait(t, 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	end := time.Now().Add(time.Minute)
	for {
		var ro string
		conn, err := pgx.Connect(ctx, leader.URL("postgres"))
		if err == nil {
			err = conn.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&ro)
			conn.Close(ctx)
		}
		if ro == "off" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the callback never opened the leader %s: %v", leader.Name, err)
		}
		wait(100 * time.Millisecond)
	}
}

// advanced returns the fences the callback printed, in order.
func (cb *advanceCallback) advanced(t *testing.T) []int64 {
	b, err := os.ReadFile(cb.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, l := range strings.Fields(string(b)) {
		if n, err := strconv.ParseInt(l, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// wait waits (a minute at most) until the callback has printed n fences.
func (cb *advanceCallback) wait(t *testing.T, n int) error {
	end := time.Now().Add(time.Minute)
	for len(cb.advanced(t)) < n {
		if time.Now().After(end) {
			e, _ := os.ReadFile(cb.log + ".err")
			return fmt.Errorf("the on_role_change callback did not advance the fences within a minute:\n%s", e)
		}
		wait(100 * time.Millisecond)
	}
	return nil
}
