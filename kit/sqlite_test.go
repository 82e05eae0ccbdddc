package kit_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fencegate/fencegate/kit/scenario"
)

// sqliteClient runs the protocol's operations on SQLite: the statements of
// docs/SQL.md (kitdb.SQLiteStatements), in the order it gives, each
// operation in one BEGIN IMMEDIATE transaction on one connection.
type sqliteClient struct {
	conn *sql.Conn
	q    map[string]string
}

// errRefused is bad input, refused before any statement runs (22023).
var errRefused = errors.New("bad input")

var control = regexp.MustCompile("[\x00-\x1f\x7f\u0080-\u009f]")

// checkName is docs/SQL.md's rule for a name, which the client checks on
// SQLite before BEGIN.
func checkName(field, v string, noPath bool) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s must not be empty", errRefused, field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", errRefused, field)
	case len(v) > 256:
		return fmt.Errorf("%w: %s is longer than 256 bytes", errRefused, field)
	case control.MatchString(v):
		return fmt.Errorf("%w: %s contains a control character", errRefused, field)
	case noPath && strings.HasPrefix(v, "path:"):
		return fmt.Errorf("%w: %s is a path claim", errRefused, field)
	}
	return nil
}

// args are an operation's arguments; a zero fence or ttl is unchecked.
type args struct {
	resource, holder, request string
	fence, ttl                int64
	checkFence, checkTTL      bool
	checkRequest              bool // a claim's
	noPath                    bool
}

func (a args) check() error {
	if err := checkName("resource", a.resource, a.noPath); err != nil {
		return err
	}
	if err := checkName("holder", a.holder, false); err != nil {
		return err
	}
	if a.checkFence && a.fence <= 0 {
		return fmt.Errorf("%w: fence %d is not positive", errRefused, a.fence)
	}
	if a.checkTTL && (a.ttl <= 0 || a.ttl > 86400000) {
		return fmt.Errorf("%w: ttl_ms %d is not in 1..86400000", errRefused, a.ttl)
	}
	if !a.checkRequest {
		return nil
	}
	if a.request == "" || len(a.request) > 128 || strings.IndexFunc(a.request, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		// docs/SQL.md's Request ids: 1 to 128 bytes of 0x21 to 0x7E
		return fmt.Errorf("%w: request_id is not 1 to 128 bytes of printable ASCII without spaces", errRefused)
	}
	return nil
}

func refusedAnswer(err error) map[string]any {
	return map[string]any{"error": "22023", "detail": nil, "message": err.Error()}
}

// tx runs body in one BEGIN IMMEDIATE transaction: COMMIT, or ROLLBACK when
// it fails or asks to.
func (c *sqliteClient) tx(ctx context.Context, body func() (map[string]any, bool, error)) (map[string]any, error) {
	if _, err := c.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	got, rollback, err := body()
	end := "COMMIT"
	if err != nil || rollback {
		end = "ROLLBACK"
	}
	if _, eerr := c.conn.ExecContext(ctx, end); eerr != nil && err == nil {
		err = eerr
	}
	return got, err
}

