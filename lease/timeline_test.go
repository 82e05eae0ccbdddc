package lease

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/gate"
)

// The seed timeline of DESIGN.md, on a real database:
//
//	t=0     A acquires "deploy-slot", ttl 1000ms
//	t=950   A checks its lease: still valid, starts a slow write (a model call)
//	t=1000  the coordinator expires A and grants the slot to B
//	t=1400  A's write lands on top of B's
//
// First with a naive lease (an expiresAt the holder checks): both checks pass
// and both writes land without an error. Then with this package and the
// gate: A's check still passes, because a check cannot see the future, but
// A's write is refused and logged.
func TestSeedTimeline(t *testing.T) {
	forEachDriver(t, testSeedTimeline[*sql.Tx], testSeedTimeline[pgx.Tx])
}

// naiveLock is the broken design: a lock whose validity is a timestamp the
// holder compares with its clock before writing.
type naiveLock struct {
	holder    string
	expiresAt clock.Instant
}

func (n *naiveLock) acquire(holder string, now clock.Instant, ttl time.Duration) bool {
	if n.holder != "" && now.Before(n.expiresAt) {
		return false
	}
	n.holder, n.expiresAt = holder, now.Add(ttl)
	return true
}

func (n *naiveLock) stillMine(holder string, now clock.Instant) bool {
	return n.holder == holder && now.Before(n.expiresAt)
}

