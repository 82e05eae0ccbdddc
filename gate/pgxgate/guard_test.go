package pgxgate_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// sendAs is a pgx.QueryRewriter that sends its own SQL instead of the
// queued one: it gets a statement past CommitBatch's check, as far as the
// server's guard, in every exec mode.
type sendAs string

func (s sendAs) RewriteQuery(context.Context, *pgx.Conn, string, []any) (string, []any, error) {
	return string(s), nil, nil
}

// guardCase is a batch whose middle statement tries to end the transaction:
// the caller's write before it, the statement, then (the shape of issue 22's
// batch) a pause and a write after it, and a probe of whether anything after
// it ran.
func guardBatch(queue func(b *pgx.Batch)) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO items (id, fence) VALUES (1, 5)`)
	queue(b)
	b.Queue(`SELECT pg_sleep(0.01)`)
	b.Queue(`INSERT INTO items (id, fence) VALUES (2, 5)`)
	return b
}

// assertNothingCommitted checks that a refused batch under fence 5 left no
// row and no floor raise (the floor stays at 4), and that the pool still
// works.
func assertNothingCommitted(t *testing.T, d *pgxv5.Driver, g *gate.Gate[pgx.Tx], what string) {
	t.Helper()
	if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 0 {
		t.Errorf("%s: %d rows of the refused batch committed", what, n)
		_, _ = d.Pool().Exec(context.Background(), `DELETE FROM items`)
	}
	if f, err := g.Floor(context.Background(), "r"); err != nil || f.Floor != 4 {
		t.Errorf("%s: floor = %+v, %v; the refused batch raised it", what, f, err)
		_, _ = d.Pool().Exec(context.Background(), `UPDATE fencegate_floor SET floor = 4, holder = 'a'`)
	}
	if n := pgCount(t, d, `SELECT count(*) FROM fencegate_batch_guard`); n != 0 {
		t.Errorf("%s: %d guard rows committed", what, n)
	}
	idle(t, d)
}

// Issue 22 item 8: a batch that ends its own transaction was accepted, and a
// write after its COMMIT committed outside the fence. Each way of ending the
// transaction is refused, in every exec mode, and nothing of the batch
// commits: statements the check reads are refused before anything is sent,
// and the guard refuses those it cannot read.
func TestCommitBatchRefusesTransactionControl(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		var logs syncBuffer
		d, g := pipelineHarness(t, h, &gate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Pool().Exec(ctx, `
