package guard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// pgHarness is a migrated schema with a table orders(id, tenant, v),
// guarded per tenant, and a table plain(id) guarded by the resource "cfg".
type pgHarness struct {
	url   string
	pool  *pgxpool.Pool
	db    *sql.DB
	admin *guard.Admin
	g     *gate.Gate[pgx.Tx]
	d     *pgxv5.Driver
}

func newPG(t testing.TB) *pgHarness {
	t.Helper()
	ctx := context.Background()
	url := dbtest.PostgresSchemaURL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d := pgxv5.New(pool)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	admin, err := guard.New(db, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
CREATE TABLE orders (id int PRIMARY KEY, tenant text NOT NULL, v int NOT NULL DEFAULT 0);
CREATE TABLE plain (id int PRIMARY KEY);`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Install(ctx, guard.Spec{Table: "orders", ResourceExpr: "'tenant:' || tenant"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Install(ctx, guard.Spec{Table: "plain", Resource: "cfg"}); err != nil {
		t.Fatal(err)
	}
	return &pgHarness{url: url, pool: pool, db: db, admin: admin, g: gate.New(d, nil), d: d}
}

// fenced runs stmts in one transaction that passed the fence for each
// token, and commits.
func (h *pgHarness) fenced(ctx context.Context, tokens []fence.Token, stmts ...string) error {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, tok := range tokens {
		if err := h.g.Commit(ctx, tx, tok); err != nil {
			return err
		}
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func (h *pgHarness) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func wantRefused(t *testing.T, err error, table, resource, reason string) {
	t.Helper()
	if !guard.IsRefused(err) {
		t.Fatalf("want a guard refusal, got %v", err)
	}
	for _, s := range []string{table, resource, reason} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q does not say %q", err, s)
		}
	}
}

var (
	tenantA = fence.Token{Resource: "tenant:a", Holder: "h1", Fence: 3}
	tenantB = fence.Token{Resource: "tenant:b", Holder: "h2", Fence: 4}
	cfg     = fence.Token{Resource: "cfg", Holder: "h3", Fence: 1}
)

func TestPostgresGuardRefusesUnfencedWrites(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	if err := h.fenced(ctx, []fence.Token{tenantA}, `INSERT INTO orders VALUES (1, 'a')`); err != nil {
		t.Fatalf("fenced insert: %v", err)
	}
	for _, c := range []struct{ name, stmt, table, resource string }{
		{"update", `UPDATE orders SET v = 1 WHERE id = 1`, "orders", "tenant:a"},
		{"delete", `DELETE FROM orders WHERE id = 1`, "orders", "tenant:a"},
		{"insert", `INSERT INTO orders VALUES (2, 'a')`, "orders", "tenant:a"},
		{"multi-row insert", `INSERT INTO orders VALUES (3, 'c'), (4, 'd')`, "orders", "tenant:c"},
		{"upsert", `INSERT INTO orders VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = 9`, "orders", "tenant:a"},
		{"fixed resource", `INSERT INTO plain VALUES (1)`, "plain", "cfg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.pool.Exec(ctx, c.stmt)
			wantRefused(t, err, c.table, c.resource, "no fence in this transaction")
			// Another resource's fence is no pass either.
			err = h.fenced(ctx, []fence.Token{tenantB}, c.stmt)
			wantRefused(t, err, "", c.resource, "no fence in this transaction")
		})
	}
	_, err := h.pool.Exec(ctx, `TRUNCATE orders`)
	wantRefused(t, err, "orders", "", "no fence")
	if n := h.count(t, `SELECT count(*) FROM orders WHERE v = 0`); n != 1 {
		t.Fatalf("orders: %d rows as written, want 1", n)
	}
}

func TestPostgresGuardAdmitsFencedWrites(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	// Commit, then every kind of write; one transaction for several
	// resources passes for rows of each (multi-resource tokens).
	if err := h.fenced(ctx, []fence.Token{tenantA, tenantB, cfg},
		`INSERT INTO orders VALUES (1, 'a'), (2, 'b')`,
		`INSERT INTO orders VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = 1`,
		`INSERT INTO plain VALUES (1)`,
		`DELETE FROM orders WHERE id = 2`); err != nil {
		t.Fatalf("fenced writes: %v", err)
	}
	// Do, and COPY.
	if err := h.g.Do(ctx, tenantA, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"id", "tenant"},
			pgx.CopyFromRows([][]any{{10, "a"}, {11, "a"}}))
		return err
	}); err != nil {
		t.Fatalf("Do with COPY: %v", err)
	}
	// COPY of a row of another resource is refused, and nothing of it lands.
	err := h.g.Do(ctx, tenantA, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"id", "tenant"},
			pgx.CopyFromRows([][]any{{12, "a"}, {13, "z"}}))
		return err
	})
	wantRefused(t, err, "orders", "tenant:z", "no fence in this transaction")
	// CommitBatch and BeginFenced.
	b := &pgx.Batch{}
	b.Queue(`UPDATE orders SET v = 2 WHERE id = 1`)
	if err := pgxgate.CommitBatch(ctx, h.g, h.pool, tenantA, b); err != nil {
		t.Fatalf("CommitBatch: %v", err)
	}
	tx, err := pgxgate.BeginFenced(ctx, h.g, h.pool, tenantA, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET v = 3 WHERE id = 1`); err != nil {
		t.Fatalf("BeginFenced write: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(t, `SELECT count(*) FROM orders`); n != 3 {
		t.Errorf("orders: %d rows, want 3 (1, 10, 11)", n)
	}
	// A write in a savepoint after the fence passes: the proof is the
	// top-level transaction's.
	if err := h.fenced(ctx, []fence.Token{tenantA}, `SAVEPOINT s`, `UPDATE orders SET v = 4 WHERE id = 1`, `RELEASE s`); err != nil {
		t.Fatalf("write in a savepoint: %v", err)
	}
}

// A pass ends with its transaction: the next one on the same connection
// (a pooled connection handed to a code path that forgot the gate) is
// refused, whether the fence raised the floor (pass_xid) or held it (a
// lock, xmax).
func TestPostgresGuardPassEndsWithTransaction(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i, tok := range []fence.Token{tenantA, tenantA, {Resource: "tenant:a", Holder: "h9", Fence: 9}} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.g.Commit(ctx, tx, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, 'a')`, i); err != nil {
			t.Fatalf("fenced write %d: %v", i, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, `UPDATE orders SET v = 1 WHERE id = $1`, i)
		wantRefused(t, err, "orders", "tenant:a", "no fence in this transaction")
	}
}

func TestPostgresGuardMovedRowNeedsBothFences(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	if err := h.fenced(ctx, []fence.Token{tenantA}, `INSERT INTO orders VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	move := `UPDATE orders SET tenant = 'b' WHERE id = 1`
	wantRefused(t, h.fenced(ctx, []fence.Token{tenantA}, move), "orders", "tenant:b", "no fence")
	wantRefused(t, h.fenced(ctx, []fence.Token{tenantB}, move), "orders", "tenant:a", "no fence")
	if err := h.fenced(ctx, []fence.Token{tenantA, tenantB}, move); err != nil {
		t.Fatalf("move with both fences: %v", err)
	}
}

func TestPostgresGuardRefusesStaleFence(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	if err := h.g.Admit(ctx, fence.Token{Resource: "tenant:a", Holder: "new", Fence: 10}); err != nil {
		t.Fatal(err)
	}
	// gate.Commit rolls a refused transaction back itself; a caller that
	// calls the fence statement directly and ignores its answer is what
	// the guard must stop.
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var floor int64
	if err := tx.QueryRow(ctx, `SELECT floor FROM fencegate_fence('tenant:a', 3, 'old', false, false)`).Scan(&floor); err != nil || floor != 10 {
		t.Fatalf("fence: floor %d, %v", floor, err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO orders VALUES (1, 'a')`)
	wantRefused(t, err, "orders", "tenant:a", "stale (floor 10 from new)")
}

func TestPostgresGuardOperatorBypass(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	// Off by default: the setting alone does nothing for a role without
	// UPDATE on fencegate_floor (see TestPostgresGuardLeastPrivilege); as
	// the owner, it lets the write through and logs it.
	if err := h.fenced(ctx, nil, `SET LOCAL fencegate.guard_bypass = 'on'`,
		`INSERT INTO orders VALUES (1, 'a')`, `DELETE FROM plain`); err != nil {
		t.Fatalf("bypass: %v", err)
	}
	bs, err := h.admin.Bypasses(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Table != "orders" && !strings.HasSuffix(bs[0].Table, ".orders") || bs[0].Op != "INSERT" || bs[0].Resource != "tenant:a" {
		t.Fatalf("bypass log: %+v", bs)
	}
	// The next transaction is guarded again.
	_, err = h.pool.Exec(ctx, `INSERT INTO orders VALUES (2, 'a')`)
	wantRefused(t, err, "orders", "tenant:a", "no fence")
}

func TestPostgresGuardLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	role := fmt.Sprintf("fg_app_%d", rng())
	var schema string
	if err := h.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	setup, err := guard.PostgresAppRoleSQL(schema, role)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, "CREATE ROLE "+role+" NOLOGIN;\n"+setup+
		"\nGRANT SELECT, INSERT, UPDATE, DELETE ON orders, plain TO "+role); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		conn, err := pgx.Connect(ctx, h.url)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	// A pool whose every connection is the app role.
	cfgp, err := pgxpool.ParseConfig(h.url)
	if err != nil {
		t.Fatal(err)
	}
	cfgp.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+role)
		return err
	}
	app, err := pgxpool.NewWithConfig(ctx, cfgp)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	g := gate.New(pgxv5.New(app), nil)
	// The app role passes the fence (the fence runs with its owner's rights).
	if err := g.Do(ctx, tenantA, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO orders VALUES (1, 'a')`)
		return err
	}); err != nil {
		t.Fatalf("app role, fenced: %v", err)
	}
	// It cannot fake a pass: no write, no lock on fencegate_floor, no
	// temporary table standing in for it, no bypass.
	for _, fake := range []string{
		`UPDATE fencegate_floor SET floor = floor WHERE resource = 'tenant:a'`,
		`INSERT INTO fencegate_floor (resource, floor, holder) VALUES ('tenant:q', 1, 'x')`,
		`SELECT 1 FROM fencegate_floor WHERE resource = 'tenant:a' FOR UPDATE`,
	} {
		tx, err := app.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, fake)
		tx.Rollback(ctx)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s: want permission denied, got %v", fake, err)
		}
	}
	for _, c := range []struct {
		stmts []string
		says  string
	}{
		// A temporary table comes first in the search_path for tables by
		// default; the guard names fencegate's schema.
		{[]string{`CREATE TEMP TABLE fencegate_floor AS SELECT 'tenant:a'::text AS resource, 9::bigint AS floor, 'x'::text AS holder, now() AS updated_at, pg_current_xact_id() AS pass_xid`,
			`UPDATE orders SET v = 1 WHERE id = 1`}, "no fence in this transaction"},
		{[]string{`SET LOCAL fencegate.guard_bypass = 'on'`, `UPDATE orders SET v = 1 WHERE id = 1`}, "no fence in this transaction"},
		// Nor a temporary fencegate_floor it may update, for the bypass.
		{[]string{`CREATE TEMP TABLE fencegate_floor (resource text, floor bigint, holder text, updated_at timestamptz, pass_xid xid8)`,
			`CREATE TEMP TABLE fencegate_guard_bypass (table_name text, op text, resource text, role_name text, xid xid8)`,
			`SET LOCAL fencegate.guard_bypass = 'on'`, `UPDATE orders SET v = 1 WHERE id = 1`}, "no fence in this transaction"},
		{[]string{`ALTER TABLE orders DISABLE TRIGGER fencegate_guard`}, "must be owner"},
		{[]string{`DROP TRIGGER fencegate_guard ON orders`}, "must be owner"},
		{[]string{`SET LOCAL session_replication_role = replica`, `UPDATE orders SET v = 1 WHERE id = 1`}, "permission denied"},
		{[]string{`SELECT fencegate_guard_refuse(current_schema(), 'orders', 'UPDATE', 'tenant:a')`, `UPDATE orders SET v = 1 WHERE id = 1`}, "no fence in this transaction"},
	} {
		tx, err := app.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.stmts {
			if _, err = tx.Exec(ctx, s); err != nil {
				break
			}
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		tx.Rollback(ctx)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want an error saying %q", c.stmts, err, c.says)
		}
	}
	// The pipelined fence works for the role too.
	b := &pgx.Batch{}
	b.Queue(`UPDATE orders SET v = 0 WHERE id = 1`)
	if err := pgxgate.CommitBatch(ctx, g, app, tenantA, b); err != nil {
		t.Fatalf("app role, CommitBatch: %v", err)
	}
	if n := h.count(t, `SELECT count(*) FROM orders WHERE v <> 0`); n != 0 {
		t.Fatalf("%d rows written past the guard", n)
	}
	if bs, err := h.admin.Bypasses(ctx, 0); err != nil || len(bs) != 0 {
		t.Fatalf("bypasses: %v %v", bs, err)
	}
}

