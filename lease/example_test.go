package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// openExample opens a fresh, migrated SQLite database in a temporary
// directory, and returns a function that removes it.
func openExample(ctx context.Context) (*sqlite.Driver, func()) {
	dir, err := os.MkdirTemp("", "fencegate-example")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "fencegate.db"))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	return store, func() { store.Close(); os.RemoveAll(dir) }
}

// Two agents want the same deploy slot. The coordinator grants it to one,
// tells the other who holds it, and after a hand-over the gate refuses the
// first agent's late write, however sure that agent is of its lease.
func Example() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 30 * time.Second})
	g := gate.New(store, &gate.Options{VerifyIssued: true})
	alice, _ := lease.NewClient(&lease.ClientOptions{Holder: "alice", ClockSkew: 100 * time.Millisecond})
	bob, _ := lease.NewClient(&lease.ClientOptions{Holder: "bob", ClockSkew: 100 * time.Millisecond})

	// Alice acquires: begin (the send instant), the coordinator, complete.
	req, _ := alice.BeginAcquire("deploy-slot")
	out, err := coord.Acquire(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	aliceLease, _ := alice.CompleteAcquire(req, out.Grant)
	fmt.Println("alice holds fence", aliceLease.Token().Fence)

	// Bob is told who holds it.
	bobReq, _ := bob.BeginAcquire("deploy-slot")
	out, _ = coord.Acquire(ctx, bobReq)
	fmt.Printf("bob denied: held by %s (fence %d)\n", out.HeldBy, out.Fence)

	// Alice writes: the fence is admitted inside her own transaction.
	tx, _ := store.Begin(ctx)
	if err := g.Commit(ctx, tx, aliceLease.Token()); err != nil {
		log.Fatal(err)
	}
	// ... alice's writes in tx ...
	_ = tx.Commit()
	fmt.Println("alice's write committed")

	// Alice's lease ends (released here; expiry works the same) and bob
	// gets a higher fence. The grant raises the floor at once.
	token, _ := alice.Release(aliceLease)
	_, _ = coord.Release(ctx, token)
	bobReq, _ = bob.BeginAcquire("deploy-slot")
	out, _ = coord.Acquire(ctx, bobReq)
	bobLease, _ := bob.CompleteAcquire(bobReq, out.Grant)
	fmt.Println("bob holds fence", bobLease.Token().Fence)

	// Alice, stalled, writes late with her old token: refused.
	tx, _ = store.Begin(ctx)
	err = g.Commit(ctx, tx, token)
	var stale *gate.StaleFenceError
	if errors.As(err, &stale) {
		fmt.Printf("alice refused: fence %d is below %s's floor %d\n", stale.Fence, stale.FloorHolder, stale.Floor)
	}

	// Output:
	// alice holds fence 1
	// bob denied: held by alice (fence 1)
	// alice's write committed
	// bob holds fence 2
	// alice refused: fence 1 is below bob's floor 2
}

// Hold acquires, renews in the background, and releases when the work is
// done; the work's context is cancelled if the lease is lost.
func ExampleHold() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, nil)
	g := gate.New(store, &gate.Options{VerifyIssued: true})
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7", ClockSkew: time.Second})

	err := lease.Hold(ctx, agent, coord, "orders/42", func(ctx context.Context, l *lease.Lease) error {
		// Every write goes through the gate with the lease's token.
		return g.Do(ctx, l.Token(), func(ctx context.Context, tx *sql.Tx) error {
			fmt.Println("writing under fence", l.Token().Fence)
			return nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := coord.Status(ctx, "orders/42")
	fmt.Println("held after Hold:", st.Held)

	// Output:
	// writing under fence 1
	// held after Hold: false
}

// RenewBatch renews many leases in one round trip, each answered for
// itself: a lease released behind the holder's back comes back Expired.
func ExampleCoordinator_RenewBatch() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, nil)
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7"})
	var leases []*lease.Lease
	for _, resource := range []string{"orders/1", "orders/2", "orders/3"} {
		req, _ := agent.BeginAcquire(resource)
		out, err := coord.Acquire(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		l, _ := agent.CompleteAcquire(req, out.Grant)
		leases = append(leases, l)
	}
	_, _ = coord.Release(ctx, leases[1].Token()) // behind the holder's back

	var reqs []*lease.RenewRequest
	for _, l := range leases {
		req, _ := agent.BeginRenewal(l)
		reqs = append(reqs, req)
	}
	outs, err := coord.RenewBatch(ctx, reqs)
	if err != nil {
		log.Fatal(err) // the whole batch failed: retry with new requests
	}
	for i, out := range outs {
		if !out.OK {
			fmt.Println(reqs[i].Resource, "expired: acquire again")
			continue
		}
		l, _ := agent.CompleteRenewal(reqs[i], out.Grant)
		fmt.Println(reqs[i].Resource, "renewed, fence", l.Token().Fence)
	}

	// Output:
	// orders/1 renewed, fence 1
	// orders/2 expired: acquire again
	// orders/3 renewed, fence 3
}

// ReleaseStrict says why a release released nothing.
func ExampleCoordinator_ReleaseStrict() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, nil)
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7"})
	req, _ := agent.BeginAcquire("orders/42")
	out, _ := coord.Acquire(ctx, req)
	l, _ := agent.CompleteAcquire(req, out.Grant)
	token, _ := agent.Release(l)

	fmt.Println("first release:", coord.ReleaseStrict(ctx, token))
	err := coord.ReleaseStrict(ctx, token)
	fmt.Println("again, not released:", errors.Is(err, lease.ErrNotReleased))
	var nr *lease.ReleaseError
	if errors.As(err, &nr) {
		fmt.Println("because released already:", nr.Reason == lease.ReleaseAlreadyReleased)
		fmt.Printf("reason: %v; latest generation: %s %d\n", nr.Reason, nr.HeldBy, nr.CurrentFence)
	}

	// Output:
	// first release: <nil>
	// again, not released: true
	// because released already: true
	// reason: the lease was released already; latest generation: agent-7 1
}

