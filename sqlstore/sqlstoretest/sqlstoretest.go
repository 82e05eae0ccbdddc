// Package sqlstoretest is the conformance suite every fencegate driver
// passes: Exercise states the sqlstore.Driver, Store and Executor contract
// on a real database, one area per file (store, errors, migrations,
// floors, leases, the lease rules, waiters, confinement), as river's
// riverdrivertest does. A new driver runs it from its own test
// (fencegate's drivers run it from one list, internal/dbtest.Drivers):
//
//	func TestConformance(t *testing.T) {
//		sqlstoretest.Exercise(t, func(t testing.TB) sqlstore.Driver[*sql.Tx] {
//			return openFreshMigratedDatabase(t)
//		})
//	}
//
// The lease rules (every AcquireStatus, renewal and release) are one table,
// Rules, which Exercise runs on the driver's own executor, in a
// transaction, and over the shared step-by-step implementation (Stepwise),
// so that Postgres's SQL and the steps SQLite and MySQL run are held to the
// same answers. The gate's and the lease coordinator's rules, written once
// over any driver, run on top of it in those packages' tests.
package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Exercise runs the contract on drivers from newDriver, which returns a
// driver on a fresh, migrated database each call (closed in t.Cleanup).
func Exercise[TTx any](t *testing.T, newDriver func(t testing.TB) sqlstore.Driver[TTx]) {
	t.Helper()
	run := func(name string, fn func(t *testing.T, d sqlstore.Driver[TTx])) {
		t.Run(name, func(t *testing.T) { fn(t, newDriver(t)) })
	}
	exerciseStore(run)
	exerciseErrors(run)
	exerciseMigrations(run)
	exerciseFloors(run)
	exerciseLeases(run)
	t.Run("Rules", func(t *testing.T) {
		d := newDriver(t)
		Rules(t, d)
	})
	exerciseWaiters(run)
	exerciseSemaphores(run)
	exercisePrune(run)
	exerciseConfinement(run)
}

// runner runs one named check on a fresh driver.
type runner[TTx any] func(name string, fn func(t *testing.T, d sqlstore.Driver[TTx]))

var ctx = context.Background()

func floorOf(t *testing.T, ex sqlstore.Executor, resource string) sqlstore.Floor {
	t.Helper()
	f, err := ex.FloorGet(ctx, resource)
	if err != nil {
		t.Fatalf("FloorGet(%s): %v", resource, err)
	}
	return f
}

func raise(t *testing.T, ex sqlstore.Executor, p sqlstore.FloorRaiseParams) sqlstore.FloorRaiseResult {
	t.Helper()
	r, err := ex.FloorRaise(ctx, &p)
	if err != nil {
		t.Fatalf("FloorRaise(%+v): %v", p, err)
	}
	return r
}

func grant(t *testing.T, ex sqlstore.Executor, p sqlstore.LeaseGrantParams) sqlstore.LeaseRow {
	t.Helper()
	row, inserted, err := ex.LeaseGrant(ctx, &p)
	if err != nil || !inserted {
		t.Fatalf("LeaseGrant(%+v) = %v, %v", p, inserted, err)
	}
	return row
}

func release(t *testing.T, ex sqlstore.Executor, resource, holder string, fence int64) bool {
	t.Helper()
	res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: resource, Holder: holder, Fence: fence})
	if err != nil {
		t.Fatalf("LeaseRelease(%s, %s, %d): %v", resource, holder, fence, err)
	}
	return res.Released
}

// minute is the term of the checks' leases: long enough never to end
// during a check.
const minute = time.Minute
