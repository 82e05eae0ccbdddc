package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/fence"
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

	write := func(token fence.Token, version string) error {
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

	a := fence.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 1}
	b := fence.Token{Resource: "deploy-slot", Holder: "agent-b", Fence: 2}
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

// A package that checks a fence its own way (gate/pgxgate does, in a
// pipeline) runs the check through a FenceCheck: StartCheck before, the
// driver's statement on Params, and Done with its result, which counts the
// outcome and, for a refusal, rolls back and logs under one
// Options.CleanupTimeout. Here the statement is the driver's own floor
// raise in a transaction, for a fence never issued.
func ExampleFenceCheck() {
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
	g := gate.New(store, &gate.Options{VerifyIssued: true, Logger: slog.New(slog.DiscardHandler)})

	token := fence.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 7} // never granted
	ctx, check := g.StartCheck(ctx, "my_pipeline", token)
	tx, err := store.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	p := check.Params(token.Resource)
	res, err := store.UnwrapExecutor(tx).FloorRaise(ctx, &p)
	err = check.Done(ctx, res, err, func(context.Context) error { return tx.Rollback() })
	stale, ok := errors.AsType[*gate.StaleFenceError](err)
	fmt.Println("refused:", ok, "never issued:", ok && stale.NotIssued, "logged:", ok && stale.Seq > 0)
	// Output: refused: true never issued: true logged: true
}
