package pgxv5_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// The SQL protocol (docs/SQL.md, version 1) on real Postgres: the functions
// any client calls, checked the way a client in another language sees
// them, with plain parameters and plain columns.

// protocolDB returns a pool on a fresh, migrated schema.
func protocolDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgxv5.New(pool).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool
}

// claimAnswer is a row of fencegate_claim and fencegate_claim_set.
type claimAnswer struct {
	Status    string
	Fence     *int64
	Holder    *string
	TTLMs     *int64
	RequestID *string
}

func (a claimAnswer) fence() int64 {
	if a.Fence == nil {
		return 0
	}
	return *a.Fence
}

func (a claimAnswer) holder() string {
	if a.Holder == nil {
		return ""
	}
	return *a.Holder
}

func claims(t *testing.T, db *pgxpool.Pool, query string, args ...any) []claimAnswer {
	t.Helper()
	rows, err := db.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", query, args, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimAnswer, error) {
		var a claimAnswer
		return a, r.Scan(&a.Status, &a.Fence, &a.Holder, &a.TTLMs, &a.RequestID)
	})
	if err != nil {
		t.Fatalf("%s %v: %v", query, args, err)
	}
	return out
}

func claim(t *testing.T, db *pgxpool.Pool, resource, holder string, ttlMs int64, requestID any) claimAnswer {
	t.Helper()
	a := claims(t, db, `SELECT * FROM fencegate_claim($1, $2, $3, $4)`, resource, holder, ttlMs, requestID)
	if len(a) != 1 {
		t.Fatalf("fencegate_claim answered %d rows", len(a))
	}
	return a[0]
}

func granted(t *testing.T, db *pgxpool.Pool, resource, holder string) int64 {
	t.Helper()
	a := claim(t, db, resource, holder, 60000, nil)
	if a.Status != "granted" || a.fence() <= 0 || a.holder() != holder || a.TTLMs == nil || *a.TTLMs != 60000 {
		t.Fatalf("claim %s by %s = %+v; want granted", resource, holder, a)
	}
	return a.fence()
}

// expire ends a lease's term now, as the passing of its time would.
func expire(t *testing.T, db *pgxpool.Pool, resource string) {
	t.Helper()
	if _, err := db.Exec(context.Background(),
		`UPDATE fencegate_lease SET expires_at = clock_timestamp() - interval '1 second' WHERE resource = $1`, resource); err != nil {
		t.Fatal(err)
	}
}

