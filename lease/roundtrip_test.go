package lease

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// statementCounter is a pgx tracer that counts the statements sent.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// pgxStore returns a migrated pgx driver on a fresh schema, its pool
// configured by configure.
func pgxStore(t *testing.T, configure func(*pgxpool.Config)) *pgxv5.Driver {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := pgxv5.New(pool)
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store
}

// On Postgres an acquisition, granted or denied, a renewal and a release
// are one statement each, so one round trip each: the acquisition runs in
// fencegate_acquire, not as BEGIN, lock timeout, locking
// read, request check, nextval, lease write, floor raise and COMMIT.
func TestPostgresLeaseCallsAreOneStatementEach(t *testing.T) {
	ctx := context.Background()
	counter := &statementCounter{}
	store := pgxStore(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = counter })
	coord := NewCoordinator(store, nil)
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{})

	statements := func(what string, call func()) {
		t.Helper()
		before := counter.n.Load()
		call()
		if n := counter.n.Load() - before; n != 1 {
			t.Errorf("%s took %d statements, want 1", what, n)
		}
	}
	var l *Lease
	statements("a first grant", func() { l = acquire(t, a, coord, "job") })
	statements("a denial", func() {
		req, _ := b.BeginAcquire("job")
		if out, err := coord.Acquire(ctx, req); err != nil || out.OK {
			t.Fatalf("Acquire by b = %+v, %v; want a denial", out, err)
		}
	})
	statements("a renewal", func() {
		req, err := a.BeginRenewal(l)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := coord.Renew(ctx, req); err != nil || !out.OK {
			t.Fatalf("Renew = %+v, %v", out, err)
		}
	})
	statements("a release", func() {
		if ok, err := coord.Release(ctx, l.Token()); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	})
	statements("a grant of a released lease", func() { acquire(t, b, coord, "job") })
}

// On its own, a release on Postgres commits without waiting for the WAL
// flush (a lost release only keeps the resource locked until expiry); the
// setting stays in the release's transaction, and a release inside a
// caller's transaction leaves the caller's durability alone. A trigger
// records the setting each release ran under.
func TestPostgresReleaseCommitsAsynchronouslyOnItsOwn(t *testing.T) {
	ctx := context.Background()
	// Every statement on one session, to see what the session kept.
	store := pgxStore(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	pool := store.Pool()
	for _, q := range []string{
		`CREATE TABLE release_probe (n serial, setting text)`,
		`CREATE FUNCTION release_probe() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN INSERT INTO release_probe (setting) VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$`,
		`CREATE TRIGGER release_probe AFTER UPDATE OF released ON fencegate_lease
		 FOR EACH ROW WHEN (NEW.released) EXECUTE FUNCTION release_probe()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	coord := NewCoordinator(store, nil)
	a := newClient(t, "agent-a", ClientOptions{})

	l := acquire(t, a, coord, "job")
	if ok, err := coord.Release(ctx, l.Token()); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	l = acquire(t, a, coord, "job")
	err := store.InTx(ctx, func(ex sqlstore.Executor) error {
		res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: "job", Holder: "agent-a", Fence: l.Token().Fence})
		if err == nil && !res.Released {
			t.Error("LeaseRelease in a transaction released nothing")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var settings []string
	rows, _ := pool.Query(ctx, `SELECT setting FROM release_probe ORDER BY n`)
	settings, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"off", "on"}; !slices.Equal(settings, want) {
		t.Errorf("releases ran under synchronous_commit %v, want %v (on its own, then in a transaction)", settings, want)
	}
	var now string
	if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&now); err != nil || now != "on" {
		t.Errorf("after the releases the session's synchronous_commit is %q (%v), want on", now, err)
	}
}

// Where the coordinator runs in the holder's process, a request's send
// instant is read once the connection is in hand: time queued for a busy
// pool is not taken off the lease. Here the holder's clock moves a second
// while the pool hands the connection over; the lease is dated after it.
func TestSendInstantIsReadOnceTheConnectionIsInHand(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(0, 0)
	var armed atomic.Bool
	store := pgxStore(t, func(cfg *pgxpool.Config) {
		cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
			if armed.CompareAndSwap(true, false) {
				clk.Advance(time.Second) // the wait for the connection
			}
			return true, nil
		}
	})
	coord := NewCoordinator(store, nil)
	c, err := NewClient(&ClientOptions{Holder: "agent-a", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, c, coord, "renewed")
	for _, op := range []string{"acquire", "renew", "batch"} {
		began := clk.Now()
		armed.Store(true)
		var sent clock.Instant
		switch op {
		case "acquire":
			req, _ := c.BeginAcquire("job")
			if out, err := coord.Acquire(ctx, req); err != nil || !out.OK {
				t.Fatalf("Acquire = %+v, %v", out, err)
			}
			sent = req.SentAt()
		case "renew":
			req, _ := c.BeginRenewal(l)
			if out, err := coord.Renew(ctx, req); err != nil || !out.OK {
				t.Fatalf("Renew = %+v, %v", out, err)
			}
			sent = req.SentAt()
		case "batch":
			req, _ := c.BeginRenewal(l)
			if outs, err := coord.RenewBatch(ctx, []*RenewRequest{req}); err != nil || !outs[0].OK {
				t.Fatalf("RenewBatch = %+v, %v", outs, err)
			}
			sent = req.SentAt()
		}
		if armed.Load() {
			t.Fatalf("%s took no connection from the pool", op)
		}
		if sent.Sub(began) < time.Second {
			t.Errorf("%s: SentAt %v, before the second the request waited for its connection (from %v)", op, sent, began)
		}
	}
}
