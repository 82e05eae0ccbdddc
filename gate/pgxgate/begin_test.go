package pgxgate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// idle fails the test when the pool still lends a connection: every path
// out of BeginFenced without a transaction must give its connection back.
func idle(t *testing.T, d *pgxv5.Driver) {
	t.Helper()
	if n := d.Pool().Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still acquired", n)
	}
}

// endTx rolls back a transaction BeginFenced should not have returned, so
// that a failing test does not keep a connection the pool's Close waits for.
func endTx(tx pgx.Tx) {
	if tx != nil {
		_ = tx.Rollback(context.Background())
	}
}

func TestBeginFencedAdmitsAndCommits(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		write := func(tok fence.Token, id int) error {
			tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), tok, pgx.TxOptions{})
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `INSERT INTO items (id, fence) VALUES ($1, $2)`, id, tok.Fence); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		a := fence.Token{Resource: "r", Holder: "a", Fence: 5}
		for id := 1; id <= 2; id++ { // a new floor, then the equal fence
			if err := write(a, id); err != nil {
				t.Fatalf("write %d: %v", id, err)
			}
		}
		if err := write(fence.Token{Resource: "r", Holder: "b", Fence: 9}, 3); err != nil {
			t.Fatalf("higher fence: %v", err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 3 {
			t.Fatalf("%d items, want 3", n)
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 9 || f.Holder != "b" {
			t.Fatalf("floor = %+v, %v; want 9 by b", f, err)
		}
		idle(t, d)
	})
}

func TestBeginFencedRefusesStaleFence(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		var logs syncBuffer
		d, g := pipelineHarness(t, h, &gate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 10}); err != nil {
			t.Fatal(err)
		}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "old", Fence: 3}, pgx.TxOptions{})
		endTx(tx)
		var se *gate.StaleFenceError
		if !errors.As(err, &se) || errors.Is(err, gate.ErrFenceNotIssued) || tx != nil {
			t.Fatalf("got %v, %v; want no tx and a *StaleFenceError", tx, err)
		}
		if se.Floor != 10 || se.FloorHolder != "new" || se.Fence != 3 || se.Seq <= 0 {
			t.Fatalf("refusal = %+v", se)
		}
		rejs, err := g.Rejections(ctx, gate.RejectionQuery{Resource: "r"})
		if err != nil || len(rejs) != 1 || rejs[0].Seq != se.Seq {
			t.Fatalf("rejection log = %+v, %v", rejs, err)
		}
		if !strings.Contains(logs.String(), "refused fence") {
			t.Fatalf("refusal not logged: %q", logs.String())
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 10 {
			t.Fatalf("floor = %+v, %v; want 10", f, err)
		}
		idle(t, d)
		// The connection came back usable.
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "new", Fence: 10}, writeBatch(1, 10)); err != nil {
			t.Fatalf("after a refusal: %v", err)
		}
	})
}

