package fencegatecli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/guard"
)

func guardCommand() *command {
	cmd := &command{
		name:     "guard",
		synopsis: "make a table refuse writes that did not pass the fence (install, list, remove, sql)",
		usage:    "guard install|sql --table T (--resource NAME | --resource-expr EXPR) | guard remove --table T | guard list [--json]",
		help: `A guarded table refuses, in the database, every INSERT, UPDATE and DELETE
from a transaction that has not passed the fence (gate.Commit, Do,
BeginFenced, CommitBatch, 'fencegate gate', MCP's write) for the resource
the row belongs to: one fixed --resource for the table, or --resource-expr,
an SQL expression over the row yielding text ("'tenant:' || tenant_id").
INSERT checks the new row, DELETE the old, UPDATE both.

  install  checks the table and the expression and installs the guard, in
           one transaction: on any error nothing is installed
  sql      prints the same as a goose migration, for your own migrations
  remove   takes the guard off a table
  list     lists the guarded tables

Quote a table name that needs it as in SQL: --table '"Odd Name"'. Postgres
only for now; SQLite has no guard (see docs/GUARDED-TABLES.md, which also
tells the least-privilege setup and the operator's bypass).`,
		db:   true,
		args: true,
	}
	fs := cmd.flagSet()
	table := fs.String("table", "", "the table, as SQL names it (schema.table, \"Quoted\")")
	resource := fs.String("resource", "", "the one resource every row belongs to")
	expr := fs.String("resource-expr", "", "an SQL expression over the row that yields its resource as text")
	asJSON := fs.Bool("json", false, "list: print JSON")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		if len(args) != 1 {
			return usagef("want one of install, sql, remove, list; got %q", args)
		}
		sub := args[0]
		switch sub {
		case "install", "sql":
			if *table == "" || (*resource == "") == (*expr == "") {
				return usagef("%s needs --table and one of --resource, --resource-expr", sub)
			}
		case "remove":
			if *table == "" || *resource != "" || *expr != "" {
				return usagef("remove takes --table only")
			}
		case "list":
			if *table != "" || *resource != "" || *expr != "" {
				return usagef("list takes no --table, --resource or --resource-expr")
			}
		default:
			return usagef("want one of install, sql, remove, list; got %q", sub)
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		admin, err := guard.New(b.Driver.DB(), b.Driver.Dialect())
		if err != nil {
			return err
		}
		spec := guard.Spec{Table: *table, Resource: *resource, ResourceExpr: *expr}
		switch sub {
		case "install":
			g, err := admin.Install(ctx, spec)
			if err != nil {
				return err
			}
			c.logf(cmd, "guarded %s (%s)", g.Table, guardResource(g))
		case "sql":
			m, err := admin.SQL(ctx, spec)
			if err != nil {
				return err
			}
			fmt.Fprint(c.stdout, m.Goose())
		case "remove":
			if err := admin.Remove(ctx, *table); err != nil {
				return err
			}
			c.logf(cmd, "removed the guard from %s", *table)
		case "list":
			gs, err := admin.List(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(ops.GuardReports(gs))
			}
			printGuards(c, gs)
		}
		return nil
	}
	return cmd
}

func printGuards(c *cli, gs []guard.Guard) {
	if len(gs) == 0 {
		fmt.Fprintln(c.stdout, "no guarded tables")
		return
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tRESOURCE\tSTATE")
	for _, g := range ops.GuardReports(gs) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", g.Table, g.ResourceText(), g.StateText())
	}
	w.Flush()
}
func guardResource(g guard.Guard) string {
	if g.Resource != "" {
		return "resource " + g.Resource
	}
	return "resource expression " + g.ResourceExpr
}
