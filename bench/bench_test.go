package bench_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"cirello.io/pglock"

	"github.com/fencegate/fencegate/bench"
	"github.com/fencegate/fencegate/internal/dbtest"
)

func newPG(tb testing.TB) *bench.PG {
	tb.Helper()
	pg, err := bench.NewPG(context.Background(), dbtest.PostgresURL(tb), 8)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pg.Close(context.Background()) })
	return pg
}

func newSQLite(tb testing.TB) *bench.SQLite {
	tb.Helper()
	s, err := bench.NewSQLite(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Every workload runs once without error, so `go test ./...` keeps the
// benchmark code honest without running the benchmarks.
func TestWorkloads(t *testing.T) {
	ctx := context.Background()
	lite := newSQLite(t)
	for name, op := range map[string]bench.Op{"sqlite plain": lite.PlainTx, "sqlite fenced": lite.FencedTx} {
		if err := op(ctx, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	pg := newPG(t)
	for name, op := range map[string]bench.Op{
		"plain tx": pg.PgPlainTx, "autocommit": pg.PgPlainAutocommit, "fenced tx": pg.PgFencedTx, "begin fenced tx": pg.PgBeginFencedTx, "floor CTE tx": pg.PgFloorCTETx,
		"fenced batch": pg.PgFencedBatch, "prototype": pg.PgPrototypeTx, "advisory xact": pg.PgAdvisoryXactTx,
		"advisory xact batch": pg.PgAdvisoryXactBatch, "advisory session": pg.PgAdvisorySession,
		"sql plain": pg.SQLPlainTx, "sql fenced": pg.SQLFencedTx,
		"pglock": pg.PglockWrite(false), "row lock bound": pg.PgRowLockTx,
	} {
		if err := op(ctx, 2); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// With the heartbeat on, pglock's Close may race the heartbeat it
	// cancels and report the lock already released (see Contention); the
	// write itself has committed by then.
	if err := pg.PglockWrite(true)(ctx, 2); err != nil && !errors.Is(err, pglock.ErrLockAlreadyReleased) {
		t.Errorf("pglock heartbeat: %v", err)
	}
	var n int64
	if err := pg.Pool.QueryRow(ctx, `SELECT n FROM bench_item WHERE id = 2`).Scan(&n); err != nil || n != 15 {
		t.Fatalf("row 2 = %d, %v; want 15 updates", n, err)
	}
	// Twice: the second grant needs the first release.
	for range 2 {
		if err := pg.BareLeaseAcquireRelease(ctx, 1); err != nil {
			t.Errorf("bare SQL lease: %v", err)
		}
	}
	if err := pg.PglockAcquireRelease(false)(ctx, 1); err != nil {
		t.Errorf("pglock acquire+release: %v", err)
	}
	if err := pg.PglockAcquireRelease(true)(ctx, 1); err != nil && !errors.Is(err, pglock.ErrLockAlreadyReleased) {
		t.Errorf("pglock heartbeat acquire+release: %v", err)
	}
}

// The fenced and unfenced transactions and the batch run in every exec mode
// through a DelayProxy, on the schema of the pool they are attached to.
func TestWorkloadsPerExecModeThroughProxy(t *testing.T) {
	ctx := context.Background()
	pg := newPG(t)
	u, err := url.Parse(pg.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := bench.StartDelayProxy(u.Host, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u.Host = p.Addr()
	for _, mode := range bench.ExecModes {
		via, err := pg.Attach(ctx, bench.Net{Name: "proxy", URL: u.String()}, 2, mode)
		if err != nil {
			t.Fatal(err)
		}
		for name, op := range map[string]bench.Op{"plain tx": via.PgPlainTx, "fenced tx": via.PgFencedTx, "begin fenced tx": via.PgBeginFencedTx, "fenced batch": via.PgFencedBatch, "row lock bound": via.PgRowLockTx} {
			if err := op(ctx, 3); err != nil {
				t.Errorf("%s, %s: %v", mode, name, err)
			}
		}
		via.Close(ctx)
	}
	var n int64
	if err := pg.Pool.QueryRow(ctx, `SELECT n FROM bench_item WHERE id = 3`).Scan(&n); err != nil || n != int64(5*len(bench.ExecModes)) {
		t.Fatalf("row 3 = %d, %v; want %d updates", n, err, 5*len(bench.ExecModes))
	}
}

func benchOp(b *testing.B, op bench.Op) {
	ctx := context.Background()
	for b.Loop() {
		if err := op(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPostgres(b *testing.B) {
	pg := newPG(b)
	b.Run("pgx/unfenced-tx", func(b *testing.B) { benchOp(b, pg.PgPlainTx) })
	b.Run("pgx/fenced-tx", func(b *testing.B) { benchOp(b, pg.PgFencedTx) })
	b.Run("pgx/begin-fenced-tx", func(b *testing.B) { benchOp(b, pg.PgBeginFencedTx) })
	b.Run("pgx/fenced-batch", func(b *testing.B) { benchOp(b, pg.PgFencedBatch) })
	b.Run("pgx/unfenced-autocommit", func(b *testing.B) { benchOp(b, pg.PgPlainAutocommit) })
	b.Run("pgx/advisory-xact-tx", func(b *testing.B) { benchOp(b, pg.PgAdvisoryXactTx) })
	b.Run("sql/unfenced-tx", func(b *testing.B) { benchOp(b, pg.SQLPlainTx) })
	b.Run("sql/fenced-tx", func(b *testing.B) { benchOp(b, pg.SQLFencedTx) })
}

func BenchmarkSQLite(b *testing.B) {
	lite := newSQLite(b)
	b.Run("unfenced-tx", func(b *testing.B) { benchOp(b, lite.PlainTx) })
	b.Run("fenced-tx", func(b *testing.B) { benchOp(b, lite.FencedTx) })
}