// row runs the statement name and scans its one row into dst; false when
// it answers none.
func (c *sqliteClient) row(ctx context.Context, name string, dst []any, a ...any) (bool, error) {
	q, err := c.statement(name)
	if err != nil {
		return false, err
	}
	err = c.conn.QueryRowContext(ctx, q, a...).Scan(dst...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return true, nil
}

// statement is docs/SQL.md's statement name: an error when the doc has
// none by that name, where an empty text would run as no statement at all
// (no row, nothing changed) and the scenario skip what it checks.
func (c *sqliteClient) statement(name string) (string, error) {
	q, ok := c.q[name]
	if !ok || strings.TrimSpace(q) == "" {
		return "", fmt.Errorf("docs/SQL.md's SQLite section has no statement %s", name)
	}
	return q, nil
}

func (c *sqliteClient) exec(ctx context.Context, name string, a ...any) (int64, error) {
	q, err := c.statement(name)
	if err != nil {
		return 0, err
	}
	r, err := c.conn.ExecContext(ctx, q, a...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return r.RowsAffected()
}

// lease is LeaseGetForUpdate's, LeaseInsert's, … row: its last column is
// the clock (or granted_at).
type lease struct {
	resource, holder, request     string
	fence, granted, expires, last int64
	released                      bool
}

func (l *lease) dst() []any {
	return []any{&l.resource, &l.holder, &l.fence, &l.request, &l.granted, &l.expires, &l.released, &l.last}
}

func answer(status string, fence any, holder any, ttl any, request string) map[string]any {
	return map[string]any{"status": status, "fence": fence, "holder": holder, "ttl_ms": ttl, "request_id": request}
}

// judge is a claim's steps 1 to 5 for one resource: an answer (nil when
// free) and the lease row, if any.
func (c *sqliteClient) judge(ctx context.Context, a args) (map[string]any, *lease, error) {
	if _, err := c.exec(ctx, "ClockTick"); err != nil {
		return nil, nil, err
	}
	var l lease
	found, err := c.row(ctx, "LeaseGetForUpdate", l.dst(), a.resource)
	if err != nil {
		return nil, nil, err
	}
	live := found && !l.released && l.expires > l.last
	if live && l.holder == a.holder && l.request == a.request {
		return answer("retried", l.fence, l.holder, (l.expires-l.last)/1000, a.request), &l, nil
	}
	var f int64
	if used, err := c.row(ctx, "RequestFence", []any{&f}, a.resource, a.request); err != nil || used {
		return answer("request_expired", nil, nil, nil, a.request), &l, err
	}
	if live {
		return answer("held", nil, l.holder, (l.expires-l.last)/1000, a.request), &l, nil
	}
	if !found {
		return nil, nil, nil
	}
	return nil, &l, nil
}

// grant is a claim's steps 7 to 9 for one resource: nil when a floor from
// outside is ahead of the fence.
func (c *sqliteClient) grant(ctx context.Context, a args, fence int64, old *lease) (map[string]any, error) {
	if _, err := c.exec(ctx, "ClockTick"); err != nil {
		return nil, err
	}
	stmt := "LeaseInsert"
	if old != nil {
		stmt = "LeaseReplace"
	}
	var l lease
	if ok, err := c.row(ctx, stmt, l.dst(), a.resource, a.holder, fence, a.request, a.ttl*1000); err != nil || !ok {
		return nil, fmt.Errorf("%s answered no lease: %v", stmt, err)
	}
	if _, err := c.exec(ctx, "RequestInsert", a.resource, a.request, fence); err != nil {
		return nil, err
	}
	var floor int64
	var fh string
	ok, err := c.row(ctx, "FloorHeld", []any{&floor, &fh}, a.resource, fence, a.holder)
	if err == nil && !ok {
		_, err = c.row(ctx, "FloorRaise", []any{&floor, &fh}, a.resource, fence, a.holder)
	}
	if err != nil || floor != fence {
		return nil, err
	}
	return answer("granted", fence, a.holder, (l.expires-l.last)/1000, a.request), nil
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func (c *sqliteClient) claim(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		got, old, err := c.judge(ctx, a)
		if err != nil || got != nil {
			return got, false, err
		}
		var fence int64
		if _, err := c.row(ctx, "FenceNext", []any{&fence}); err != nil {
			return nil, true, err
		}
		got, err = c.grant(ctx, a, fence, old)
		if err == nil && got == nil {
			return answer("floor_ahead", nil, nil, nil, a.request), true, nil
		}
		return got, false, err
	})
}

func (c *sqliteClient) claimSet(ctx context.Context, resources []string, a args) (map[string]any, error) {
	order := slices.Clone(resources)
	slices.Sort(order) // Go's strings compare by bytes
	rows := func(m map[string]map[string]any, dflt map[string]any) map[string]any {
		list := []any{}
		for _, r := range resources {
			if x, ok := m[r]; ok {
				list = append(list, x)
			} else {
				list = append(list, dflt)
			}
		}
		return map[string]any{"rows": list}
	}
	return c.tx(ctx, func() (map[string]any, bool, error) {
		answers, olds := map[string]map[string]any{}, map[string]*lease{}
		retried := 0
		for _, r := range order {
			m := a
			m.resource = r
			got, old, err := c.judge(ctx, m)
			if err != nil {
				return nil, true, err
			}
			olds[r] = old
			if got != nil {
				answers[r] = got
				if got["status"] == "retried" {
					retried++
				}
			}
		}
		if retried == len(order) {
			return rows(answers, nil), false, nil
		}
		if len(answers) > 0 {
			return rows(answers, answer("not_taken", nil, nil, nil, a.request)), true, nil
		}
		var fence int64
		if _, err := c.row(ctx, "FenceNext", []any{&fence}); err != nil {
			return nil, true, err
		}
		for _, r := range order {
			m := a
			m.resource = r
			got, err := c.grant(ctx, m, fence, olds[r])
			if err != nil {
				return nil, true, err
			}
			if got == nil {
				return rows(nil, answer("floor_ahead", nil, nil, nil, a.request)), true, nil
			}
			answers[r] = got
		}
		return rows(answers, nil), false, nil
	})
}

func (c *sqliteClient) renew(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		if _, err := c.exec(ctx, "ClockTick"); err != nil {
			return nil, true, err
		}
		var l lease
		ok, err := c.row(ctx, "LeaseRenew", l.dst(), a.resource, a.holder, a.fence, a.ttl*1000)
		if err != nil || !ok {
			return map[string]any{"renewed": false, "ttl_ms": nil}, false, err
		}
		return map[string]any{"renewed": true, "ttl_ms": (l.expires - l.last) / 1000}, false, nil
	})
}

