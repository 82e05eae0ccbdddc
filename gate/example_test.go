package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// A write commits only together with its fence. Agent A held the slot with
// fence 1, stalled, and B took over with fence 2; A's late write is refused
// inside A's own transaction and the refusal is logged.
func ExampleGate_Commit() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fencegate-example")
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, filepath.Join(dir, "app.db")) // SQLite, no server
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := store.DB().Exec(`CREATE TABLE deploys (version TEXT, fence INTEGER)`); err != nil {
		log.Fatal(err)
	}
	g := gate.New(store, nil)

	write := func(token gate.Token, version string) error {
		tx, err := store.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := g.Commit(ctx, tx, token); err != nil {
			return err // tx is already rolled back
		}
		if _, err := tx.Exec(`INSERT INTO deploys VALUES (?, ?)`, version, token.Fence); err != nil {
			return err
		}
		return tx.Commit()
	}

	a := gate.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 1}
	b := gate.Token{Resource: "deploy-slot", Holder: "agent-b", Fence: 2}
	fmt.Println("B writes:", write(b, "v2"))

	err = write(a, "v1") // A wakes up from its stall
	var stale *gate.StaleFenceError
	if errors.As(err, &stale) {
		fmt.Printf("A refused: fence %d < floor %d held by %s (rejection #%d)\n",
			stale.Fence, stale.Floor, stale.FloorHolder, stale.Seq)
	}

	var version string
	_ = store.DB().QueryRow(`SELECT group_concat(version) FROM deploys`).Scan(&version)
	fmt.Println("deploys:", version)
	// Output:
	// B writes: <nil>
	// A refused: fence 1 < floor 2 held by agent-b (rejection #1)
	// deploys: v2
}

// The cleanup after a failed pipelined write (pgxgate.CommitBatch's
// rollback, then the refusal's log) runs even though the caller's ctx is
// done, and all of it under one Options.CleanupTimeout: Refuse, given the
// cleanup context, keeps its bound, as a nested Cleanup does.
func ExampleGate_Cleanup() {
	dir, _ := os.MkdirTemp("", "fencegate-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	g := gate.New(store, nil)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller gave up
	cctx, done := g.Cleanup(ctx)
	defer done()
	fmt.Println("cleanup runs:", cctx.Err() == nil)
	bound, _ := cctx.Deadline()
	inner, innerDone := g.Cleanup(cctx)
	defer innerDone()
	same, _ := inner.Deadline()
	fmt.Println("one bound:", same.Equal(bound))
	// Output:
	// cleanup runs: true
	// one bound: true
}

// A package that checks a fence its own way (pgxgate.CommitBatch does, in a
// pipeline) reports the check to the gate's instruments and spans as
// Commit does: Observe before, end with the result after. Here the check is
// WouldAdmit's read, standing in for the pipelined statement.
func ExampleGate_Observe() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fencegate-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	// nil providers: the global ones, which record nothing until the
	// program installs an OpenTelemetry SDK (docs/OBSERVABILITY.md).
	g := gate.New(store, &gate.Options{MeterProvider: nil, TracerProvider: nil})

	token := gate.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 1}
	ctx, end := g.Observe(ctx, "commit_batch", token)
	ok, err := g.WouldAdmit(ctx, token) // the driver's own check
	if err == nil && !ok {
		err = &gate.StaleFenceError{Resource: token.Resource, Holder: token.Holder, Fence: token.Fence}
	}
	end(err) // counted as admitted, refused or error
	fmt.Println("admitted:", err == nil)
	// Output: admitted: true
}
