package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	migrations "github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/sqlstore"
)

// The SQL protocol's procedures (migrations/mysql/00002, docs/SQL.md), called
// as a client in another language calls them: CALL, one result set, columns
// by name.

// row is one row of a procedure's result set, NULL as nil and every other
// value as its text.
type row map[string]any

// call runs CALL query and returns its first result set.
func call(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]row, error) {
	t.Helper()
	rs, err := q.QueryContext(context.Background(), query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	var out []row
	for rs.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, err
		}
		r := row{}
		for i, c := range cols {
			if vals[i].Valid {
				r[c] = vals[i].String
			} else {
				r[c] = nil
			}
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// one runs CALL query, which must answer one row.
func one(t *testing.T, db *sql.DB, query string, args ...any) row {
	t.Helper()
	rows, err := call(t, db, query, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", query, args, err)
	}
	if len(rows) != 1 {
		t.Fatalf("%s %v: %d rows, want 1: %v", query, args, len(rows), rows)
	}
	return rows[0]
}

// sqlState is err's SQLSTATE, "" for none.
func sqlState(err error) string {
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		return string(me.SQLState[:])
	}
	return ""
}

// snapshot is every fencegate table's content, to tell that a refused call
// changed nothing.
func snapshot(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT CONCAT_WS('|', last) FROM fencegate_fence_seq`,
		`SELECT CONCAT_WS('|', HEX(resource), holder, fence, request_id, granted_at, expires_at, released) FROM fencegate_lease ORDER BY resource`,
		`SELECT CONCAT_WS('|', HEX(resource), floor, holder, updated_at) FROM fencegate_floor ORDER BY resource`,
		`SELECT CONCAT_WS('|', HEX(resource), request_id, fence) FROM fencegate_request ORDER BY resource, request_id`,
		`SELECT CONCAT_WS('|', seq, HEX(resource), fence, holder, floor, floor_holder) FROM fencegate_rejection ORDER BY seq`,
	} {
		rs, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		rs.Close()
		b.WriteString("--\n")
	}
	return b.String()
}

// expire ends resource's lease term now, as the passing of time would.
func expire(t *testing.T, db *sql.DB, resource string) {
	t.Helper()
	if _, err := db.Exec(`UPDATE fencegate_lease SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE resource = ?`, resource); err != nil {
		t.Fatal(err)
	}
}

func want(t *testing.T, got row, fields row) {
	t.Helper()
	for k, v := range fields {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (row %v)", k, got[k], v, got)
		}
	}
}

func protocolDB(t *testing.T) *sql.DB {
	t.Helper()
	return open(t).DB()
}

func TestProtocolVersion(t *testing.T) {
	db := protocolDB(t)
	want(t, one(t, db, `CALL fencegate_protocol_version()`), row{"version": "1"})
}

// Bad input is refused with SQLSTATE 22023 and changes nothing.
func TestProtocolBadInput(t *testing.T) {
	db := protocolDB(t)
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "a", 60000, "req-1")
	before := snapshot(t, db)
	huge := strings.Repeat("x", 257)
	for _, c := range []struct {
		name  string
		query string
		args  []any
	}{
		{"claim empty resource", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"", "a", 1000, nil}},
		{"claim huge resource", `CALL fencegate_claim(?, ?, ?, ?)`, []any{huge, "a", 1000, nil}},
		{"claim invalid utf-8", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r\xff", "a", 1000, nil}},
		{"claim surrogate", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r\xed\xa0\x80", "a", 1000, nil}},
		{"claim control character", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r\n", "a", 1000, nil}},
		{"claim C1 control", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r\u0085", "a", 1000, nil}},
		{"claim NULL resource", `CALL fencegate_claim(?, ?, ?, ?)`, []any{nil, "a", 1000, nil}},
		{"claim empty holder", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "", 1000, nil}},
		{"claim huge holder", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", huge, 1000, nil}},
		{"claim zero ttl", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", 0, nil}},
		{"claim negative ttl", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", -5, nil}},
		{"claim NULL ttl", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", nil, nil}},
		{"claim bad request id", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", 1000, "has space"}},
		{"claim long request id", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", 1000, strings.Repeat("q", 129)}},
		{"claim non-ASCII request id", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"r2", "a", 1000, "caf\u00e9"}},
		{"set bad request id", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{`["x"]`, "a", 1000, "tab\t"}},
		{"claim path", `CALL fencegate_claim(?, ?, ?, ?)`, []any{"path:src/a.go", "a", 1000, nil}},
		{"set not json", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{"r2", "a", 1000, nil}},
		{"set empty", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{"[]", "a", 1000, nil}},
		{"set twice", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{`["x","y","x"]`, "a", 1000, nil}},
		{"set bad member", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{`["x",""]`, "a", 1000, nil}},
		{"set number member", `CALL fencegate_claim_set(?, ?, ?, ?)`, []any{`["x",3]`, "a", 1000, nil}},
		{"renew zero fence", `CALL fencegate_renew(?, ?, ?, ?)`, []any{"r", "a", 0, 1000}},
		{"renew zero ttl", `CALL fencegate_renew(?, ?, ?, ?)`, []any{"r", "a", 1, 0}},
		{"release zero fence", `CALL fencegate_release(?, ?, ?)`, []any{"r", "a", 0}},
		{"check zero fence", `CALL fencegate_check(?, ?, ?)`, []any{"r", "a", 0}},
		{"check empty holder", `CALL fencegate_check(?, ?, ?)`, []any{"r", "", 1}},
		{"admit negative fence", `CALL fencegate_admit(?, ?, ?)`, []any{"r", "a", -1}},
		{"log_refusal empty resource", `CALL fencegate_log_refusal(?, ?, ?)`, []any{"", "a", 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := call(t, db, c.query, c.args...)
			if got := sqlState(err); got != "22023" {
				t.Fatalf("error %v (SQLSTATE %q), want SQLSTATE 22023", err, got)
			}
			if after := snapshot(t, db); after != before {
				t.Fatalf("the refused call changed the tables:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

func TestProtocolClaim(t *testing.T) {
	db := protocolDB(t)
	g := one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-a", 60000, "req-a")
	want(t, g, row{"status": "granted", "fence": "1", "holder": "agent-a", "ttl_ms": "60000", "request_id": "req-a"})

	// The same request again: the same grant (an idempotent retry).
	r := one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-a", 60000, "req-a")
	want(t, r, row{"status": "retried", "fence": "1", "holder": "agent-a", "request_id": "req-a"})

	// Another holder: held, naming who has it, fence NULL.
	h := one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-b", 60000, nil)
	want(t, h, row{"status": "held", "fence": nil, "holder": "agent-a"})
	if h["ttl_ms"] == nil || h["request_id"] == nil || !strings.HasPrefix(h["request_id"].(string), "fg-") {
		t.Errorf("held answer %v: want the time left and the generated request id", h)
	}

	// Over: the old request is never granted again; another one is.
	expire(t, db, "orders/42")
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-a", 60000, "req-a"),
		row{"status": "request_expired", "fence": nil, "holder": nil})
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-b", 60000, "req-b"),
		row{"status": "granted", "fence": "2", "holder": "agent-b"})

	// A floor above the next fence (another coordinator's): nothing granted.
	one(t, db, `CALL fencegate_raise(?, ?, ?, FALSE)`, "floored", "elsewhere", 100)
	before := snapshot(t, db)
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "floored", "agent-a", 60000, "req-f"),
		row{"status": "floor_ahead", "fence": nil, "holder": "elsewhere"})
	if after := snapshot(t, db); after != before {
		t.Fatalf("floor_ahead changed the tables:\nbefore\n%s\nafter\n%s", before, after)
	}
}

func TestProtocolRenew(t *testing.T) {
	db := protocolDB(t)
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "a", 60000, "q")
	// A shorter renewal never shortens the term.
	rn := one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "r", "a", 1, 1000)
	want(t, rn, row{"renewed": "1"})
	if left := atoi(t, rn["ttl_ms"]); left <= 1000 {
		t.Errorf("renewal with 1000 ms of a 60000 ms lease left %d ms: the term was shortened", left)
	}
	// A longer one extends it.
	if left := atoi(t, one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "r", "a", 1, 600000)["ttl_ms"]); left < 599000 {
		t.Errorf("renewal with 600000 ms left %d ms", left)
	}
	// Another holder, a wrong fence: not renewed.
	want(t, one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "r", "b", 1, 1000), row{"renewed": "0", "ttl_ms": nil})
	want(t, one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "r", "a", 2, 1000), row{"renewed": "0", "ttl_ms": nil})
	// An expired lease is never renewed.
	expire(t, db, "r")
	want(t, one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "r", "a", 1, 60000), row{"renewed": "0", "ttl_ms": nil})
	// Nor a released one.
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "s", "a", 60000, "q2")
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "s", "a", 2), row{"released": "1", "reason": nil})
	want(t, one(t, db, `CALL fencegate_renew(?, ?, ?, ?)`, "s", "a", 2, 60000), row{"renewed": "0"})
}

func TestProtocolRelease(t *testing.T) {
	db := protocolDB(t)
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "a", 60000, "q1") // fence 1
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "b", 1), row{"released": "0", "reason": "never_held"})
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "a", 7), row{"released": "0", "reason": "never_held"})
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "nothing", "a", 1), row{"released": "0", "reason": "never_held"})
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "a", 1), row{"released": "1", "reason": nil})
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "a", 1), row{"released": "0", "reason": "already_released"})
	// Free again: b claims; a's stale release frees nothing.
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "b", 60000, "q2"), row{"status": "granted", "fence": "2"})
	before := snapshot(t, db)
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "a", 1), row{"released": "0", "reason": "superseded"})
	if after := snapshot(t, db); after != before {
		t.Fatalf("a stale release changed the tables:\nbefore\n%s\nafter\n%s", before, after)
	}
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "c", 60000, nil), row{"status": "held", "holder": "b"})
	expire(t, db, "r")
	want(t, one(t, db, `CALL fencegate_release(?, ?, ?)`, "r", "b", 2), row{"released": "0", "reason": "expired"})
}

func TestProtocolClaimSet(t *testing.T) {
	db := protocolDB(t)
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "b", "other", 60000, "q0") // fence 1
	before := snapshot(t, db)
	rows, err := call(t, db, `CALL fencegate_claim_set(?, ?, ?, ?)`, `["c","b","a"]`, "me", 60000, "set-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %v", len(rows), rows)
	}
	want(t, rows[0], row{"resource": "c", "status": "not_taken", "fence": nil})
	want(t, rows[1], row{"resource": "b", "status": "held", "holder": "other", "fence": nil})
	want(t, rows[2], row{"resource": "a", "status": "not_taken"})
	if after := snapshot(t, db); after != before {
		t.Fatalf("a set with a held member changed the tables:\nbefore\n%s\nafter\n%s", before, after)
	}

	one(t, db, `CALL fencegate_release(?, ?, ?)`, "b", "other", 1)
	rows, err = call(t, db, `CALL fencegate_claim_set(?, ?, ?, ?)`, `["c","b","a"]`, "me", 60000, "set-1")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []string{"c", "b", "a"} {
		want(t, rows[i], row{"resource": r, "status": "granted", "fence": "2", "holder": "me", "ttl_ms": "60000", "request_id": "set-1"})
	}
	// The retry is answered with the same grant.
	rows, err = call(t, db, `CALL fencegate_claim_set(?, ?, ?, ?)`, `["c","b","a"]`, "me", 60000, "set-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		want(t, rows[i], row{"status": "retried", "fence": "2"})
	}
	// Part of it released: the request is never granted again.
	one(t, db, `CALL fencegate_release(?, ?, ?)`, "a", "me", 2)
	rows, err = call(t, db, `CALL fencegate_claim_set(?, ?, ?, ?)`, `["c","b","a"]`, "me", 60000, "set-1")
	if err != nil {
		t.Fatal(err)
	}
	want(t, rows[0], row{"resource": "c", "status": "not_taken", "fence": nil, "holder": nil})
	want(t, rows[1], row{"resource": "b", "status": "not_taken", "fence": nil})
	want(t, rows[2], row{"resource": "a", "status": "request_expired", "fence": nil})
}

// refusal is a fence check's SIGNAL, read back.
type refusal struct {
	state  string
	detail map[string]any
}

func refused(t *testing.T, err error) refusal {
	t.Helper()
	me, ok := errors.AsType[*gomysql.MySQLError](err)
	if !ok {
		t.Fatalf("error %v, want a refusal", err)
	}
	_, js, ok := strings.Cut(me.Message, ": {")
	if !ok {
		t.Fatalf("refusal message %q has no JSON", me.Message)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte("{"+js), &d); err != nil {
		t.Fatalf("refusal message %q: %v", me.Message, err)
	}
	return refusal{string(me.SQLState[:]), d}
}

// write runs a write and the fence check in one transaction, as a client
// does, and commits; it returns the check's error after rolling back.
func write(t *testing.T, db *sql.DB, resource, holder string, fence int64) error {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO ledger (resource, holder, fence) VALUES (?, ?, ?)`, resource, holder, fence); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, tx, `CALL fencegate_check(?, ?, ?)`, resource, holder, fence); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			t.Fatal(rerr)
		}
		return err
	}
	return tx.Commit()
}

