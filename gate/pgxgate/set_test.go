package pgxgate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// CommitBatch and BeginFenced take set and path tokens: every member
// admitted, or the whole refused, logged per stale member, nothing run.
func TestSetTokensPipelined(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		dir, err := fence.PathResource("src/")
		if err != nil {
			t.Fatal(err)
		}
		set5, err := fence.NewSetToken([]string{"x", dir}, "a", 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), set5, writeBatch(1, 5)); err != nil {
			t.Fatalf("CommitBatch(set): %v", err)
		}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), set5, pgx.TxOptions{})
		if err != nil {
			t.Fatalf("BeginFenced(set): %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range set5.Members() {
			if f, err := g.Floor(ctx, r); err != nil || f.Floor != 5 {
				t.Fatalf("%s: %+v, %v", r, f, err)
			}
		}
		if err := g.Admit(ctx, fence.Token{Resource: dir, Holder: "b", Fence: 7}); err != nil {
			t.Fatal(err)
		}
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), set5, writeBatch(2, 5)); !errors.Is(err, gate.ErrStaleFence) {
			t.Fatalf("CommitBatch of a stale set: %v", err)
		}
		if tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), set5, pgx.TxOptions{}); !errors.Is(err, gate.ErrStaleFence) || tx != nil {
			endTx(tx)
			t.Fatalf("BeginFenced of a stale set: %v", err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items WHERE id = 2`); n != 0 {
			t.Fatal("a refused set's batch committed")
		}
		// Transaction control is refused for a set as for one resource.
		b := &pgx.Batch{}
		b.Queue(`COMMIT`)
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: dir, Holder: "b", Fence: 7}, b); !errors.Is(err, sqlstore.ErrTransactionControl) {
			t.Fatalf("a COMMIT in a path token's batch: %v", err)
		}
		idle(t, d)
	})
}
