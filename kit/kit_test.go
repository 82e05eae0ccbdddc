package kit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"crypto/rand"
	"encoding/hex"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/kit/kitdb"
	"github.com/fencegate/fencegate/kit/scenario"
)

// TestKit is the Go runner: every scenario of scenarios.json on Postgres,
// on MariaDB/MySQL and on SQLite (docs/SQL.md's statements through
// database/sql and modernc.org/sqlite), each in a fresh migrated schema,
// database or file (FENCEGATE_KIT_SCHEMA_POSTGRES / _MYSQL / _SQLITE name
// an existing one instead, as kit/mutant.sh does). A server that is unset
// or unreachable fails the test: the kit never skips.
func TestKit(t *testing.T) {
	f, err := scenario.Load("scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	run := newRunID()
	for _, dialect := range kitdb.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			name := kitdb.ExistingName(dialect)
			if name == "" {
				name, err = kitdb.Create(ctx, dialect)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
					defer cancel()
					if err := kitdb.Drop(dctx, dialect, name); err != nil {
						t.Errorf("%s may be left behind: %v", name, err)
					}
				})
			}
			db, err := kitdb.Open(ctx, dialect, name)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var c interface {
				do(context.Context, *scenario.Env, scenario.Step) (map[string]any, error)
			} = &client{db: db, mysql: dialect == "mysql"}
			if dialect == "sqlite" {
				q, err := kitdb.SQLiteStatements("..")
				if err != nil {
					t.Fatal(err)
				}
				conn, err := db.Conn(ctx) // one connection: BEGIN IMMEDIATE and COMMIT are statements on it
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				c = &sqliteClient{conn: conn, q: q}
			}
			for _, sc := range f.Scenarios {
				t.Run(sc.Name, func(t *testing.T) {
					env := &scenario.Env{Prefix: fmt.Sprintf("kit-%s-go-%s-", run, sc.Name), Vars: map[string]any{}}
					for i, st := range sc.Steps {
						if st.Op == "sleep" {
							time.Sleep(time.Duration(st.Ms) * time.Millisecond) // waiting past a term is the scenario
							continue
						}
						got, err := c.do(ctx, env, st)
						if err != nil {
							t.Fatalf("step %d (%s): %v", i+1, st.Op, err)
						}
						if bad := env.Check(st.Expect, got); len(bad) > 0 {
							t.Fatalf("step %d (%s):\n\t%s", i+1, st.Op, strings.Join(bad, "\n\t"))
						}
						if err := env.Save(st.Save, got); err != nil {
							t.Fatalf("step %d (%s): %v", i+1, st.Op, err)
						}
					}
				})
			}
		})
	}
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// client runs the protocol's operations through database/sql: pgx's
// stdlib on Postgres, go-sql-driver/mysql on MariaDB/MySQL.
type client struct {
	db    *sql.DB
	mysql bool
}

// call is an operation's statement on each database.
func (c *client) call(pgSelect, fn string, n int) string {
	if c.mysql {
		return "CALL " + fn + "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
	}
	ph := make([]string, n)
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	return "SELECT " + pgSelect + " FROM " + fn + "(" + strings.Join(ph, ", ") + ")"
}

func (c *client) do(ctx context.Context, env *scenario.Env, st scenario.Step) (map[string]any, error) {
	var args []any
	name := func(v any, resource bool) {
		s, err := env.Name(v, resource)
		if err != nil {
			panic(err)
		}
		args = append(args, s)
	}
	num := func(v any) {
		n, err := env.Int(v)
		if err != nil {
			panic(err)
		}
		args = append(args, n)
	}
	switch st.Op {
	case "version":
		q := "SELECT fencegate_protocol_version() AS version"
		if c.mysql {
			q = "CALL fencegate_protocol_version()"
		}
		return c.one(ctx, c.db, q, nil, "version")
	case "claim", "claim_set":
		if st.Op == "claim" {
			name(st.Resource, true)
		} else {
			var rs []string
			for _, r := range st.Resources {
				s, err := env.Name(r, true)
				if err != nil {
					return nil, err
				}
				rs = append(rs, s)
			}
			if c.mysql {
				b, _ := json.Marshal(rs)
				args = append(args, string(b))
			} else {
				args = append(args, rs)
			}
		}
		name(st.Holder, false)
		num(st.TTLms)
		if st.RequestID != nil {
			args = append(args, *st.RequestID)
		} else {
			args = append(args, nil)
		}
		rows, err := c.rows(ctx, c.db, c.call("status, fence, holder, ttl_ms, request_id", "fencegate_"+st.Op, 4), args)
		if err != nil {
			return errAnswer(err), nil
		}
		if st.Op == "claim" {
			if len(rows) != 1 {
				return nil, fmt.Errorf("fencegate_claim answered %d rows, want 1", len(rows))
			}
			return rows[0], nil
		}
		list := make([]any, len(rows))
		for i, r := range rows {
			list[i] = r
		}
		return map[string]any{"rows": list}, nil
	case "renew":
		name(st.Resource, true)
		name(st.Holder, false)
		num(st.Fence)
		num(st.TTLms)
		return c.row(ctx, c.call("renewed, ttl_ms", "fencegate_renew", 4), args)
	case "release":
		name(st.Resource, true)
		name(st.Holder, false)
		num(st.Fence)
		return c.row(ctx, c.call("released, reason", "fencegate_release", 3), args)
	case "admit":
		name(st.Resource, true)
		name(st.Holder, false)
		num(st.Fence)
		return c.row(ctx, c.call("admitted, floor, floor_holder", "fencegate_admit", 3), args)
	case "log_refusal":
		name(st.Resource, true)
		name(st.Holder, false)
		num(st.Fence)
		return c.one(ctx, c.db, c.call("fencegate_log_refusal", "fencegate_log_refusal", 3), args, "logged")
	case "write":
		name(st.Resource, true)
		name(st.Holder, false)
		num(st.Fence)
		return c.write(ctx, args)
	case "effects", "rejections", "counts":
		return readOnly(ctx, c.db, env, st, c.rebind("$1"))
	}
	return nil, fmt.Errorf("unknown op %q", st.Op)
}

