package fencegatecli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// The demo's lock and lease term. The term is short so that the story, which
// waits for the coordinator (the database's clock) to expire A's lease,
// runs in a few hundred milliseconds.
const (
	demoLock = "deploy-slot"
	demoTTL  = 100 * time.Millisecond
)

func demoCommand() *command {
	cmd := &command{
		name:     "demo",
		synopsis: "the two-agent story, in a temporary SQLite database",
		usage:    "demo",
		help: `Play the story fencegate exists for, twice, in a temporary SQLite database
that is deleted afterwards (--dsn is ignored): agent A claims a lock, checks
that its lease is valid, starts a write and stalls past its ttl; B claims
the lock and writes; A wakes up and writes.

First with a naive expiry check: both writes land and nothing complains.
Then through the gate: A's write is refused, and the rejection is logged.`,
	}
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error { return playDemo(ctx, c.stdout) }
	return cmd
}

// demoTryIt is what the demo suggests next: command lines that run as
// written on a fresh database, SQLite's or Postgres's (TestDemoTryItRuns).
const demoTryIt = `
Try it with processes, on the SQLite file .fencegate.db here or $FENCEGATE_DSN's database
("go install ./cmd/fencegate" puts fencegate in $(go env GOPATH)/bin; or "go run ./cmd/fencegate"):
   TOKEN=$(fencegate claim --lock deploy-slot --ttl 30s)   # exit 3 if held
   fencegate gate "$TOKEN" -- "CREATE TABLE IF NOT EXISTS deploys (slot TEXT PRIMARY KEY, version TEXT NOT NULL)" \
     "INSERT INTO deploys VALUES ('web', 'v2') ON CONFLICT (slot) DO UPDATE SET version = excluded.version"
   fencegate status                                          # locks, fences, floors, refusals
   fencegate release "$TOKEN"
`

