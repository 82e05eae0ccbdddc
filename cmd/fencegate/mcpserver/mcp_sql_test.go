package mcpserver

import (
	"slices"
	"strings"
	"testing"
)

func TestMCPWriteSQL(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		db.createLog(t)
		a := newMCP(t, db.dsn, Config{Holder: "agent-a", AllowSQL: true})
		b := newMCP(t, db.dsn, Config{Holder: "agent-b", AllowSQL: true})
		ca := callOK[claimOutput](t, a.ClientSession, "claim", args{"resource": "log"})

		// JSON numbers bind to a BIGINT parameter, strings to TEXT.
		w := callOK[writeOutput](t, a.ClientSession, "write", args{"token": ca.Token, "sql": []any{
			args{"query": db.insert, "args": []any{ca.Fence, "agent-a"}},
			args{"query": db.insert, "args": []any{ca.Fence, "agent-a again"}},
		}})
		if !w.Written || w.Kind != "sql" || w.Statements != 2 || w.RowsAffected != 2 {
			t.Fatalf("write: %+v", w)
		}

		// Bad statements commit nothing, and the SQL cannot end the fenced
		// transaction.
		type badCase struct {
			name string
			sql  any
			msg  []string
		}
		cases := []badCase{
			{"empty list", []any{}, []string{"sql is empty"}},
			{"unknown resource", nil, []string{"never leased"}},
			{"empty query", []any{args{"query": " "}}, []string{"statement 1 is empty"}},
			{"no query", []any{args{"args": []any{1}}}, []string{"query"}},
			{"object argument", []any{args{"query": db.insert, "args": []any{args{"x": 1}, "h"}}}, []string{"statement 1, argument 1", "want a string, number"}},
			{"commit", []any{args{"query": db.insert, "args": []any{ca.Fence, "x"}}, args{"query": "COMMIT"}}, []string{"statement 2", "nothing was committed"}},
			{"failing statement", []any{args{"query": db.insert, "args": []any{ca.Fence, "x"}}, args{"query": "INSERT INTO nowhere VALUES (1)"}}, []string{"statement 2", "nothing was committed"}},
			{"wrong arguments", []any{args{"query": db.insert, "args": []any{ca.Fence}}}, []string{"statement 1", "nothing was committed"}},
		}
		if strings.HasPrefix(db.dsn, "mysql") { // Postgres and SQLite hold DDL in a transaction
			cases = append(cases, badCase{"DDL", []any{args{"query": db.insert, "args": []any{ca.Fence, "x"}}, args{"query": "CREATE TABLE t2 (a INT)"}},
				[]string{"statement 2", "CREATE is DDL", "commit it implicitly", "create and alter tables outside the gate", "nothing was committed"}})
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				token := ca.Token
				if c.sql == nil {
					token, c.sql = "fg1:1:never:agent-a", []any{args{"query": db.insert, "args": []any{1, "x"}}}
				}
				callErr(t, a.ClientSession, "write", args{"token": token, "sql": c.sql}, c.msg...)
			})
		}
		if got := db.logRows(t); !slices.Equal(got, []int64{ca.Fence, ca.Fence}) {
			t.Fatalf("log rows %v after the refused statements", got)
		}

		// B supersedes A: A's SQL is refused, with the rejection record.
		callOK[releaseOutput](t, a.ClientSession, "release", args{"token": ca.Token})
		cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"resource": "log"})
		res := call(t, a.ClientSession, "write", args{"token": ca.Token, "sql": []any{args{"query": db.insert, "args": []any{ca.Fence, "late"}}}})
		if !res.IsError {
			t.Fatalf("stale SQL write: %s", text(res))
		}
		if out := decode[writeOutput](t, res); out.Kind != "sql" || out.Refusal == nil || out.Refusal.Floor != cb.Fence || out.Refusal.FloorHolder != "agent-b" {
			t.Fatalf("stale SQL write: %+v", out)
		}
		if got := db.logRows(t); len(got) != 2 {
			t.Fatalf("log rows %v after the stale write", got)
		}
	})
}
