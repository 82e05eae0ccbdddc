package bench_test

import (
	"context"
	"testing"

	"github.com/fencegate/fencegate/bench"
	"github.com/fencegate/fencegate/internal/mysqltest"
)

// The MariaDB column's workloads run once without error on the test server
// (skipped without FENCEGATE_TEST_MYSQL_URL, failing under
// FENCEGATE_REQUIRE_MYSQL=true), and each one wrote the row.
func TestWorkloadsMySQL(t *testing.T) {
	ctx := context.Background()
	m, err := bench.NewMySQL(ctx, mysqltest.ServerURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ops := map[string]bench.Op{"plain tx": m.PlainTx, "fenced tx": m.FencedTx, "GET_LOCK": m.GetLock}
	for name, op := range ops {
		if err := op(ctx, 2); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// GET_LOCK released its lock.
	var free int
	if err := m.D.DB().QueryRowContext(ctx, `SELECT IS_FREE_LOCK(?)`, m.LockName(bench.Token(2).Resource)).Scan(&free); err != nil || free != 1 {
		t.Errorf("IS_FREE_LOCK = %d, %v; want 1", free, err)
	}
	if err := m.RoundTrip(ctx, 0); err != nil {
		t.Errorf("round trip: %v", err)
	}
	var n int64
	if err := m.D.DB().QueryRowContext(ctx, `SELECT n FROM bench_item WHERE id = 2`).Scan(&n); err != nil || n != int64(len(ops)) {
		t.Fatalf("row 2 = %d, %v; want %d updates", n, err, len(ops))
	}
}
