package mcpserver

import (
	"testing"

	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// On a guarded table (package guard, Postgres), write's SQL passes for the
// token's resource, and only for it.
func TestMCPWriteSQLGuarded(t *testing.T) {
	t.Parallel()
	db := database{dsn: dbtest.PostgresSchemaURL(t), q: func(s string) string { return s }}
	d, err := sqlopen.Open(t.Context(), db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	db.exec(t, `CREATE TABLE orders (id int PRIMARY KEY, tenant text NOT NULL)`)
	admin, err := guard.New(d.DB(), d.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Install(t.Context(), guard.Spec{Table: "orders", ResourceExpr: "'t:' || tenant"}); err != nil {
		t.Fatal(err)
	}

	mcp := newMCP(t, db.dsn, Config{Holder: "agent", AllowSQL: true})
	cl := callOK[claimOutput](t, mcp.ClientSession, "claim", args{"resource": "t:c"})
	w := callOK[writeOutput](t, mcp.ClientSession, "write", args{"token": cl.Token, "sql": []any{
		args{"query": "INSERT INTO orders VALUES (3, 'c')"}}})
	if !w.Written || w.RowsAffected != 1 {
		t.Fatalf("MCP write on a guarded table: %+v", w)
	}
	callErr(t, mcp.ClientSession, "write", args{"token": cl.Token, "sql": []any{
		args{"query": "INSERT INTO orders VALUES (4, 'd')"}}}, "t:d", "no fence in this transaction")

}