func testSeedTimeline[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE deploy_slot (id INTEGER PRIMARY KEY, holder TEXT NOT NULL, version TEXT NOT NULL)`,
		`CREATE TABLE deploy_log (holder TEXT NOT NULL, version TEXT NOT NULL)`,
	} {
		if err := h.DBExec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// deploy writes one deploy in tx: the slot's state and a log line.
	deploy := func(tx TTx, holder, version string) error {
		// Replace the slot's row in SQL every dialect shares.
		if err := h.Exec(ctx, tx, `DELETE FROM deploy_slot WHERE id = 1`); err != nil {
			return err
		}
		if err := h.Exec(ctx, tx, `INSERT INTO deploy_slot (id, holder, version) VALUES (1, $1, $2)`, holder, version); err != nil {
			return err
		}
		return h.Exec(ctx, tx, `INSERT INTO deploy_log (holder, version) VALUES ($1, $2)`, holder, version)
	}
	state := func() (holder, version string, deploys int) {
		t.Helper()
		if err := h.QueryRow(ctx, `SELECT holder, version FROM deploy_slot WHERE id = 1`).Scan(&holder, &version); err != nil {
			t.Fatal(err)
		}
		if err := h.QueryRow(ctx, `SELECT count(*) FROM deploy_log`).Scan(&deploys); err != nil {
			t.Fatal(err)
		}
		return holder, version, deploys
	}
	reset := func() {
		for _, q := range []string{`DELETE FROM deploy_slot`, `DELETE FROM deploy_log`} {
			if err := h.DBExec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every read of the clock takes 1ms, so checking takes time, as it
	// does in production.
	const step = time.Millisecond

	t.Run("naive expiresAt lease: both writes land", func(t *testing.T) {
		reset()
		clk := clock.NewManual(0, step)
		lock := &naiveLock{}
		if !lock.acquire("agent-a", clk.Now(), time.Second) { // t=0
			t.Fatal("A could not acquire a free lock")
		}
		clk.AdvanceTo(at(950 * time.Millisecond))
		if !lock.stillMine("agent-a", clk.Now()) { // t=950: A's check passes
			t.Fatal("A's check failed at t=950")
		}
		// A starts its slow model call. Meanwhile:
		clk.AdvanceTo(at(1000 * time.Millisecond))
		if !lock.acquire("agent-b", clk.Now(), time.Second) { // t=1000
			t.Fatal("B could not acquire the expired lock")
		}
		if !lock.stillMine("agent-b", clk.Now()) {
			t.Fatal("B's check failed")
		}
		txB, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := deploy(txB, "agent-b", "v2"); err != nil {
			t.Fatal(err)
		}
		if err := h.Driver.Commit(ctx, txB); err != nil {
			t.Fatal(err)
		}
		clk.AdvanceTo(at(1400 * time.Millisecond)) // A's model call returns
		txA, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := deploy(txA, "agent-a", "v1"); err != nil {
			t.Fatal(err)
		}
		if err := h.Driver.Commit(ctx, txA); err != nil {
			t.Fatal(err)
		}
		// No error anywhere, and A's stale deploy sits on top of B's.
		holder, version, deploys := state()
		if holder != "agent-a" || version != "v1" || deploys != 2 {
			t.Fatalf("slot %s/%s after %d deploys; the naive lease was expected to let A overwrite B", holder, version, deploys)
		}
		t.Logf("naive lease: both writes landed without an error; the slot holds A's stale %s", version)
	})

	t.Run("fenced: A's stale write is refused and logged", func(t *testing.T) {
		reset()
		// The coordinator's clock is the database's, which a test cannot
		// drive; the term is scaled down to 200ms so expiry comes quickly.
		const ttl = 200 * time.Millisecond
		coord := NewCoordinator(h.Driver, nil)
		g := gate.New(h.Driver, &gate.Options{VerifyIssued: true})
		clk := clock.NewManual(0, step)
		a, err := NewClient(&ClientOptions{Holder: "agent-a", Clock: clk, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})

		la := acquire(t, a, coord, "deploy-slot") // t=0
		clk.AdvanceTo(la.Deadline().Add(-ttl / 20))
		if la.Expired() { // t=950 (scaled): A's advisory check passes
			t.Fatal("A's check failed before its deadline")
		}
		// A starts its slow model call. Meanwhile the coordinator expires A
		// and grants the slot to B, raising the floor with the grant.
		waitUntilFree(t, coord, "deploy-slot")
		lb := acquire(t, b, coord, "deploy-slot")
		if lb.Token().Fence <= la.Token().Fence {
			t.Fatalf("B's fence %d is not above A's %d", lb.Token().Fence, la.Token().Fence)
		}

		// A's write lands (t=1400), here even before B has written: the
		// gate refuses it inside A's own transaction.
		clk.Advance(ttl * 2 / 5)
		txA, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stale := mustStale(t, g.Commit(ctx, txA, la.Token()), la.Token())
		if stale.Floor != lb.Token().Fence || stale.FloorHolder != "agent-b" {
			t.Errorf("refusal %+v, want floor %d from agent-b", stale, lb.Token().Fence)
		}
		// Had A ignored the error, its writes could not commit: the gate
		// rolled its transaction back.
		if err := deploy(txA, "agent-a", "v1"); err == nil {
			if err := h.Driver.Commit(ctx, txA); err == nil {
				t.Fatal("A's writes committed after the gate refused its fence")
			}
		}

		// B deploys through the gate.
		err = g.Do(ctx, lb.Token(), func(ctx context.Context, tx TTx) error { return deploy(tx, "agent-b", "v2") })
		if err != nil {
			t.Fatalf("B's deploy: %v", err)
		}
		holder, version, deploys := state()
		if holder != "agent-b" || version != "v2" || deploys != 1 {
			t.Errorf("slot %s/%s after %d deploys, want only B's v2", holder, version, deploys)
		}

		// The refusal is in the log, with both holders and both fences:
		// the evidence that A and B overlapped.
		log, err := g.Rejections(ctx, gate.RejectionQuery{Resource: "deploy-slot"})
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != 1 || log[0].Holder != "agent-a" || log[0].Fence != la.Token().Fence ||
			log[0].FloorHolder != "agent-b" || log[0].Floor != lb.Token().Fence || log[0].Seq != stale.Seq {
			t.Errorf("rejection log %+v", log)
		}
		if !errors.Is(stale, gate.ErrStaleFence) {
			t.Error("the refusal does not match gate.ErrStaleFence")
		}
		t.Logf("fenced: %v", stale)
	})
}