// Keep keeps many leases alive with no goroutine of their own: the
// Client's one keeper renews them all, and each handle's Context ends if
// its own lease is lost.
func ExampleKeep() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, nil)
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7"})
	var kept []*lease.Kept
	for _, resource := range []string{"shard/1", "shard/2", "shard/3"} {
		req, _ := agent.BeginAcquire(resource)
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			log.Fatal(err)
		}
		l, _ := agent.CompleteAcquire(req, out.Grant)
		k, err := lease.Keep(ctx, agent, coord, l)
		if err != nil {
			log.Fatal(err)
		}
		kept = append(kept, k)
	}

	for _, k := range kept {
		// Work under k.Context(), every write through gate.Commit with
		// k.Lease().Token(); then:
		if err := k.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	st, _ := coord.Status(ctx, "shard/2")
	fmt.Println("held after Release:", st.Held)

	// Output:
	// held after Release: false
}

// AcquireWait waits its turn while the resource is held: waiters are
// granted in the order they queued, and a release hands the resource to
// the first of them at once.
func ExampleCoordinator_AcquireWait() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
	alice, _ := lease.NewClient(&lease.ClientOptions{Holder: "alice"})
	bob, _ := lease.NewClient(&lease.ClientOptions{Holder: "bob"})

	first, err := coord.AcquireWait(ctx, alice, "deploy-slot") // free: granted at once
	if err != nil {
		log.Fatal(err)
	}
	granted := make(chan *lease.Lease)
	go func() {
		// Bob queues behind alice; a bounded wait, as any wait should be.
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := coord.AcquireWait(ctx, bob, "deploy-slot")
		if err != nil {
			log.Fatal(err)
		}
		granted <- l
	}()

	token, _ := alice.Release(first) // alice is done: the next in line gets it
	if _, err := coord.Release(ctx, token); err != nil {
		log.Fatal(err)
	}
	second := <-granted
	fmt.Println(first.Token().Holder, "had fence", first.Token().Fence)
	fmt.Println(second.Token().Holder, "has fence", second.Token().Fence)
	token, _ = bob.Release(second)
	if _, err := coord.Release(ctx, token); err != nil {
		log.Fatal(err)
	}

	// Output:
	// alice had fence 1
	// bob has fence 2
}

// A coordinator reports to the OpenTelemetry providers it is given, the
// global ones when nil; a program passes its SDK's (docs/OBSERVABILITY.md
// shows Prometheus). Resource names stay out of the metrics unless
// MetricsByResource lets them in; spans always carry them.
func ExampleNewCoordinator_openTelemetry() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{
		MeterProvider:     otel.GetMeterProvider(),  // the SDK's MeterProvider in a real program
		TracerProvider:    otel.GetTracerProvider(), // likewise
		MetricsByResource: false,                    // a few fixed resources could afford true
	})
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7"})
	err := lease.Hold(ctx, agent, coord, "orders/42", func(ctx context.Context, l *lease.Lease) error {
		// The acquisition, the work's gated writes and the release are spans
		// of the trace in Hold's ctx; the release links to the acquisition.
		fmt.Println("holding fence", l.Token().Fence)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: holding fence 1
}

// Prune, run from time to time (a cron job, or fencegate prune), keeps the
// tables bounded: request rows older than the longest term, expired
// waiter rows and, when asked, all but the newest rejections. A fresh
// request row stays: a retry of its request may still need it.
func ExampleCoordinator_Prune() {
	ctx := context.Background()
	store, cleanup := openExample(ctx)
	defer cleanup()

	coord := lease.NewCoordinator(store, nil)
	agent, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-7"})
	req, _ := agent.BeginAcquire("orders/42")
	out, _ := coord.Acquire(ctx, req)
	l, _ := agent.CompleteAcquire(req, out.Grant)
	token, _ := agent.Release(l)
	_, _ = coord.Release(ctx, token)

	res, err := coord.Prune(ctx, lease.PruneOptions{KeepRejections: 10_000})
	fmt.Println(res.Requests, res.Waiters, res.Rejections, err)
	_, err = coord.Prune(ctx, lease.PruneOptions{RequestAge: time.Hour}) // below MaxTTL (24h)
	fmt.Println(errors.Is(err, fence.ErrInvalidInput))

	// Output:
	// 0 0 0 <nil>
	// true
}
