package integration

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// advanceMargin is the margin the remedied asynchronous failover moves the
// fences by: far more than the grants a history makes in the standby's lag
// (about 20 a second, for under a second).
const advanceMargin = 1000

// advanceFences is the runbook's step between promoting an asynchronous
// standby and letting clients in: lease.Coordinator.AdvanceFences (what
// `fencegate fence advance` runs) on the promoted database. The workload's
// outside fence source is moved too: it stands in for etcd or Consul, which
// do not fail over with the database, so it must not go back with it.
func advanceFences(ctx context.Context, dsn string) (int64, error) {
	d, err := pgsql.Open(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	next, err := lease.NewCoordinator(d, nil).AdvanceFences(ctx, advanceMargin)
	if err != nil {
		return 0, err
	}
	if _, err := d.DB().ExecContext(ctx, `SELECT setval('fg_external_fence', nextval('fg_external_fence') + $1)`, advanceMargin); err != nil {
		return 0, fmt.Errorf("advance the outside fence source: %w", err)
	}
	return next, nil
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
	t.Logf("violations after an asynchronous failover and fence advance to %d: %v\n%s", o.AdvancedTo, by, o.Report.Summary(3))
	if o.AdvancedTo == 0 {
		t.Fatal("the fences were never advanced")
	}
	for _, kind := range []string{"duplicate-fence", "stale-after-grant"} {
		if by[kind] > 0 {
			t.Errorf("%d %s violations after fence advance", by[kind], kind)
		}
	}
}