func pgCode(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

func TestProtocolVersion(t *testing.T) {
	db := protocolDB(t)
	var v int
	if err := db.QueryRow(context.Background(), `SELECT fencegate_protocol_version()`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("fencegate_protocol_version() = %d, %v; want 1", v, err)
	}
}

// A grant, a held answer naming the holder, the idempotent retry of a
// request answered with the same grant, and a request whose lease is over
// never granted again.
func TestProtocolClaim(t *testing.T) {
	db := protocolDB(t)
	a := claim(t, db, "r", "a", 30000, "req-1")
	if a.Status != "granted" || a.fence() <= 0 || a.holder() != "a" || *a.TTLMs != 30000 || *a.RequestID != "req-1" {
		t.Fatalf("first claim = %+v; want granted to a for 30000 ms", a)
	}
	retry := claim(t, db, "r", "a", 30000, "req-1")
	if retry.Status != "retried" || retry.fence() != a.fence() || *retry.TTLMs > 30000 || *retry.TTLMs <= 0 {
		t.Fatalf("retry = %+v; want retried with fence %d", retry, a.fence())
	}
	held := claim(t, db, "r", "b", 30000, nil)
	if held.Status != "held" || held.Fence != nil || held.holder() != "a" || *held.TTLMs <= 0 || *held.TTLMs > 30000 || held.RequestID == nil || *held.RequestID == "" {
		t.Fatalf("claim by b = %+v; want held by a, with the time until it frees and a generated request id", held)
	}
	var released bool
	if err := db.QueryRow(context.Background(), `SELECT released FROM fencegate_release('r', 'a', $1)`, a.fence()).Scan(&released); err != nil || !released {
		t.Fatalf("release = %v, %v", released, err)
	}
	late := claim(t, db, "r", "a", 30000, "req-1")
	if late.Status != "request_expired" || late.Fence != nil {
		t.Fatalf("late retry = %+v; want request_expired, nothing granted", late)
	}
	if next := granted(t, db, "r", "b"); next <= a.fence() {
		t.Fatalf("next fence %d is not above %d", next, a.fence())
	}
}

// A renewal never shortens a term; an expired, released or superseded
// lease is not renewed.
func TestProtocolRenew(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	f := granted(t, db, "r", "a")
	renew := func(holder string, fence, ttl int64) (bool, *int64) {
		t.Helper()
		var ok bool
		var left *int64
		if err := db.QueryRow(ctx, `SELECT renewed, ttl_ms FROM fencegate_renew('r', $1, $2, $3)`, holder, fence, ttl).Scan(&ok, &left); err != nil {
			t.Fatal(err)
		}
		return ok, left
	}
	if ok, left := renew("a", f, 3600000); !ok || *left <= 60000 {
		t.Fatalf("renew to an hour = %v, %v", ok, left)
	}
	if ok, left := renew("a", f, 1000); !ok || *left <= 60000 {
		t.Fatalf("renew to a second = %v, %d ms left; the term was shortened", ok, *left)
	}
	if ok, left := renew("b", f, 1000); ok || left != nil {
		t.Fatalf("renew by another holder = %v, %v", ok, left)
	}
	expire(t, db, "r")
	if ok, _ := renew("a", f, 60000); ok {
		t.Fatal("an expired lease was renewed")
	}
	g := granted(t, db, "r", "b")
	if ok, _ := renew("a", f, 60000); ok {
		t.Fatal("a superseded lease was renewed")
	}
	if _, err := db.Exec(ctx, `SELECT fencegate_release('r', 'b', $1)`, g); err != nil {
		t.Fatal(err)
	}
	if ok, _ := renew("b", g, 60000); ok {
		t.Fatal("a released lease was renewed")
	}
}

// A stale release frees nothing, and says why.
func TestProtocolRelease(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	release := func(holder string, fence int64) (bool, string) {
		t.Helper()
		var ok bool
		var reason *string
		if err := db.QueryRow(ctx, `SELECT released, reason FROM fencegate_release('r', $1, $2)`, holder, fence).Scan(&ok, &reason); err != nil {
			t.Fatal(err)
		}
		if ok != (reason == nil) {
			t.Fatalf("release answered %v with reason %v", ok, reason)
		}
		if reason == nil {
			return ok, ""
		}
		return ok, *reason
	}
	if ok, why := release("a", 1); ok || why != "never_held" {
		t.Fatalf("release of nothing = %v %q", ok, why)
	}
	f := granted(t, db, "r", "a")
	expire(t, db, "r")
	if ok, why := release("a", f); ok || why != "expired" {
		t.Fatalf("release of an expired lease = %v %q", ok, why)
	}
	g := granted(t, db, "r", "b")
	if ok, why := release("a", f); ok || why != "superseded" {
		t.Fatalf("stale release = %v %q", ok, why)
	}
	if a := claim(t, db, "r", "c", 1000, nil); a.Status != "held" || a.holder() != "b" {
		t.Fatalf("after a stale release, claim = %+v; want still held by b", a)
	}
	if ok, why := release("c", g); ok || why != "never_held" {
		t.Fatalf("release by another holder = %v %q", ok, why)
	}
	if ok, _ := release("b", g); !ok {
		t.Fatal("the holder's release failed")
	}
	if ok, why := release("b", g); ok || why != "already_released" {
		t.Fatalf("second release = %v %q", ok, why)
	}
}

// A set is claimed all or none: when one member is held, nothing is
// granted and the others say not_taken; a retry of a granted set is
// answered with the same fences.
func TestProtocolClaimSet(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	granted(t, db, "m2", "other")
	got := claims(t, db, `SELECT * FROM fencegate_claim_set($1, 'a', 60000, 'set-1')`, []string{"m3", "m2", "m1"})
	if len(got) != 3 || got[0].Status != "not_taken" || got[1].Status != "held" || got[1].holder() != "other" || got[2].Status != "not_taken" ||
		got[0].Fence != nil || got[2].Fence != nil {
		t.Fatalf("set with a held member = %+v; want not_taken, held by other, not_taken", got)
	}
	var leases int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM fencegate_lease WHERE holder = 'a'`).Scan(&leases); err != nil || leases != 0 {
		t.Fatalf("a refused set left %d leases (%v)", leases, err)
	}
	first := claims(t, db, `SELECT * FROM fencegate_claim_set($1, 'a', 60000, 'set-2')`, []string{"m3", "m1"})
	again := claims(t, db, `SELECT * FROM fencegate_claim_set($1, 'a', 60000, 'set-2')`, []string{"m3", "m1"})
	for i := range 2 {
		if first[i].Status != "granted" || again[i].Status != "retried" || first[i].fence() != again[i].fence() || first[i].fence() <= 0 {
			t.Fatalf("set = %+v, its retry = %+v; want granted, then retried with the same fences", first, again)
		}
	}
}

// The refusal: a successor's grant refuses the stale holder's write before
// the successor writes; the refused transaction rolls back, and the one
// call after the rollback logs both holders; a forged fence is refused and
// logged as never issued; a fence the gate admits cannot be logged.
func TestProtocolCheckAndRefusalLog(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE doc (id int PRIMARY KEY, body text)`); err != nil {
		t.Fatal(err)
	}
	fa := granted(t, db, "doc", "a")
	write := func(holder string, fence int64, body string) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO doc VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET body = excluded.body`, body); err != nil {
			t.Fatal(err)
		}
		var floor int64
		if err := tx.QueryRow(ctx, `SELECT fencegate_check('doc', $1, $2)`, holder, fence).Scan(&floor); err != nil {
			return err
		}
		if floor != fence {
			t.Fatalf("fencegate_check = %d, want the fence %d", floor, fence)
		}
		return tx.Commit(ctx)
	}
	if err := write("a", fa, "a's"); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	expire(t, db, "doc")
	fb := granted(t, db, "doc", "b") // b has not written yet

	err := write("a", fa, "a's late")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "FG001" || !strings.Contains(pgErr.Message, `from a`) || !strings.Contains(pgErr.Message, `from b`) {
		t.Fatalf("stale write = %v; want FG001 naming both holders", err)
	}
	var d struct {
		Resource    string  `json:"resource"`
		Fence       int64   `json:"fence"`
		Holder      string  `json:"holder"`
		Floor       *int64  `json:"floor"`
		FloorHolder *string `json:"floor_holder"`
	}
	if err := json.Unmarshal([]byte(pgErr.Detail), &d); err != nil || d.Resource != "doc" || d.Fence != fa || d.Holder != "a" ||
		d.Floor == nil || *d.Floor != fb || d.FloorHolder == nil || *d.FloorHolder != "b" {
		t.Fatalf("FG001 DETAIL %q: %+v, %v", pgErr.Detail, d, err)
	}
	var body string
	if err := db.QueryRow(ctx, `SELECT body FROM doc WHERE id = 1`).Scan(&body); err != nil || body != "a's" {
		t.Fatalf("after the refusal the row is %q (%v)", body, err)
	}
	logged := func(holder string, fence int64) bool {
		t.Helper()
		var ok bool
		if err := db.QueryRow(ctx, `SELECT fencegate_log_refusal('doc', $1, $2)`, holder, fence).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !logged("a", fa) {
		t.Fatal("the refusal was not logged")
	}
	type rejection struct {
		Fence       int64
		Holder      string
		Floor       int64
		FloorHolder string
		NotIssued   bool
	}
	last := func() rejection {
		t.Helper()
		var r rejection
		if err := db.QueryRow(ctx, `SELECT fence, holder, floor, floor_holder, not_issued FROM fencegate_rejection ORDER BY seq DESC LIMIT 1`).
			Scan(&r.Fence, &r.Holder, &r.Floor, &r.FloorHolder, &r.NotIssued); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := last(); r != (rejection{Fence: fa, Holder: "a", Floor: fb, FloorHolder: "b"}) {
		t.Fatalf("record %+v; want a's fence %d below b's floor %d", r, fa, fb)
	}

	// A forged fence, above everything issued.
	err = write("mallory", fb+100, "forged")
	if !errors.As(err, &pgErr) || pgErr.Code != "FG002" {
		t.Fatalf("forged fence = %v; want FG002", err)
	}
	if err := json.Unmarshal([]byte(pgErr.Detail), &d); err != nil || d.Floor != nil || d.FloorHolder != nil || d.Holder != "mallory" {
		t.Fatalf("FG002 DETAIL %q: %+v, %v", pgErr.Detail, d, err)
	}
	if !logged("mallory", fb+100) {
		t.Fatal("the forged fence's refusal was not logged")
	}
	if r := last(); !r.NotIssued || r.Holder != "mallory" {
		t.Fatalf("record %+v; want never issued", r)
	}

	// The live holder's fence is admitted: there is nothing to log.
	var before int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM fencegate_rejection`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if logged("b", fb) {
		t.Fatal("an admissible fence was logged as refused")
	}
	if err := write("b", fb, "b's"); err != nil {
		t.Fatalf("the successor's write: %v", err)
	}
	var after int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM fencegate_rejection`).Scan(&after); err != nil || after != before {
		t.Fatalf("rejections %d -> %d (%v)", before, after, err)
	}
}

// The Go driver's refusal log is fencegate_log_refusal's rule
// (fencegate_refusal_record): the record of a stale fence names both
// holders, and a fence the gate admits records nothing.
func TestGoRefusalLogIsTheProtocols(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	l, ok := pgxv5.New(db).Executor().(interface {
		LogRefusal(ctx context.Context, resource, holder string, fence int64) (sqlstore.Rejection, bool, error)
	})
	if !ok {
		t.Fatal("the Postgres executor has no LogRefusal")
	}
	fa := granted(t, db, "r", "a")
	expire(t, db, "r")
	fb := granted(t, db, "r", "b")
	r, logged, err := l.LogRefusal(ctx, "r", "a", fa)
	if err != nil || !logged || r.Seq <= 0 || r.At.IsZero() || r.Fence != fa || r.Holder != "a" || r.Floor != fb || r.FloorHolder != "b" || r.NotIssued {
		t.Fatalf("LogRefusal of a stale fence = %+v, %v, %v", r, logged, err)
	}
	r, logged, err = l.LogRefusal(ctx, "r", "x", fb+9)
	if err != nil || !logged || !r.NotIssued || r.Floor != fb {
		t.Fatalf("LogRefusal of a forged fence = %+v, %v, %v", r, logged, err)
	}
	if r, logged, err := l.LogRefusal(ctx, "r", "b", fb); err != nil || logged {
		t.Fatalf("LogRefusal of the live fence = %+v, %v, %v; want nothing logged", r, logged, err)
	}
}

// fencegate_admit answers what fencegate_check raises.
func TestProtocolAdmit(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	admit := func(holder string, fence int64) (bool, *int64, *string) {
		t.Helper()
		var ok bool
		var floor *int64
		var fh *string
		if err := db.QueryRow(ctx, `SELECT admitted, floor, floor_holder FROM fencegate_admit('r', $1, $2)`, holder, fence).Scan(&ok, &floor, &fh); err != nil {
			t.Fatal(err)
		}
		return ok, floor, fh
	}
	fa := granted(t, db, "r", "a")
	if ok, floor, fh := admit("a", fa); !ok || *floor != fa || *fh != "a" {
		t.Fatalf("admit of the live lease = %v %v %v", ok, floor, fh)
	}
	expire(t, db, "r")
	fb := granted(t, db, "r", "b")
	if ok, floor, fh := admit("a", fa); ok || *floor != fb || *fh != "b" {
		t.Fatalf("admit of a superseded fence = %v %v %v; want refused by b's floor %d", ok, floor, fh, fb)
	}
	if ok, floor, fh := admit("x", fb+5); ok || floor != nil || fh != nil {
		t.Fatalf("admit of a forged fence = %v %v %v; want refused, never issued", ok, floor, fh)
	}
	// A floor raised above the live lease by a fence from outside this
	// database (Go's gate without VerifyIssued) refuses the lease's fence.
	if _, err := db.Exec(ctx, `SELECT fencegate_fence('r', $1, 'outside', false, false)`, fb+50); err != nil {
		t.Fatal(err)
	}
	if ok, floor, fh := admit("b", fb); ok || *floor != fb+50 || *fh != "outside" {
		t.Fatalf("admit below an outside floor = %v %v %v; want refused by floor %d", ok, floor, fh, fb+50)
	}
	if _, err := db.Exec(ctx, `SELECT fencegate_check('r', 'b', $1)`, fb); pgCode(err) != "FG001" {
		t.Fatalf("check below an outside floor = %v; want FG001", err)
	}
}

// Bad input is refused with 22023 and changes nothing.
func TestProtocolBadInput(t *testing.T) {
	db := protocolDB(t)
	ctx := context.Background()
	f := granted(t, db, "r", "a")
	long := strings.Repeat("x", 257)
	state := func() string {
		t.Helper()
		var s string
		err := db.QueryRow(ctx, `SELECT concat_ws('|',
			(SELECT string_agg(concat_ws(',', resource, holder, fence, expires_at, released), ';' ORDER BY resource) FROM fencegate_lease),
			(SELECT string_agg(concat_ws(',', resource, floor, holder), ';' ORDER BY resource) FROM fencegate_floor),
			(SELECT count(*) FROM fencegate_rejection), (SELECT count(*) FROM fencegate_request), (SELECT count(*) FROM fencegate_watcher))`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := state()
	for _, c := range []struct {
		query string
		args  []any
	}{
		{`SELECT * FROM fencegate_claim($1, 'b', 1000)`, []any{""}},
		{`SELECT * FROM fencegate_claim($1, 'b', 1000)`, []any{long}},
		{`SELECT * FROM fencegate_claim($1, 'b', 1000)`, []any{"bell\a"}},
		{`SELECT * FROM fencegate_claim($1, 'b', 1000)`, []any{"path:src/a.go"}},
		{`SELECT * FROM fencegate_claim('s', $1, 1000)`, []any{""}},
		{`SELECT * FROM fencegate_claim('s', $1, 1000)`, []any{long}},
		{`SELECT * FROM fencegate_claim('s', 'b', $1)`, []any{int64(0)}},
		{`SELECT * FROM fencegate_claim('s', 'b', $1)`, []any{int64(-5)}},
		{`SELECT * FROM fencegate_claim('s', 'b', $1)`, []any{int64(86400001)}},
		{`SELECT * FROM fencegate_claim('s', 'b', 1000, $1)`, []any{""}},
		// A request id is lease's: 1 to 128 bytes of printable ASCII
		// without spaces.
		{`SELECT * FROM fencegate_claim('s', 'b', 1000, $1)`, []any{strings.Repeat("q", 129)}},
		{`SELECT * FROM fencegate_claim('s', 'b', 1000, $1)`, []any{"has space"}},
		{`SELECT * FROM fencegate_claim('s', 'b', 1000, $1)`, []any{"caf\u00e9"}},
		{`SELECT * FROM fencegate_claim('s', 'b', 1000, $1)`, []any{"tab\t"}},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 1000, $2)`, []any{[]string{"s"}, strings.Repeat("q", 129)}},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 1000, $2)`, []any{[]string{"s"}, "caf\u00e9"}},
		{`SELECT * FROM fencegate_claim(NULL, 'b', 1000)`, nil},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 1000)`, []any{[]string{}}},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 1000)`, []any{[]string{"s", "s"}}},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 1000)`, []any{[]string{"s", ""}}},
		{`SELECT * FROM fencegate_claim_set($1, 'b', 0)`, []any{[]string{"s"}}},
		{`SELECT * FROM fencegate_renew('r', 'a', $1, 1000)`, []any{int64(0)}},
		{`SELECT * FROM fencegate_renew('r', 'a', $1, 0)`, []any{f}},
		{`SELECT * FROM fencegate_renew('r', '', $1, 1000)`, []any{f}},
		{`SELECT * FROM fencegate_release('r', 'a', $1)`, []any{int64(-1)}},
		{`SELECT * FROM fencegate_release('', 'a', $1)`, []any{f}},
		{`SELECT fencegate_check('r', 'a', $1)`, []any{int64(0)}},
		{`SELECT fencegate_check($1, 'a', 1)`, []any{long}},
		{`SELECT * FROM fencegate_admit('r', '', $1)`, []any{f}},
		{`SELECT * FROM fencegate_admit('r', 'a', $1)`, []any{int64(0)}},
		{`SELECT fencegate_log_refusal('r', 'a', $1)`, []any{int64(0)}},
		{`SELECT fencegate_log_refusal($1, 'a', 1)`, []any{""}},
		{`SELECT fencegate_watch($1)`, []any{""}},
	} {
		_, err := db.Exec(ctx, c.query, c.args...)
		if code := pgCode(err); code != "22023" {
			t.Errorf("%s %q = %v (SQLSTATE %q); want 22023", c.query, c.args, err, code)
		}
	}
	// Invalid UTF-8 never reaches the functions: the server refuses the
	// parameter (22021), and nothing changes either.
	_, err := db.Exec(ctx, `SELECT * FROM fencegate_claim($1, 'b', 1000)`, "bad\xff")
	if code := pgCode(err); code != "22021" {
		t.Errorf("invalid UTF-8 = %v (SQLSTATE %q); want 22021", err, code)
	}
	if after := state(); after != before {
		t.Fatalf("bad input changed the state:\n%s\n%s", before, after)
	}
	// The longest request id lease accepts is accepted here too.
	id := "~!" + strings.Repeat("q", 126)
	if a := claim(t, db, "s", "b", 1000, id); a.Status != "granted" || a.RequestID == nil || *a.RequestID != id {
		t.Errorf("claim with a 128-byte request id = %+v; want granted", a)
	}
}