// The seed story: a's lease expires, b is granted and a's late write is
// refused (before b writes), rolled back, and logged with both holders.
func TestProtocolCheckAndRefusalLog(t *testing.T) {
	db := protocolDB(t)
	if _, err := db.Exec(`CREATE TABLE ledger (resource VARCHAR(255), holder VARCHAR(255), fence BIGINT)`); err != nil {
		t.Fatal(err)
	}
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-a", 60000, nil) // fence 1
	if err := write(t, db, "orders/42", "agent-a", 1); err != nil {
		t.Fatal(err)
	}
	expire(t, db, "orders/42")
	want(t, one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "orders/42", "agent-b", 60000, nil), row{"status": "granted", "fence": "2"})

	// The successor's grant raised the floor: a is refused before b writes.
	err := write(t, db, "orders/42", "agent-a", 1)
	r := refused(t, err)
	if r.state != "FG001" {
		t.Fatalf("SQLSTATE %s, want FG001 (%v)", r.state, err)
	}
	wantDetail := map[string]any{"resource": "orders/42", "fence": 1.0, "holder": "agent-a", "floor": 2.0, "floor_holder": "agent-b"}
	for k, v := range wantDetail {
		if r.detail[k] != v {
			t.Errorf("detail %s = %v (%T), want %v (%v)", k, r.detail[k], r.detail[k], v, r.detail)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ledger WHERE holder = 'agent-a'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("agent-a's rows = %d, %v; want 1 (the refused write rolled back)", n, err)
	}
	// The record, after the rollback, by the one documented call.
	lg := one(t, db, `CALL fencegate_log_refusal(?, ?, ?)`, "orders/42", "agent-a", 1)
	want(t, lg, row{"logged": "1", "floor": "2", "floor_holder": "agent-b", "not_issued": "0"})
	var holder, floorHolder string
	var fence, floor int64
	if err := db.QueryRow(`SELECT holder, fence, floor, floor_holder FROM fencegate_rejection WHERE seq = ?`, lg["seq"]).
		Scan(&holder, &fence, &floor, &floorHolder); err != nil {
		t.Fatal(err)
	}
	if holder != "agent-a" || fence != 1 || floor != 2 || floorHolder != "agent-b" {
		t.Fatalf("record %s %d %d %s, want agent-a 1 2 agent-b", holder, fence, floor, floorHolder)
	}
	// b writes.
	if err := write(t, db, "orders/42", "agent-b", 2); err != nil {
		t.Fatal(err)
	}

	// The log cannot be forged: a fence that was not refused is not logged.
	before := snapshot(t, db)
	want(t, one(t, db, `CALL fencegate_log_refusal(?, ?, ?)`, "orders/42", "agent-b", 2), row{"logged": "0", "seq": nil})
	if after := snapshot(t, db); after != before {
		t.Fatalf("a log of no refusal changed the tables")
	}
}