// playDemo plays both rounds of the story to w.
func playDemo(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "fencegate-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(w, "fencegate demo: agents A and B share the lock %s (ttl %s); A stalls mid-write.\n", demoLock, demoTTL)
	for i, gated := range []bool{false, true} {
		fmt.Fprintln(w)
		d, err := newDemo(ctx, w, filepath.Join(dir, fmt.Sprintf("round%d.db", i+1)), gated)
		if err == nil {
			err = d.play(ctx)
			err = errors.Join(err, d.store.Close())
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprint(w, demoTryIt)
	return nil
}

// demo is one round of the story, on its own database.
type demo struct {
	w      io.Writer
	gated  bool
	store  *sqlite.Driver
	coord  *lease.Coordinator
	gate   *gate.Gate[*sql.Tx]
	clockA *clock.Manual // A's clock: it cannot see its own stall
	a, b   *lease.Client
}

func newDemo(ctx context.Context, w io.Writer, path string, gated bool) (*demo, error) {
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	d := &demo{w: w, gated: gated, store: store, clockA: clock.NewManual(0, 0)}
	err = store.Migrate(ctx)
	if err == nil {
		_, err = store.DB().ExecContext(ctx,
			`CREATE TABLE deploys (slot TEXT PRIMARY KEY, version TEXT NOT NULL, deployed_by TEXT NOT NULL)`)
	}
	if err == nil {
		d.a, err = lease.NewClient(&lease.ClientOptions{Holder: "agent-a", Clock: d.clockA})
	}
	if err == nil {
		d.b, err = lease.NewClient(&lease.ClientOptions{Holder: "agent-b"})
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	d.coord = lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: demoTTL})
	d.gate = gate.New(store, &gate.Options{VerifyIssued: true})
	return d, nil
}

func (d *demo) step(who, what, result string, args ...any) {
	fmt.Fprintf(d.w, "   %-2s %-30s %s\n", who, what, fmt.Sprintf(result, args...))
}

func (d *demo) play(ctx context.Context) error {
	if d.gated {
		fmt.Fprintln(d.w, "2. Through the gate: a write commits only in one transaction with its fence")
	} else {
		fmt.Fprintln(d.w, "1. A naive expiry check: A checks its own lease, then writes")
	}

	la, err := d.claim(ctx, d.a)
	if err != nil {
		return err
	}
	d.step("A", "claims "+demoLock, "fence %d", la.Token().Fence)

	// Most of A's term passes on A's clock, then A checks, and decides.
	d.clockA.Advance(la.Remaining() - 5*time.Millisecond)
	if la.Expired() {
		return errors.New("demo: A's lease expired before its check")
	}
	d.step("A", "checks its lease", "valid, %s left: starts writing v1", ops.Dur(la.Remaining()))

	// A stalls. Its own clock stands still (it cannot observe its stall);
	// the database's runs on, and the coordinator expires A's lease.
	d.step("A", "stalls past its ttl", "(a GC pause, a slow model call...)")
	if err := d.waitExpired(ctx); err != nil {
		return err
	}

	lb, err := d.claim(ctx, d.b)
	if err != nil {
		return err
	}
	if d.gated {
		d.step("B", "claims "+demoLock, "fence %d; the gate's floor is now %d", lb.Token().Fence, lb.Token().Fence)
		err = d.write(ctx, lb.Token(), "v2")
		d.step("B", "writes v2 through the gate", "%s", outcome(err))
	} else {
		d.step("B", "claims "+demoLock, "fence %d (A's lease has expired)", lb.Token().Fence)
		err = d.write(ctx, lb.Token(), "v2")
		d.step("B", "writes v2", "%s", outcome(err))
	}
	if err != nil {
		return err
	}

	// A wakes up and finishes the write it decided on before the stall.
	err = d.write(ctx, la.Token(), "v1")
	d.step("A", "wakes up, writes v1", "%s", outcome(err))
	if stale, ok := errors.AsType[*gate.StaleFenceError](err); ok {
		logged, err := d.gate.Rejections(ctx, gate.RejectionQuery{Resource: demoLock, Newest: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(logged) != 1 || logged[0].Seq != stale.Seq {
			return fmt.Errorf("demo: the refusal #%d is not in the rejection log", stale.Seq)
		}
		r := logged[0]
		d.step("", "the rejection log says", "#%d: fence %d from %s < floor %d from %s", r.Seq, r.Fence, r.Holder, r.Floor, r.FloorHolder)
	} else if err != nil {
		return err
	}

	var version, by string
	err = d.store.DB().QueryRowContext(ctx, `SELECT version, deployed_by FROM deploys WHERE slot = ?`, demoLock).Scan(&version, &by)
	if err != nil {
		return err
	}
	if d.gated {
		fmt.Fprintf(d.w, "   => %s runs %s from %s; A's late write never committed.\n", demoLock, version, by)
	} else {
		fmt.Fprintf(d.w, "   => %s runs %s from %s: B's deploy was silently overwritten.\n", demoLock, version, by)
	}
	return nil
}

// claim acquires the demo's lock for one agent.
func (d *demo) claim(ctx context.Context, c *lease.Client) (*lease.Lease, error) {
	req, err := c.BeginAcquire(demoLock)
	if err != nil {
		return nil, err
	}
	out, err := d.coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, fmt.Errorf("demo: %s is held by %s", demoLock, out.HeldBy)
	}
	return c.CompleteAcquire(req, out.Grant)
}

// waitExpired waits, in real time, until the coordinator has expired the
// lease on the demo's lock.
func (d *demo) waitExpired(ctx context.Context) error {
	deadline := time.Now().Add(10 * demoTTL)
	for {
		st, err := d.coord.Status(ctx, demoLock)
		if err != nil || !st.Held {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("demo: the lease did not expire in time")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(st.Remaining + time.Millisecond):
		}
	}
}

// write deploys version to the slot: straight to the table in the naive
// round, through the gate (in the same transaction as the fence) in the
// gated one.
func (d *demo) write(ctx context.Context, token fence.Token, version string) error {
	const upsert = `INSERT INTO deploys (slot, version, deployed_by) VALUES (?1, ?2, ?3)
ON CONFLICT (slot) DO UPDATE SET version = excluded.version, deployed_by = excluded.deployed_by`
	if !d.gated {
		_, err := d.store.DB().ExecContext(ctx, upsert, demoLock, version, token.Holder)
		return err
	}
	return d.gate.Do(ctx, token, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, upsert, demoLock, version, token.Holder)
		return err
	})
}

func outcome(err error) string {
	if errors.Is(err, gate.ErrStaleFence) {
		return "REFUSED, rolled back"
	}
	if err != nil {
		return "failed: " + err.Error()
	}
	return "committed"
}
