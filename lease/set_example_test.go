package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// An agent claims a directory and a file at once, under one fence; another
// agent's claim of a file inside that directory is refused, naming the
// claim that blocks it, while a sibling outside it is granted. Writes to a
// file go through CommitFile, which refuses a file the claim does not
// cover.
func ExampleClient_BeginAcquireSet() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()
	coord := lease.NewCoordinator(store, nil)
	g := gate.New(store, &gate.Options{VerifyIssued: true})
	a, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-a", ClockSkew: time.Second})
	b, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-b", ClockSkew: time.Second})

	src, _ := fence.PathResource("src/")
	mod, _ := fence.PathResource("go.mod")
	req, err := a.BeginAcquireSet([]string{src, mod})
	if err != nil {
		log.Fatal(err)
	}
	out, err := coord.Acquire(ctx, req)
	if err != nil || !out.OK {
		log.Fatal(out, err)
	}
	la, _ := a.CompleteAcquire(req, out.Grant)
	fmt.Println("a holds", la.Token().Name(), "under fence", la.Token().Fence)

	for _, rel := range []string{"src/main.go", "docs/README.md"} {
		p, _ := fence.PathResource(rel)
		req, _ := b.BeginAcquireSet([]string{p})
		out, err := coord.Acquire(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		if out.OK {
			fmt.Println("b granted", rel)
		} else {
			fmt.Println("b refused", rel+": held by", out.HeldBy, "on", out.HeldResource)
		}
	}

	write := func(file string) error {
		f, _ := fence.PathResource(file)
		tx, err := store.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := g.CommitFile(ctx, tx, la.Token(), f); err != nil {
			return err
		}
		return tx.Commit() // and write the file while tx holds its floor
	}
	fmt.Println("a writes src/main.go:", write("src/main.go"))
	fmt.Println("a writes docs/README.md:", errors.Is(write("docs/README.md"), gate.ErrNotCovered))

	// Output:
	// a holds {path:go.mod, path:src/} under fence 1
	// b refused src/main.go: held by agent-a on path:src/
	// b granted docs/README.md
	// a writes src/main.go: <nil>
	// a writes docs/README.md: true
}