// A watcher hears a release on the channel fencegate_lease, with the
// documented payload.
func TestProtocolWatch(t *testing.T) {
	db := protocolDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := granted(t, db, "w", "a")
	conn, schema := watch(ctx, t, db, "w")
	if _, err := db.Exec(ctx, `SELECT fencegate_release('w', 'a', $1)`, f); err != nil {
		t.Fatal(err)
	}
	if got, want := announcement(ctx, t, conn, schema, "w"), "w\x1f\x1f"+schema; got != want {
		t.Fatalf("announcement %q; want %q", got, want)
	}
}

// watch watches resource on a connection of db's, listening on
// fencegate_lease, and returns it with the schema its announcements name.
// The test's end unwatches and releases it.
func watch(ctx context.Context, t *testing.T, db *pgxpool.Pool, resource string) (*pgxpool.Conn, string) {
	t.Helper()
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer conn.Release()
		// The test's ctx has ended by now: a bound of its own.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(cctx, `UNLISTEN fencegate_lease; SELECT fencegate_unwatch()`); err != nil {
			t.Errorf("unwatch %q: the watcher row stays until the connection ends: %v", resource, err)
		}
	})
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT fencegate_watch($1)`, resource); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `LISTEN fencegate_lease`); err != nil {
		t.Fatal(err)
	}
	return conn, schema
}

// announcement waits on conn for the announcement of resource in schema
// and returns its payload. The channel is the database's: other schemas'
// announcements (other tests') are skipped by their schema field, as a
// client does.
func announcement(ctx context.Context, t *testing.T, conn *pgxpool.Conn, schema, resource string) string {
	t.Helper()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no announcement of %q's release: %v", resource, err)
		}
		if fields := strings.Split(n.Payload, "\x1f"); n.Channel == "fencegate_lease" && len(fields) >= 3 && fields[0] == resource && fields[2] == schema {
			return n.Payload
		}
	}
}

// A release in a REPEATABLE READ transaction whose snapshot predates the
// watcher's row still announces: the trigger skips the NOTIFY for nobody
// waiting only where its read is fresh (READ COMMITTED).
func TestProtocolWatchReleaseInRepeatableRead(t *testing.T) {
	db := protocolDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := granted(t, db, "rr", "a")
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var schema string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil { // the snapshot
		t.Fatal(err)
	}
	conn, _ := watch(ctx, t, db, "rr")
	if _, err := tx.Exec(ctx, `SELECT fencegate_release('rr', 'a', $1)`, f); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	announcement(ctx, t, conn, schema, "rr")
}

// sqlSection returns the Postgres section of docs/SQL.md.
func sqlSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SQL.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## Postgres\n")
	if !ok {
		t.Fatal(`docs/SQL.md has no "## Postgres" section`)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// called matches a call of a fencegate function, the way docs/SQL.md names
// functions (tables are named without parentheses).
var called = regexp.MustCompile(`\bfencegate_\w+\(`)

func callNames(text string) []string {
	var names []string
	for _, m := range called.FindAllString(text, -1) {
		names = append(names, strings.TrimSuffix(m, "("))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Every function docs/SQL.md documents for Postgres exists after the
// migrations, and every function the migrations create is documented
// (the protocol's, or an internal one Go or the triggers call).
func TestProtocolFunctionsDocumented(t *testing.T) {
	db := protocolDB(t)
	documented := callNames(sqlSection(t))
	rows, err := db.Query(context.Background(), `
		SELECT DISTINCT p.proname FROM pg_proc p
		 WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'fencegate\_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range documented {
		if !slices.Contains(created, name) {
			t.Errorf("docs/SQL.md documents %s(), which the migrations do not create", name)
		}
	}
	for _, name := range created {
		if !slices.Contains(documented, name) {
			t.Errorf("the migrations create %s(), which docs/SQL.md's Postgres section does not document", name)
		}
	}
}

// The Go Postgres drivers call only functions docs/SQL.md documents: one
// rulebook.
func TestGoCallsDocumentedFunctions(t *testing.T) {
	documented := callNames(sqlSection(t))
	var calls int
	for _, dir := range []string{".", "../pgsql", "../internal/pg", "../../gate/pgxgate", "../../guard"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != dir {
				return filepath.SkipDir // distributed SQL has a profile of its own
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, name := range callNames(string(src)) {
				calls++
				if !slices.Contains(documented, name) {
					t.Errorf("%s calls %s(), which docs/SQL.md does not document", path, name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls == 0 {
		t.Fatal("found no call of a fencegate function in the Go drivers")
	}
}