func TestPostgresGuardBadInput(t *testing.T) {
	ctx := context.Background()
	h := newPG(t)
	if _, err := h.pool.Exec(ctx, `CREATE TABLE "Odd Name" (id int, n int, t text); CREATE VIEW v AS SELECT 1 AS id`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec guard.Spec
		want error
		says string
	}{
		{guard.Spec{Table: "missing", Resource: "r"}, guard.ErrNoTable, "missing"},
		{guard.Spec{Table: "Odd Name", Resource: "r"}, guard.ErrNoTable, "quote"},
		{guard.Spec{Table: "v", Resource: "r"}, guard.ErrNoTable, "not a table"},
		{guard.Spec{Table: "orders", Resource: "r"}, guard.ErrAlreadyGuarded, "orders"},
		{guard.Spec{Table: `"Odd Name"`, ResourceExpr: "nope"}, guard.ErrInvalidSpec, "nope"},
		{guard.Spec{Table: `"Odd Name"`, ResourceExpr: "n + 1"}, guard.ErrInvalidSpec, "not text"},
		{guard.Spec{Table: `"Odd Name"`, ResourceExpr: "t; DROP TABLE plain"}, guard.ErrInvalidSpec, "';'"},
		{guard.Spec{Table: `"Odd Name"`}, guard.ErrInvalidSpec, "either"},
		{guard.Spec{Table: `"Odd Name"`, Resource: "r", ResourceExpr: "t"}, guard.ErrInvalidSpec, "either"},
	} {
		_, err := h.admin.Install(ctx, c.spec)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Install(%+v): %v, want %v saying %q", c.spec, err, c.want, c.says)
		}
	}
	if err := h.admin.Remove(ctx, `"Odd Name"`); !errors.Is(err, guard.ErrNotGuarded) {
		t.Errorf("Remove unguarded: %v", err)
	}
	// Nothing half-installed: the odd table takes a guard now, and loses it.
	if n := h.count(t, `SELECT count(*) FROM pg_trigger WHERE tgrelid = '"Odd Name"'::regclass`); n != 0 {
		t.Fatalf("%d triggers left behind", n)
	}
	g, err := h.admin.Install(ctx, guard.Spec{Table: `"Odd Name"`, ResourceExpr: "'t:' || t"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := h.admin.List(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("List: %+v %v", list, err)
	}
	if list[0].Table != g.Table || list[0].ResourceExpr != "'t:' || t" || !list[0].Enabled {
		t.Errorf("List[0] = %+v, want %+v", list[0], g)
	}
	// Renamed since, it still loses its guard whole.
	if _, err := h.pool.Exec(ctx, `ALTER TABLE "Odd Name" RENAME TO "Odder Name"`); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Remove(ctx, `"Odder Name"`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, `ALTER TABLE "Odder Name" RENAME TO "Odd Name"`); err != nil {
		t.Fatal(err)
	}
	if n := h.count(t, `SELECT count(*) FROM pg_proc WHERE proname LIKE 'fencegate_guard_%' AND proname NOT IN ('fencegate_guard_refuse', 'fencegate_guard_truncate', 'fencegate_guard_refuse_truncate') AND pronamespace = current_schema()::regnamespace`); n != 2 {
		t.Fatalf("%d guard functions left, want 2 (orders, plain)", n)
	}
	if _, err := h.pool.Exec(ctx, `INSERT INTO "Odd Name" VALUES (1, 1, 'x')`); err != nil {
		t.Fatalf("after Remove: %v", err)
	}
	m, err := h.admin.SQL(ctx, guard.Spec{Table: `"Odd Name"`, Resource: "r"})
	if err != nil || !strings.Contains(m.Goose(), "-- +goose Up") || !strings.Contains(m.Down, "DROP TRIGGER") {
		t.Fatalf("SQL: %v\n%s", err, m.Goose())
	}
}

func rng() uint32 { return rand.Uint32() }
