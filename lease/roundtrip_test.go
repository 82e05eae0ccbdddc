package lease

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// statementCounter is a pgx tracer that counts the statements sent.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// On Postgres an acquisition, granted or denied, a renewal and a release
// are one statement each, so one round trip each: the acquisition runs in
// fencegate_acquire (migration 00005), not as BEGIN, lock timeout, locking
// read, request check, nextval, lease write, floor raise and COMMIT.
func TestPostgresLeaseCallsAreOneStatementEach(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := pgxv5.New(pool)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
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