// readOnly answers the ops that read the tables (effects, rejections,
// counts) on any database; ph is its placeholder for the resource.
func readOnly(ctx context.Context, db querier, env *scenario.Env, st scenario.Step, ph string) (map[string]any, error) {
	var args []any
	if st.Op != "counts" {
		r, err := env.Name(st.Resource, true)
		if err != nil {
			return nil, err
		}
		args = append(args, r)
	}
	switch st.Op {
	case "effects":
		rows, _, err := query(ctx, db, "SELECT holder FROM kit_effect WHERE resource = "+ph+" ORDER BY seq", args)
		if err != nil {
			return nil, err
		}
		holders := []any{}
		for _, r := range rows {
			holders = append(holders, r["holder"])
		}
		return map[string]any{"count": int64(len(rows)), "holders": holders}, nil
	case "rejections":
		rows, _, err := query(ctx, db, "SELECT resource, fence, holder, floor, floor_holder FROM fencegate_rejection WHERE resource = "+ph+" ORDER BY seq", args)
		if err != nil {
			return nil, err
		}
		got := map[string]any{"count": int64(len(rows))}
		if len(rows) > 0 {
			got["last"] = rows[len(rows)-1]
		}
		return got, nil
	}
	rows, _, err := query(ctx, db, "SELECT (SELECT count(*) FROM fencegate_lease) AS lease, (SELECT count(*) FROM fencegate_floor) AS floor, "+
		"(SELECT count(*) FROM fencegate_request) AS request, (SELECT count(*) FROM fencegate_rejection) AS rejection, (SELECT count(*) FROM kit_effect) AS effect", nil)
	if err != nil {
		return nil, err
	}
	r := rows[0]
	return map[string]any{"counts": fmt.Sprintf("lease=%v floor=%v request=%v rejection=%v effect=%v", r["lease"], r["floor"], r["request"], r["rejection"], r["effect"])}, nil
}

// write is a fenced write: in one transaction, the effect's row and
// fencegate_check, then COMMIT; a refusal rolls it all back.
func (c *client) write(ctx context.Context, args []any) (map[string]any, error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, c.rebind("INSERT INTO kit_effect (resource, holder, fence) VALUES ($1, $2, $3)"), args...); err != nil {
		return errAnswer(err), nil
	}
	q := "SELECT fencegate_check($1, $2, $3) AS floor"
	if c.mysql {
		q = "CALL fencegate_check(?, ?, ?)"
	}
	got, err := c.one(ctx, tx, q, args, "floor")
	if err != nil || got["error"] != nil {
		return got, err
	}
	if err := tx.Commit(); err != nil {
		return errAnswer(err), nil
	}
	return got, nil
}

func (c *client) rebind(q string) string {
	if !c.mysql {
		return q
	}
	for i := 9; i >= 1; i-- {
		q = strings.ReplaceAll(q, fmt.Sprintf("$%d", i), "?")
	}
	return q
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// row runs an operation answering one row; an error is an answer.
func (c *client) row(ctx context.Context, q string, args []any) (map[string]any, error) {
	rows, err := c.rows(ctx, c.db, q, args)
	if err != nil {
		return errAnswer(err), nil
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("%s answered %d rows, want 1", q, len(rows))
	}
	return rows[0], nil
}

// one runs an operation answering one value, under the name key.
func (c *client) one(ctx context.Context, db querier, q string, args []any, key string) (map[string]any, error) {
	rows, cols, err := query(ctx, db, q, args)
	if err != nil {
		return errAnswer(err), nil
	}
	if len(rows) != 1 || len(cols) < 1 {
		return nil, fmt.Errorf("%s answered %d rows, want 1", q, len(rows))
	}
	return map[string]any{key: rows[0][cols[0]]}, nil
}

func (c *client) rows(ctx context.Context, db querier, q string, args []any) ([]map[string]any, error) {
	rows, _, err := query(ctx, db, q, args)
	return rows, err
}

// query reads the first result set (a CALL's), draining the rest.
func query(ctx context.Context, db querier, q string, args []any) ([]map[string]any, []string, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, nil, err
	}
	for i := range cols {
		cols[i] = strings.ToLower(cols[i])
	}
	var out []map[string]any
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		m := map[string]any{}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			m[cols[i]] = v
		}
		out = append(out, m)
	}
	for rs.NextResultSet() {
		for rs.Next() {
		}
	}
	return out, cols, rs.Err()
}

// errAnswer turns a database error into an answer: its SQLSTATE, and the
// refusal's detail (Postgres: DETAIL; MySQL: the JSON in the message).
func errAnswer(err error) map[string]any {
	var detail any
	var pe *pgconn.PgError
	var me *gomysql.MySQLError
	switch {
	case errors.As(err, &pe):
		_ = json.Unmarshal([]byte(pe.Detail), &detail)
		return map[string]any{"error": pe.Code, "detail": detail, "message": pe.Message}
	case errors.As(err, &me):
		if i := strings.IndexByte(me.Message, '{'); i >= 0 {
			_ = json.Unmarshal([]byte(me.Message[i:]), &detail)
		}
		return map[string]any{"error": string(me.SQLState[:]), "detail": detail, "message": me.Message}
	}
	return map[string]any{"error": "client: " + err.Error()}
}
