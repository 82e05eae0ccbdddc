package sqlstoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseStore states the driver's transactions and the Store's
// capabilities.
func exerciseStore[TTx any](run runner[TTx]) {
	// The capabilities a database may lack are said by methods: each
	// answers, and a listener the store lacks says ErrNotSupported at
	// once, never calling ready.
	run("Store/Capabilities", func(t *testing.T, d sqlstore.Driver[TTx]) {
		if n := d.MaxConns(); n < 0 {
			t.Errorf("MaxConns = %d", n)
		}
		if _, err := d.DurabilityWarnings(ctx); err != nil {
			t.Errorf("DurabilityWarnings: %v", err)
		}
		if d.SupportsListener() {
			return // listening is the lease coordinator's tests' (lease/wait_test.go)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := d.ListenLeases(cctx, func() { t.Error("ListenLeases called ready without a listener") }, func(sqlstore.LeaseChange) {})
		if !errors.Is(err, sqlstore.ErrNotSupported) {
			t.Errorf("ListenLeases without a listener = %v, want ErrNotSupported", err)
		}
		err = d.WatchLeases(cctx, sqlstore.Watch{Resource: "r"}, func() { t.Error("WatchLeases called ready without a listener") }, func(sqlstore.LeaseChange) {})
		if !errors.Is(err, sqlstore.ErrNotSupported) {
			t.Errorf("WatchLeases without a listener = %v, want ErrNotSupported", err)
		}
	})

	run("Driver/BeginCommitRollback", func(t *testing.T, d sqlstore.Driver[TTx]) {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raise(t, d.UnwrapExecutor(tx), sqlstore.FloorRaiseParams{Resource: "rolled", Holder: "h", Fence: 1})
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatalf("second Rollback: %v, want nil", err)
		}
		if _, err := d.Executor().FloorGet(ctx, "rolled"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("rolled-back raise: FloorGet = %v, want ErrNotFound", err)
		}
		tx, err = d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raise(t, d.UnwrapExecutor(tx), sqlstore.FloorRaiseParams{Resource: "committed", Holder: "h", Fence: 2})
		if err := d.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := d.Rollback(ctx, tx); err != nil {
			t.Fatalf("Rollback after Commit: %v, want nil", err)
		}
		if f := floorOf(t, d.Executor(), "committed"); f.Floor != 2 {
			t.Fatalf("committed floor %d", f.Floor)
		}
	})
	run("Store/InTx", func(t *testing.T, d sqlstore.Driver[TTx]) {
		boom := errors.New("boom")
		err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			raise(t, ex, sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want fn's error", err)
		}
		if _, err := d.Executor().FloorGet(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("InTx did not roll back: %v", err)
		}
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if f := floorOf(t, d.Executor(), "r"); f.Floor != 1 {
			t.Fatalf("floor %d after InTx", f.Floor)
		}
	})
}