CREATE PROCEDURE commits() LANGUAGE plpgsql AS $$ BEGIN COMMIT; END $$;
CREATE PROCEDURE restarts() LANGUAGE plpgsql AS $$ BEGIN ROLLBACK; INSERT INTO items VALUES (3, 5); COMMIT; END $$;`); err != nil {
			t.Fatal(err)
		}
		simple := d.Pool().Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol
		tok := fence.Token{Resource: "r", Holder: "b", Fence: 5}
		for _, c := range []struct {
			name    string
			queue   func(b *pgx.Batch)
			control bool // the error matches ErrTransactionControl
		}{
			{"COMMIT", func(b *pgx.Batch) { b.Queue(`COMMIT`) }, true},
			{"commit and chain", func(b *pgx.Batch) { b.Queue(`commit and chain`) }, true},
			{"END", func(b *pgx.Batch) { b.Queue(`/* done */ END`) }, true},
			{"ROLLBACK", func(b *pgx.Batch) { b.Queue(`ROLLBACK`) }, true},
			{"ABORT", func(b *pgx.Batch) { b.Queue(`abort`) }, true},
			{"PREPARE TRANSACTION", func(b *pgx.Batch) { b.Queue(`PREPARE TRANSACTION 'x'`) }, true},
			{"BEGIN", func(b *pgx.Batch) { b.Queue(`BEGIN`) }, true},
			{"in a string of several", func(b *pgx.Batch) { b.Queue(`SELECT 1; COMMIT; INSERT INTO items VALUES (3, 5)`) }, true},
			// Past the check, to the guard.
			{"guard: COMMIT", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`COMMIT`)) }, true},
			{"guard: COMMIT AND CHAIN", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`COMMIT AND CHAIN`)) }, true},
			{"guard: END", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`END`)) }, true},
			{"guard: ROLLBACK", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`ROLLBACK`)) }, true},
			{"guard: ABORT", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`ABORT`)) }, true},
			{"guard: PREPARE TRANSACTION", func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`PREPARE TRANSACTION 'x'`)) }, true},
			// Several statements in one string run only in the simple
			// protocol; the extended one refuses the string.
			{"guard: in a string of several", func(b *pgx.Batch) {
				b.Queue(`SELECT 1`, sendAs(`SELECT 1; COMMIT; INSERT INTO items VALUES (3, 5)`))
			}, simple},
			{"CALL of a procedure that commits", func(b *pgx.Batch) { b.Queue(`CALL commits()`) }, true},
			{"CALL of a procedure that rolls back and commits", func(b *pgx.Batch) { b.Queue(`CALL restarts()`) }, true},
			{"DO block that commits", func(b *pgx.Batch) {
				b.Queue(`DO $$ BEGIN ROLLBACK; INSERT INTO items VALUES (3, 5); COMMIT; END $$`)
			}, true},
		} {
			logged := strings.Count(logs.String(), "would end its transaction")
			err := pgxgate.CommitBatch(ctx, g, d.Pool(), tok, guardBatch(c.queue))
			if c.control && strings.Count(logs.String(), "would end its transaction") != logged+1 {
				t.Errorf("%s: the refusal was not logged", c.name)
			}
			if err == nil {
				t.Errorf("%s: the batch was accepted", c.name)
			} else if c.control != errors.Is(err, sqlstore.ErrTransactionControl) {
				t.Errorf("%s: got %v; ErrTransactionControl: want %v", c.name, err, c.control)
			}
			if errors.Is(err, gate.ErrStaleFence) || sqlstore.IsOutcomeUnknown(err) || sqlstore.IsRetryable(err) {
				t.Errorf("%s: %v: the answer must be a definite refusal", c.name, err)
			}
			assertNothingCommitted(t, d, g, c.name)
		}
		// The same batch without the statement commits, under the fence.
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), tok, guardBatch(func(*pgx.Batch) {})); err != nil {
			t.Fatal(err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 2 {
			t.Fatalf("%d rows, want 2", n)
		}
	})
}

// In the caller's transaction the guard refuses a COMMIT of the batch too,
// and rolls back the caller's writes with it; several batches in one
// transaction each keep and release the guard, and the caller's COMMIT
// commits them all.
func TestCommitBatchGuardInCallerTx(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
			t.Fatal(err)
		}
		tok := fence.Token{Resource: "r", Holder: "b", Fence: 5}
		for _, stmt := range []string{`COMMIT`, `ROLLBACK`} {
			tx, err := d.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (10, 5)`); err != nil {
				t.Fatal(err)
			}
			if err := pgxgate.CommitBatch(ctx, g, tx, tok, writeBatch(11, 5)); err != nil {
				t.Fatal(err)
			}
			b := guardBatch(func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(stmt)) })
			if err := pgxgate.CommitBatch(ctx, g, tx, tok, b); !errors.Is(err, sqlstore.ErrTransactionControl) {
				t.Errorf("%s: got %v, want ErrTransactionControl", stmt, err)
			}
			if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("%s: the caller's commit: %v, want ErrTxClosed", stmt, err)
			}
			assertNothingCommitted(t, d, g, stmt)
		}

		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		for id := 1; id <= 3; id++ {
			if err := pgxgate.CommitBatch(ctx, g, tx, tok, writeBatch(id, 5)); err != nil {
				t.Fatalf("batch %d: %v", id, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM fencegate_batch_guard`); n != 0 {
			t.Fatalf("%d guard rows committed", n)
		}
	})
}

// wrappedTx embeds a transaction: gate.IsNestedTx sees through it.
type wrappedTx struct{ pgx.Tx }

// hiddenTx keeps a transaction behind methods of its own, where no type
// check can see it: the server tells CommitBatch it is a savepoint.
type hiddenTx struct{ tx pgx.Tx }

func (h hiddenTx) Begin(ctx context.Context) (pgx.Tx, error) { return h.tx.Begin(ctx) }
func (h hiddenTx) Commit(ctx context.Context) error          { return h.tx.Commit(ctx) }
func (h hiddenTx) Rollback(ctx context.Context) error        { return h.tx.Rollback(ctx) }
func (h hiddenTx) CopyFrom(ctx context.Context, t pgx.Identifier, c []string, s pgx.CopyFromSource) (int64, error) {
	return h.tx.CopyFrom(ctx, t, c, s)
}
func (h hiddenTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return h.tx.SendBatch(ctx, b)
}
func (h hiddenTx) LargeObjects() pgx.LargeObjects { return h.tx.LargeObjects() }
func (h hiddenTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return h.tx.Prepare(ctx, name, sql)
}
func (h hiddenTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return h.tx.Exec(ctx, sql, args...)
}
func (h hiddenTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return h.tx.Query(ctx, sql, args...)
}
func (h hiddenTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return h.tx.QueryRow(ctx, sql, args...)
}
func (h hiddenTx) Conn() *pgx.Conn { return h.tx.Conn() }

// Issue 22 item 9: a savepoint in a type of the caller's passed the type
// check. Embedded, the type check finds it; hidden, the server does. Either
// way the batch is refused with ErrNestedTx, its stale token is neither
// admitted nor logged, and the outer transaction is left to the caller.
func TestCommitBatchRefusesWrappedSavepoint(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
			t.Fatal(err)
		}
		outer, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer outer.Rollback(ctx)
		for _, wrap := range []func(pgx.Tx) pgx.Tx{
			func(tx pgx.Tx) pgx.Tx { return wrappedTx{tx} },
			func(tx pgx.Tx) pgx.Tx { return &wrappedTx{tx} },
			func(tx pgx.Tx) pgx.Tx { return hiddenTx{tx} },
		} {
			for _, tok := range []fence.Token{{Resource: "r", Holder: "old", Fence: 3}, {Resource: "r", Holder: "b", Fence: 5}} {
				sp, err := outer.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tx := wrap(sp)
				if err := pgxgate.CommitBatch(ctx, g, tx, tok, writeBatch(1, tok.Fence)); !errors.Is(err, gate.ErrNestedTx) {
					t.Fatalf("%T, fence %d: got %v, want ErrNestedTx", tx, tok.Fence, err)
				}
				if err := sp.Commit(ctx); err == nil {
					t.Fatalf("%T: the savepoint committed after CommitBatch refused it", tx)
				}
			}
		}
		if _, err := outer.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatalf("the outer transaction was disturbed: %v", err)
		}
		if err := outer.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM fencegate_rejection`); n != 0 {
			t.Fatalf("a refused savepoint logged %d rejections", n)
		}
		assertNothingCommitted(t, d, g, "savepoint")
	})
}

