package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// advanceMargin is the margin the remedied asynchronous failover moves the
// fences by: far more than the grants a history makes in the standby's lag
// (about 20 a second, for under a second).
const advanceMargin = 1000

// seqLogAhead is how many values ahead Postgres WAL-logs a sequence
// (SEQ_LOG_VALS): a promoted standby's sequence is up to that far past the
// last value it received.
const seqLogAhead = 32

// lagGrants is how many grants an asynchronous failover history makes
// while its standby is cut off: more than seqLogAhead, so that the lost
// fences are above the promoted sequence unless the remedy moves it.
const lagGrants = 48

// advanceFences runs the runbook's remedy (workload.AdvanceFences, what
// `fencegate fence advance` runs) on the promoted standby at dsn, through
// the history's worker binary, so that a mutant of the remedy is what runs.
func advanceFences(ctx context.Context, worker, dsn string) (int64, error) {
	cmd := exec.CommandContext(ctx, worker, "-advance", strconv.Itoa(advanceMargin))
	cmd.Env = append(os.Environ(), "FGWORKER_DSN="+dsn)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("fence advance: %v\n%s", err, stderr.String())
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// TestFailoverAsynchronousAdvanced is TestFailoverAsynchronous with the
// remedy: the fences are advanced between the promotion and the proxy's
// move. What it can promise, and asserts: no fence is issued twice and no
// write under a fence commits after a higher grant (duplicate-fence,
// stale-after-grant). Grants, renewals, refusals and writes the standby
// never received stay lost, and so do the rules about them (lost-grant,
// lost-write, realtime-stale-write, overlapping-holders...): only
// synchronous replication keeps them. Opt-in with FENCEGATE_FAILOVER_ASYNC=1,
// like the measurement.
func TestFailoverAsynchronousAdvanced(t *testing.T) {
	if os.Getenv(EnvFailoverAsync) != "1" {
		t.Skipf("opt-in: set %s=1 to run it", EnvFailoverAsync)
	}
	t.Parallel()
	o := runFailoverWith(t, true, true, 0)
	by := o.Report.ByCheck()
	t.Logf("violations after an asynchronous failover (%d grants lost) and fence advance to %d: %v\n%s", o.LostGrants, o.AdvancedTo, by, o.Report.Summary(3))
	if o.AdvancedTo == 0 {
		t.Fatal("the fences were never advanced")
	}
	// Postgres logs a sequence 32 values ahead: with fewer grants lost,
	// the promoted sequence is past them anyway, and the test could not
	// tell the remedy from its absence.
	if o.LostGrants <= seqLogAhead {
		t.Errorf("only %d grants lost with the old primary, want more than %d", o.LostGrants, seqLogAhead)
	}
	for _, kind := range []string{"fence-not-advanced", "duplicate-fence", "stale-after-grant"} {
		if by[kind] > 0 {
			t.Errorf("%d %s violations after fence advance", by[kind], kind)
		}
	}
}
