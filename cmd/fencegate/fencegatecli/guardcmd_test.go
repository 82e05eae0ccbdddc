package fencegatecli

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

func TestGuardCommand(t *testing.T) {
	db := database{dsn: dbtest.PostgresSchemaURL(t), q: func(s string) string { return s }}
	env := map[string]string{envDSN: db.dsn}
	fg(t, env, "migrate").want(t, exitOK)
	db.exec(t, `CREATE TABLE orders (id int PRIMARY KEY, tenant text NOT NULL); CREATE TABLE cfg (k text)`)

	fg(t, env, "guard", "install", "--table", "orders", "--resource-expr", "'t:' || tenant").want(t, exitOK)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"install", "--table", "orders", "--resource", "x"}, exitError, "already guarded"},
		{[]string{"install", "--table", "nope", "--resource", "x"}, exitError, "no such table"},
		{[]string{"install", "--table", "cfg", "--resource-expr", "missing_col"}, exitError, "missing_col"},
		{[]string{"install", "--table", "cfg"}, exitUsage, "one of --resource, --resource-expr"},
		{[]string{"remove", "--table", "cfg"}, exitError, "not guarded"},
		{[]string{"frobnicate"}, exitUsage, "want one of install"},
	} {
		r := fg(t, env, append([]string{"guard"}, c.args...)...).want(t, c.code)
		contains(t, strings.Join(c.args, " "), r.stderr, c.says)
	}
	contains(t, "guard list", fg(t, env, "guard", "list").want(t, exitOK).stdout, "orders", "= 't:' || tenant", "guarded")
	contains(t, "guard sql", fg(t, env, "guard", "sql", "--table", "cfg", "--resource", "cfg").want(t, exitOK).stdout,
		"-- +goose Up", "CREATE TRIGGER fencegate_guard", "-- +goose Down", "DROP TRIGGER")
	contains(t, "status", fg(t, env, "status").want(t, exitOK).stdout, "GUARDED TABLE", "orders")
	contains(t, "status --json", fg(t, env, "status", "--json").want(t, exitOK).stdout, `"guarded_tables"`, `"resource_expr": "'t:' || tenant"`)

	// fencegate gate passes for the token's resource, and only for it.
	token := strings.TrimSpace(fg(t, env, "claim", "--lock", "t:a", "--holder", "a").want(t, exitOK).stdout)
	fg(t, env, "gate", token, "--", "INSERT INTO orders VALUES (1, 'a')").want(t, exitOK)
	r := fg(t, env, "gate", token, "--", "INSERT INTO orders VALUES (2, 'b')").want(t, exitError)
	contains(t, "gate, other resource", r.stderr, "t:b", "no fence in this transaction")
	// A write without the gate is refused by the database.
	d, err := sqlopen.Open(t.Context(), db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.DB().ExecContext(t.Context(), `UPDATE orders SET tenant = 'a'`); !guard.IsRefused(err) {
		t.Fatalf("plain UPDATE: %v, want a guard refusal", err)
	}
	// MCP's SQL write on a guarded table: mcpserver's TestMCPWriteSQLGuarded.

	fg(t, env, "guard", "remove", "--table", "orders").want(t, exitOK)
	contains(t, "guard list", fg(t, env, "guard", "list").want(t, exitOK).stdout, "no guarded tables")
	db.exec(t, `UPDATE orders SET tenant = 'b'`)

	// SQLite has no guard, and says so.
	sqlite := map[string]string{envDSN: dbtest.SQLitePath(t)}
	contains(t, "guard on SQLite", fg(t, sqlite, "guard", "list").want(t, exitError).stderr, "not supported")
}
