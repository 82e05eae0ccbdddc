package distributed_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// objects counts, in the schema of pool's connections, what the profile
// must not create: functions and procedures, triggers, sequences (identity
// columns and SERIAL make one each).
func objects(t *testing.T, pool *pgxpool.Pool) (functions, triggers, sequences int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `
SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace),
       (SELECT count(*) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
         WHERE c.relnamespace = current_schema()::regnamespace AND NOT g.tgisinternal),
       (SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace)`).
		Scan(&functions, &triggers, &sequences)
	if err != nil {
		t.Fatal(err)
	}
	return functions, triggers, sequences
}

// workload runs every part of fencegate over d: migration, acquisition,
// renewal, a queued waiter, release, a fenced write and a refused one (which
// logs a rejection), and the fence advance of a failover.
func workload(t *testing.T, d sqlstore.Driver[pgx.Tx]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: 10 * time.Second, WaiterTTL: 300 * time.Millisecond})
	g := gate.New(d, &gate.Options{VerifyIssued: true})
	alice, _ := lease.NewClient(&lease.ClientOptions{Holder: "alice"})
	bob, _ := lease.NewClient(&lease.ClientOptions{Holder: "bob"})
	first, err := c.AcquireWait(ctx, alice, "r")
	if err != nil {
		t.Fatal(err)
	}
	rreq, _ := alice.BeginRenewal(first)
	if out, err := c.Renew(ctx, rreq); err != nil || !out.OK {
		t.Fatalf("renew = %+v, %v", out, err)
	}
	got := make(chan error, 1)
	var second *lease.Lease
	go func() {
		var err error
		second, err = c.AcquireWait(ctx, bob, "r")
		got <- err
	}()
	for ws := []sqlstore.Waiter(nil); len(ws) == 0; {
		if ws, err = c.Waiters(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // polling the queue, not synchronising a result
	}
	tok, _ := alice.Release(first)
	if _, err := c.Release(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for _, token := range []fence.Token{second.Token(), first.Token()} {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = g.Commit(ctx, tx, token)
		if token == first.Token() {
			if err == nil {
				t.Fatal("the stale token was admitted")
			}
			_ = d.Rollback(ctx, tx)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AdvanceFences(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	if rs, err := d.Executor().RejectionList(ctx, &sqlstore.RejectionListParams{}); err != nil || len(rs) != 1 {
		t.Fatalf("rejections = %+v, %v; want alice's", rs, err)
	}
}

// The profile's schema has no function, trigger or sequence, and it sends
// no statement that calls one, listens or notifies, or takes an advisory
// lock, over the whole workload. The same checks fire on the default
// Postgres driver, which uses all of them.
func TestPlainStatementsOnly(t *testing.T) {
	rec := &recorder{}
	d := open(t, "", nil, rec)
	workload(t, d)
	if f, tr, s := objects(t, d.Pool()); f+tr+s != 0 {
		t.Errorf("the profile's schema has %d functions, %d triggers, %d sequences", f, tr, s)
	}
	sent := rec.statements()
	for _, q := range sent {
		if m := banned.FindString(q); m != "" {
			t.Errorf("sent %q in:\n%s", m, q)
		}
	}
	if len(sent) < 50 {
		t.Fatalf("only %d statements recorded: the tracer saw too little to tell", len(sent))
	}

	t.Run("the checks fire on the default driver", func(t *testing.T) {
		rec := &recorder{}
		pool := openPool(t, dbtest.PostgresSchemaURL(t), rec)
		def := pgxv5.New(pool)
		if err := def.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		workload(t, def)
		if f, tr, s := objects(t, pool); f == 0 || tr == 0 || s == 0 {
			t.Errorf("the default driver's schema: %d functions, %d triggers, %d sequences; want some of each", f, tr, s)
		}
		hits := 0
		for _, q := range rec.statements() {
			if banned.MatchString(q) {
				hits++
			}
		}
		if hits == 0 {
			t.Error("no statement of the default driver matched")
		}
		for _, q := range []string{pg.Queries.FenceNext, pg.Queries.LeaseAcquire, pg.Queries.FloorRaise, "LISTEN fencegate_lease"} {
			if !banned.MatchString(q) {
				t.Errorf("not caught: %s", q)
			}
		}
	})
}