// A forged fence (above the floor, never issued) and a fence issued to
// someone else are refused with FG002; a forged fence below the floor with
// FG001. None raises the floor.
func TestProtocolForgedFence(t *testing.T) {
	db := protocolDB(t)
	if _, err := db.Exec(`CREATE TABLE ledger (resource VARCHAR(255), holder VARCHAR(255), fence BIGINT)`); err != nil {
		t.Fatal(err)
	}
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "a", 60000, nil) // fence 1
	if err := write(t, db, "r", "a", 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		holder string
		fence  int64
		state  string
	}{
		{"mallory", 99, "FG002"},
		{"mallory", 1, "FG002"}, // a's fence, another holder
		{"a", 5, "FG002"},
		{"never", 5, "FG002"},
	} {
		before := snapshot(t, db)
		r := refused(t, write(t, db, "r", c.holder, c.fence))
		if r.state != c.state {
			t.Errorf("%s %d: SQLSTATE %s, want %s", c.holder, c.fence, r.state, c.state)
		}
		if r.detail["floor"] != nil || r.detail["floor_holder"] != nil {
			t.Errorf("%s %d: FG002's detail %v names a floor", c.holder, c.fence, r.detail)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("a refused check changed the tables")
		}
	}
	lg := one(t, db, `CALL fencegate_log_refusal(?, ?, ?)`, "r", "mallory", 99)
	want(t, lg, row{"logged": "1", "not_issued": "1", "floor": "1", "floor_holder": "a"})

	// Admit answers instead of raising an error.
	want(t, one(t, db, `CALL fencegate_admit(?, ?, ?)`, "r", "mallory", 99), row{"admitted": "0", "floor": "1", "floor_holder": "a"})
	want(t, one(t, db, `CALL fencegate_admit(?, ?, ?)`, "r", "a", 1), row{"admitted": "1", "floor": "1", "floor_holder": "a"})
}

