package guard_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fencegate/fencegate/guard"
)

// BenchmarkPostgresGuardRow is the trigger's cost per row, in the server:
// N inserts in one fenced transaction, on a table guarded per
// row, by a fixed resource, and not at all.
func BenchmarkPostgresGuardRow(b *testing.B) {
	for _, table := range []string{"unguarded", "fixed", "byrow"} {
		b.Run(table, func(b *testing.B) {
			h := newPG(b)
			ctx := context.Background()
			if _, err := h.pool.Exec(ctx, `
CREATE TABLE unguarded (id int PRIMARY KEY, tenant text NOT NULL, v int NOT NULL DEFAULT 0);
CREATE TABLE fixed (LIKE unguarded INCLUDING ALL);
CREATE TABLE byrow (LIKE unguarded INCLUDING ALL);
INSERT INTO unguarded VALUES (1, 'a'); INSERT INTO fixed VALUES (1, 'a'); INSERT INTO byrow VALUES (1, 'a');`); err != nil {
				b.Fatal(err)
			}
			if _, err := h.admin.Install(ctx, guard.Spec{Table: "fixed", Resource: "tenant:a"}); err != nil {
				b.Fatal(err)
			}
			if _, err := h.admin.Install(ctx, guard.Spec{Table: "byrow", ResourceExpr: "'tenant:' || tenant"}); err != nil {
				b.Fatal(err)
			}
			tx, err := h.pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if err := h.g.Commit(ctx, tx, tenantA); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if _, err := tx.Exec(ctx, `DO $$ BEGIN FOR i IN 1..`+strconv.Itoa(b.N)+` LOOP INSERT INTO `+table+` VALUES (i + 1, 'a'); END LOOP; END $$`); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/row")
		})
	}
}