// BeginFenced's transaction is the caller's and carries no guard of its
// own (see its doc); a batch pipelined in it through CommitBatch does: a
// COMMIT in the batch rolls back the whole transaction, the writes before
// the batch included, and the caller is told.
func TestBeginFencedBatchCannotCommitEarly(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
			t.Fatal(err)
		}
		tok := fence.Token{Resource: "r", Holder: "a", Fence: 4}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), tok, pgx.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (10, 4)`); err != nil {
			t.Fatal(err)
		}
		b := guardBatch(func(b *pgx.Batch) { b.Queue(`SELECT 1`, sendAs(`COMMIT`)) })
		if err := pgxgate.CommitBatch(ctx, g, tx, tok, b); !errors.Is(err, sqlstore.ErrTransactionControl) {
			t.Fatalf("got %v, want ErrTransactionControl", err)
		}
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Fatalf("commit after the refusal: %v, want ErrTxClosed", err)
		}
		assertNothingCommitted(t, d, g, "BeginFenced")
	})
}

// Issue 39: the write guard costs a row written and deleted and a check at
// COMMIT, so CommitBatch arms it only for a batch the Go-side scanner
// cannot vouch for. A batch of plain statements runs without it; one
// behind a QueryRewriter, or queued by a prepared statement's name, runs
// under it, and a COMMIT so hidden still commits nothing.
func TestCommitBatchGuardsWhatTheScannerCannotRead(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 4}); err != nil {
			t.Fatal(err)
		}
		tok := fence.Token{Resource: "r", Holder: "b", Fence: 5}
		const armed = `SELECT coalesce(current_setting('fencegate.batch_guard', true), '') <> ''`
		// The simple protocol sends the batch as one string the server
		// splits by its own lexer: no text is vouched for there.
		simple := d.Pool().Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol
		for _, c := range []struct {
			name  string
			args  []any
			guard bool
		}{
			{"plain statements", nil, simple},
			{"behind a QueryRewriter", []any{sendAs(armed)}, true},
		} {
			var got bool
			b := guardBatch(func(*pgx.Batch) {})
			b.Queue(armed, c.args...).QueryRow(func(row pgx.Row) error { return row.Scan(&got) })
			if err := pgxgate.CommitBatch(ctx, g, d.Pool(), tok, b); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got != c.guard {
				t.Errorf("%s: guard armed %v, want %v", c.name, got, c.guard)
			}
			if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 2 {
				t.Errorf("%s: %d rows committed, want 2", c.name, n)
			}
			if _, err := d.Pool().Exec(ctx, `DELETE FROM items`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Pool().Exec(ctx, `UPDATE fencegate_floor SET floor = 4, holder = 'a'`); err != nil {
			t.Fatal(err)
		}

		// A prepared statement's name is not SQL text the scanner can read:
		// pgx runs the statement prepared under it.
		conn, err := d.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Conn().Prepare(ctx, "ends", `COMMIT`); err != nil {
			t.Fatal(err)
		}
		err = pgxgate.CommitBatch(ctx, g, conn, tok, guardBatch(func(b *pgx.Batch) { b.Queue(`ends`) }))
		if err == nil {
			t.Fatal("a batch that commits through a prepared statement's name was accepted")
		}
		if !simple && !errors.Is(err, sqlstore.ErrTransactionControl) { // the simple protocol sends the name as SQL: a syntax error
			t.Errorf("got %v, want ErrTransactionControl", err)
		}
		conn.Release()
		assertNothingCommitted(t, d, g, "a prepared statement's name")
	})
}