func (c *sqliteClient) release(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		if _, err := c.exec(ctx, "ClockTick"); err != nil {
			return nil, true, err
		}
		n, err := c.exec(ctx, "LeaseRelease", a.resource, a.holder, a.fence)
		if err != nil || n == 1 {
			return map[string]any{"released": true, "reason": nil}, false, err
		}
		var l lease // why it freed nothing
		found, err := c.row(ctx, "LeaseGet", l.dst(), a.resource)
		reason := "never_held"
		switch {
		case !found:
		case l.fence == a.fence && l.holder == a.holder && l.released:
			reason = "already_released"
		case l.fence == a.fence && l.holder == a.holder:
			reason = "expired"
		case l.fence > a.fence:
			reason = "superseded"
		}
		return map[string]any{"released": false, "reason": reason}, false, err
	})
}

// check is the check's steps in the caller's transaction: admitted, and
// the floor and its holder (nil for a fence never issued, FG002's case,
// rather than below the floor, FG001's).
func (c *sqliteClient) check(ctx context.Context, a args) (bool, any, any, error) {
	var floor int64
	var fh string
	ok, err := c.row(ctx, "FloorHeldVerified", []any{&floor, &fh}, a.resource, a.fence, a.holder)
	if err != nil || ok { // a row: admitted, the fence is the floor already
		return ok, floor, fh, err
	}
	ok, err = c.row(ctx, "FloorRaiseVerified", []any{&floor, &fh}, a.resource, a.fence, a.holder)
	if err != nil {
		return false, nil, nil, err
	}
	if ok {
		return floor == a.fence, floor, fh, nil
	}
	var res string
	var at int64
	found, err := c.row(ctx, "FloorGet", []any{&res, &floor, &fh, &at}, a.resource)
	if err != nil || !found || a.fence >= floor {
		return false, nil, nil, err
	}
	return false, floor, fh, nil
}

func (c *sqliteClient) admit(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		ok, floor, fh, err := c.check(ctx, a)
		return map[string]any{"admitted": ok, "floor": floor, "floor_holder": fh}, false, err
	})
}

func (c *sqliteClient) write(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		if _, err := c.conn.ExecContext(ctx, "INSERT INTO kit_effect (resource, holder, fence) VALUES (?1, ?2, ?3)", a.resource, a.holder, a.fence); err != nil {
			return nil, true, err
		}
		ok, floor, fh, err := c.check(ctx, a)
		if err != nil || ok {
			return map[string]any{"floor": floor}, false, err
		}
		code := "FG002"
		if floor != nil {
			code = "FG001"
		}
		detail := map[string]any{"resource": a.resource, "fence": a.fence, "holder": a.holder, "floor": floor, "floor_holder": fh}
		return map[string]any{"error": code, "detail": detail, "message": "refused"}, true, nil
	})
}

