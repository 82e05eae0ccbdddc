package pgxgate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// deadlines records the deadline of the context each statement was sent
// under, by the statement's first word and table.
type deadlines struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (d *deadlines) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	key := ""
	switch {
	case strings.EqualFold(data.SQL, "rollback"):
		key = "rollback"
	case strings.Contains(data.SQL, "fencegate_rejection"), strings.Contains(data.SQL, "fencegate_refusal_record"):
		key = "log" // the record, by the refusal log's rule on Postgres
	default:
		return ctx
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Time{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at[key] = append(d.at[key], dl)
	return ctx
}

func (d *deadlines) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns and forgets what was recorded.
func (d *deadlines) take() map[string][]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := d.at
	d.at = map[string][]time.Time{}
	return at
}

// Issue 22 item 9: BeginFenced's cleanup gave the rollback one
// CleanupTimeout and the refusal's log another, so it could take twice the
// bound. Both now run under one context, one deadline: so do CommitBatch's,
// on a pool (the transaction it began) and in the caller's transaction.
func TestRefusalCleanupHasOneBound(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &deadlines{at: map[string][]time.Time{}}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d := pgxv5.New(pool)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	g := gate.New(d, &gate.Options{CleanupTimeout: time.Hour})
	if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 10}); err != nil {
		t.Fatal(err)
	}
	stale := fence.Token{Resource: "r", Holder: "old", Fence: 3}
	for _, c := range []struct {
		name   string
		refuse func() error
	}{
		{"BeginFenced", func() error {
			tx, err := pgxgate.BeginFenced(ctx, g, pool, stale, pgx.TxOptions{})
			endTx(tx)
			return err
		}},
		{"CommitBatch on a pool", func() error { return pgxgate.CommitBatch(ctx, g, pool, stale, nil) }},
		{"CommitBatch in a transaction", func() error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			return pgxgate.CommitBatch(ctx, g, tx, stale, nil)
		}},
	} {
		rec.take()
		if err := c.refuse(); !errors.Is(err, gate.ErrStaleFence) {
			t.Fatalf("%s: got %v, want a refusal", c.name, err)
		}
		at := rec.take()
		if len(at["rollback"]) != 1 || len(at["log"]) == 0 {
			t.Fatalf("%s: traced %v, want one rollback and the log", c.name, at)
		}
		rb := at["rollback"][0]
		if rb.IsZero() {
			t.Fatalf("%s: the rollback ran without a deadline", c.name)
		}
		for _, l := range at["log"] {
			if !l.Equal(rb) {
				t.Errorf("%s: the log's deadline is %v after the rollback's: two bounds", c.name, l.Sub(rb))
			}
		}
	}
}
