package bench_test

import (
	"context"
	"testing"

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
		"plain tx": pg.PgPlainTx, "autocommit": pg.PgPlainAutocommit, "fenced tx": pg.PgFencedTx,
		"fenced batch": pg.PgFencedBatch, "prototype": pg.PgPrototypeTx, "advisory xact": pg.PgAdvisoryXactTx,
		"advisory xact batch": pg.PgAdvisoryXactBatch, "advisory session": pg.PgAdvisorySession,
		"sql plain": pg.SQLPlainTx, "sql fenced": pg.SQLFencedTx,
	} {
		if err := op(ctx, 2); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	var n int64
	if err := pg.Pool.QueryRow(ctx, `SELECT n FROM bench_item WHERE id = 2`).Scan(&n); err != nil || n != 10 {
		t.Fatalf("row 2 = %d, %v; want 10 updates", n, err)
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