func (c *sqliteClient) logRefusal(ctx context.Context, a args) (map[string]any, error) {
	return c.tx(ctx, func() (map[string]any, bool, error) {
		var res string
		var floor, at int64
		var fh string
		found, err := c.row(ctx, "FloorGet", []any{&res, &floor, &fh, &at}, a.resource)
		if err != nil {
			return nil, true, err
		}
		notIssued := 0
		if !found || a.fence >= floor {
			var l lease
			held, err := c.row(ctx, "LeaseGet", l.dst(), a.resource)
			if err != nil {
				return nil, true, err
			}
			if held && l.fence == a.fence && l.holder == a.holder {
				return map[string]any{"logged": false}, false, nil // the check admits it: no refusal to record
			}
			notIssued = 1
		}
		var seq int64
		_, err = c.row(ctx, "RejectionInsert", []any{&seq, &at}, a.resource, a.fence, a.holder, floor, fh, notIssued)
		return map[string]any{"logged": true}, false, err
	})
}

func (c *sqliteClient) do(ctx context.Context, env *scenario.Env, st scenario.Step) (map[string]any, error) {
	var a args
	var err error
	name := func(v any, resource bool) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = env.Name(v, resource)
		return s
	}
	num := func(v any) int64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = env.Int(v)
		return n
	}
	switch st.Op {
	case "claim", "claim_set", "renew", "release", "admit", "log_refusal", "write":
		if st.Op != "claim_set" {
			a.resource = name(st.Resource, true)
		}
		a.holder = name(st.Holder, false)
		if st.Fence != nil {
			a.fence, a.checkFence = num(st.Fence), true
		}
		if st.TTLms != nil {
			a.ttl, a.checkTTL = num(st.TTLms), true
		}
		a.noPath = st.Op == "claim" || st.Op == "claim_set" || st.Op == "admit" || st.Op == "write"
		if err != nil {
			return nil, err
		}
	}
	if st.Op == "claim" || st.Op == "claim_set" {
		a.request, a.checkRequest = newRequestID(), true
		if st.RequestID != nil {
			a.request = *st.RequestID
		}
	}
	switch st.Op {
	case "version":
		// Not a statement of the protocol: the schema's goose version, which
		// docs/SQL.md maps to protocol version 1.
		var v int64
		if err := c.conn.QueryRowContext(ctx, "SELECT max(version_id) FROM fencegate_goose_version").Scan(&v); err != nil {
			return nil, err
		}
		if v != 1 {
			return map[string]any{"version": fmt.Sprintf("goose version %d", v)}, nil
		}
		return map[string]any{"version": int64(1)}, nil
	case "claim_set":
		var rs []string
		seen := map[string]bool{}
		var bad error
		for _, r := range st.Resources {
			s := name(r, true)
			if seen[s] {
				bad = fmt.Errorf("%w: %q repeated", errRefused, s)
			}
			seen[s] = true
			m := a
			m.resource = s
			if e := m.check(); e != nil && bad == nil {
				bad = e
			}
			rs = append(rs, s)
		}
		if err != nil {
			return nil, err
		}
		if len(rs) == 0 && bad == nil {
			bad = fmt.Errorf("%w: no resources", errRefused)
		}
		if bad != nil {
			return refusedAnswer(bad), nil
		}
		return c.claimSet(ctx, rs, a)
	case "claim", "renew", "release", "admit", "log_refusal", "write":
		if err := a.check(); err != nil {
			return refusedAnswer(err), nil
		}
		return map[string]func(context.Context, args) (map[string]any, error){
			"claim": c.claim, "renew": c.renew, "release": c.release, "admit": c.admit, "log_refusal": c.logRefusal, "write": c.write,
		}[st.Op](ctx, a)
	case "effects", "rejections", "counts":
		return readOnly(ctx, c.conn, env, st, "?1")
	}
	return nil, fmt.Errorf("unknown op %q", st.Op)
}