// A refusal's message fits the server's limit whatever the names: 512 bytes
// on MariaDB (the names shortened, "truncated": true), 128 on MySQL.
func TestProtocolLongNamesRefusal(t *testing.T) {
	db := protocolDB(t)
	long := strings.Repeat("é", 128)                                       // 256 bytes
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, long, long, 60000, nil) // fence 1
	expire(t, db, long)
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, long, strings.Repeat("b", 256), 60000, nil) // fence 2
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = call(t, tx, `CALL fencegate_check(?, ?, ?)`, long, long, 1)
	r := refused(t, err)
	if r.state != "FG001" || r.detail["truncated"] != true || r.detail["fence"] != 1.0 || r.detail["floor"] != 2.0 {
		t.Fatalf("refusal %s %v: want FG001 with fence 1, floor 2, truncated", r.state, r.detail)
	}
}

func atoi(t *testing.T, v any) int64 {
	t.Helper()
	s, _ := v.(string)
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%v is not a number", v)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// A confined write (an XA transaction: fencegatecli, the MCP server) runs
// CALL fencegate_check like any statement, and its refusal comes back as
// the server's FG001 error; a procedure that begins a transaction of its
// own is refused there by the server.
func TestProtocolCallInConfinedWrite(t *testing.T) {
	d := open(t)
	db := d.DB()
	ctx := context.Background()
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "a", 60000, nil) // fence 1
	expire(t, db, "r")
	one(t, db, `CALL fencegate_claim(?, ?, ?, ?)`, "r", "b", 60000, nil) // fence 2
	if err := d.CheckStatement(`CALL fencegate_check(?, ?, ?)`); err != nil {
		t.Fatalf("CheckStatement(CALL) = %v, want nil", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = d.Confine(ctx, conn, func(s sqlstore.ConfinedSession) error {
		tx, err := s.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, _, err := s.Exec(ctx, `CALL fencegate_check(?, ?, ?)`, []any{"r", "b", int64(2)}); err != nil {
			t.Errorf("confined CALL fencegate_check of the live fence: %v", err)
		}
		_, _, err = s.Exec(ctx, `CALL fencegate_check(?, ?, ?)`, []any{"r", "a", int64(1)})
		if got := sqlState(err); got != "FG001" {
			t.Errorf("confined CALL fencegate_check of the stale fence: %v (SQLSTATE %q), want FG001", err, got)
		}
		_, _, err = s.Exec(ctx, `CALL fencegate_admit(?, ?, ?)`, []any{"r", "b", int64(2)})
		if err == nil {
			t.Errorf("confined CALL fencegate_admit (START TRANSACTION inside) succeeded, want the server's refusal")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every procedure the MySQL migrations create is documented in docs/SQL.md's
// MySQL section, and every procedure Go calls is one of them.
func TestProtocolProceduresDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/SQL.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## MySQL / MariaDB\n")
	if !ok {
		t.Fatal("docs/SQL.md has no MySQL / MariaDB section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	created := map[string]bool{}
	files, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		text, err := fs.ReadFile(migrations.FS(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^CREATE PROCEDURE (\w+)`).FindAllStringSubmatch(string(text), -1) {
			created[m[1]] = true
			if !strings.Contains(section, "`"+m[1]+"`") && !strings.Contains(section, " "+m[1]+"(") && !strings.Contains(section, "`"+m[1]+"(") {
				t.Errorf("%s creates procedure %s, which docs/SQL.md's MySQL section does not list", f, m[1])
			}
		}
	}
	for _, p := range []string{"fencegate_raise", "fencegate_log_refusal", "fencegate_renew_lease", "fencegate_release_lease"} { // sqlstore/mysql/queries.go
		if !created[p] {
			t.Errorf("Go calls %s, which no migration creates", p)
		}
	}
}