// Rolling the transaction back undoes its floor raise with its writes.
func TestBeginFencedRollbackUndoesRaise(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 2}); err != nil {
			t.Fatal(err)
		}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "b", Fence: 7}, pgx.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (1, 7)`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if f, err := g.Floor(ctx, "r"); err != nil || f.Floor != 2 || f.Holder != "a" {
			t.Fatalf("floor = %+v, %v; want 2 by a", f, err)
		}
		if n := pgCount(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Fatalf("%d items, want 0", n)
		}
		idle(t, d)
	})
}

// The floor row is held from BEGIN to the end of the transaction, on both
// paths (equal fence: row lock only; higher fence: the raise): a higher
// fence cannot commit in between.
func TestBeginFencedHoldsFloor(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 5}); err != nil {
			t.Fatal(err)
		}
		for i, tok := range []fence.Token{{Resource: "r", Holder: "a", Fence: 5}, {Resource: "r", Holder: "b", Fence: 6}} {
			tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), tok, pgx.TxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			higher := fence.Token{Resource: "r", Holder: "c", Fence: int64(100 + i)}
			raise := func() error {
				return pgx.BeginFunc(ctx, d.Pool(), func(tx2 pgx.Tx) error {
					if _, err := tx2.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
						return err
					}
					return g.Commit(ctx, tx2, higher)
				})
			}
			if err := raise(); !sqlstore.IsRetryable(err) {
				_ = tx.Rollback(ctx)
				t.Fatalf("%v: a higher fence got past a fenced transaction in flight: %v", tok, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := raise(); err != nil {
				t.Fatalf("raise after the transaction ended: %v", err)
			}
			if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "a", Fence: 5}); !errors.Is(err, gate.ErrStaleFence) {
				t.Fatalf("old fence after the raise: %v", err)
			}
			if _, err := d.Pool().Exec(ctx, `UPDATE fencegate_floor SET floor = 5, holder = 'a' WHERE resource = 'r'`); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestBeginFencedVerifyIssued(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, &gate.Options{VerifyIssued: true})
		if err := d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r", Holder: "a", Fence: 3, RequestID: "q", TTL: time.Minute})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "a", Fence: 1000}, pgx.TxOptions{})
		endTx(tx)
		if !errors.Is(err, gate.ErrFenceNotIssued) || tx != nil {
			t.Fatalf("forged fence: got %v, want ErrFenceNotIssued", err)
		}
		if _, err := g.Floor(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Fatalf("the forged fence made a floor: %v", err)
		}
		for range 2 { // the first raises the floor, the second keeps it
			tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), fence.Token{Resource: "r", Holder: "a", Fence: 3}, pgx.TxOptions{})
			if err != nil {
				t.Fatalf("issued fence: %v", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		idle(t, d)
	})
}

// Every failure that is not a refusal also leaves no transaction, no floor
// raise and no connection behind.
func TestBeginFencedFailsClosed(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		tok := fence.Token{Resource: "r", Holder: "a", Fence: 4}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		cases := []struct {
			name string
			ctx  context.Context
			tok  fence.Token
			opts pgx.TxOptions
		}{
			{"cancelled", cancelled, tok, pgx.TxOptions{}},
			{"bad begin", ctx, tok, pgx.TxOptions{BeginQuery: "BEGIN garbage"}},
			{"invalid token", ctx, fence.Token{Resource: "r", Holder: "a"}, pgx.TxOptions{}},
		}
		for _, c := range cases {
			tx, err := pgxgate.BeginFenced(c.ctx, g, d.Pool(), c.tok, c.opts)
			endTx(tx)
			if err == nil || tx != nil || errors.Is(err, gate.ErrStaleFence) {
				t.Fatalf("%s: got %v, %v; want an error and no tx", c.name, tx, err)
			}
			if _, err := g.Floor(ctx, "r"); !errors.Is(err, sqlstore.ErrNotFound) {
				t.Fatalf("%s: a floor was left behind: %v", c.name, err)
			}
			idle(t, d)
		}
		// A fenced transaction begins on a pool or a connection, never
		// inside a transaction, which is left alone.
		outer, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer outer.Rollback(ctx)
		if tx, err := pgxgate.BeginFenced(ctx, g, outer, tok, pgx.TxOptions{}); !errors.Is(err, pgxgate.ErrBeginInTx) || tx != nil {
			endTx(tx)
			t.Fatalf("in a tx: got %v, %v; want ErrBeginInTx", tx, err)
		}
		if _, err := outer.Exec(ctx, `INSERT INTO items VALUES (1, 1)`); err != nil {
			t.Fatalf("the outer transaction was disturbed: %v", err)
		}
	})
}

// Concurrent fenced transactions of one resource, under rising fences in
// no particular order, commit in fence order: each records its fence last
// thing before COMMIT while holding the floor row, so the log's order is
// the commit order, and a fence below the floor is refused rather than
// committed.
func TestBeginFencedConcurrentCommitsInFenceOrder(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if _, err := d.Pool().Exec(ctx, `CREATE TABLE commits (seq bigserial PRIMARY KEY, fence bigint NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		const writers, perWriter = 4, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*perWriter)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					tok := fence.Token{Resource: "r", Holder: "w", Fence: int64(1 + i*writers + w)}
					tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), tok, pgx.TxOptions{})
					if errors.Is(err, gate.ErrStaleFence) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					_, err = tx.Exec(ctx, `INSERT INTO commits (fence) VALUES ($1)`, tok.Fence)
					if err == nil {
						err = tx.Commit(ctx)
					}
					if err != nil {
						_ = tx.Rollback(ctx)
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rows, err := d.Pool().Query(ctx, `SELECT fence FROM commits ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		fences, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(fences); i++ {
			if fences[i] < fences[i-1] {
				t.Fatalf("fence %d committed after %d: %v", fences[i], fences[i-1], fences)
			}
		}
		if len(fences) == 0 {
			t.Fatal("nothing committed")
		}
		idle(t, d)
	})
}

// A database without fencegate_fence (not migrated) says so: every way to fence fails with sqlstore.ErrNotMigrated, and a
// missing function of the caller's own does not.
func TestMissingFenceFunctionIsNotMigrated(t *testing.T) {
	dbtest.ForEach(t, nil, func(t *testing.T, h dbtest.Harness[pgx.Tx]) {
		ctx := context.Background()
		d, g := pipelineHarness(t, h, nil)
		if _, err := d.Pool().Exec(ctx, `DROP FUNCTION fencegate_fence(text, bigint, text, boolean, boolean)`); err != nil {
			t.Fatal(err)
		}
		tok := fence.Token{Resource: "r", Holder: "a", Fence: 1}
		tx, err := pgxgate.BeginFenced(ctx, g, d.Pool(), tok, pgx.TxOptions{})
		endTx(tx)
		if !errors.Is(err, sqlstore.ErrNotMigrated) {
			t.Errorf("BeginFenced: %v, want ErrNotMigrated", err)
		}
		if err := pgxgate.CommitBatch(ctx, g, d.Pool(), tok, nil); !errors.Is(err, sqlstore.ErrNotMigrated) {
			t.Errorf("CommitBatch: %v, want ErrNotMigrated", err)
		}
		if err := g.Do(ctx, tok, func(context.Context, pgx.Tx) error { return nil }); !errors.Is(err, sqlstore.ErrNotMigrated) {
			t.Errorf("gate.Do: %v, want ErrNotMigrated", err)
		}
		_, err = d.Pool().Exec(ctx, `SELECT no_such_function_of_mine()`)
		if err = d.ClassifyError(err); err == nil || errors.Is(err, sqlstore.ErrNotMigrated) {
			t.Errorf("the caller's own missing function = %v: want an error that is not ErrNotMigrated", err)
		}
		idle(t, d)
	})
}
