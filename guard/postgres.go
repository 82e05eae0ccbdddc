package guard

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Postgres: an AFTER row trigger (it sees the row as it is written, after
// any BEFORE trigger changed it) whose function, one per table, computes the
// row's resource and looks for the proof (migration 00003_fencegate_guard):
// the resource's fencegate_floor row was raised by this transaction (pass_xid) or is
// locked by it and not rewritten by it (xmax ours, xmin not: an upsert that
// refused a stale fence rewrites the row and carries its lock over). One index lookup of a row the transaction already holds. The function's search_path is fixed, and it
// names fencegate's schema, so a writer's own search_path or temporary
// tables cannot stand in for fencegate_floor. The trigger is ENABLE ALWAYS
// (it fires under session_replication_role = replica too), and a statement
// trigger refuses TRUNCATE, which fires no row trigger.

const (
	pgTrigger         = "fencegate_guard"
	pgTruncateTrigger = "fencegate_guard_truncate"
)

// pgResolveTable finds a table by the name SQL would use, and fencegate's
// schema (that of fencegate_floor), with the quoting they need.
const pgResolve = `
SELECT c.oid::bigint, quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind::text,
       quote_ident(fn.nspname), quote_literal(fn.nspname), fn.oid::bigint,
       EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = fn.oid AND p.proname = 'fencegate_guard_refuse' AND p.pronargs = 4),
       EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'fencegate_guard'),
       (SELECT t.tgfoid::regprocedure::text FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'fencegate_guard')
  FROM pg_namespace fn
  JOIN pg_class f ON f.relnamespace = fn.oid AND f.oid = to_regclass('fencegate_floor')
  LEFT JOIN pg_class c ON c.oid = to_regclass($1)
  LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`

type pgTable struct {
	oid               int64
	qual              string // "schema"."table", quoted
	fgSchema          string // fencegate's schema, quoted
	fgSchemaOID       int64
	migrated, guarded bool
	function          string // the guard function's qualified name
	installed         string // the installed trigger's function with its argument list, "s.f()"
	fgSchemaLit       string // fencegate's schema as a string literal
}

func pgResolveTable(ctx context.Context, tx *sql.Tx, table string) (pgTable, error) {
	var t pgTable
	var oid sql.NullInt64
	var qual, kind, installed sql.NullString
	err := tx.QueryRowContext(ctx, pgResolve, table).Scan(&oid, &qual, &kind, &t.fgSchema, &t.fgSchemaLit, &t.fgSchemaOID, &t.migrated, &t.guarded, &installed)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: fencegate_floor is not in the search_path: migrate first", ErrUnsupported)
	}
	if err != nil {
		// to_regclass raises on a malformed name ("a.b.c.d", a lone quote).
		return t, fmt.Errorf("%w: %q (quote a name that needs it as in SQL: '\"Odd Name\"'): %w", ErrNoTable, table, err)
	}
	if !t.migrated {
		return t, fmt.Errorf("%w: the database lacks fencegate's guard migration: run fencegate migrate", ErrUnsupported)
	}
	if !oid.Valid {
		return t, fmt.Errorf("%w: %q (quote a name that needs it as in SQL: '\"Odd Name\"')", ErrNoTable, table)
	}
	if kind.String != "r" && kind.String != "p" {
		return t, fmt.Errorf("%w: %s is not a table (relkind %s)", ErrNoTable, qual.String, kind.String)
	}
	t.oid, t.qual, t.installed = oid.Int64, qual.String, installed.String
	sum := sha256.Sum256([]byte(t.qual))
	t.function = t.fgSchema + ".fencegate_guard_" + hex.EncodeToString(sum[:8])
	return t, nil
}

// pgPlanned is a guard's SQL, ready to run.
type pgPlanned struct {
	table    string
	up, down string
}

// pgPlan checks s against the database (inside tx) and writes its SQL.
func pgPlan(ctx context.Context, tx *sql.Tx, s Spec) (pgPlanned, error) {
	t, err := pgResolveTable(ctx, tx, s.Table)
	if err != nil {
		return pgPlanned{}, err
	}
	if t.guarded {
		return pgPlanned{}, fmt.Errorf("%w: %s", ErrAlreadyGuarded, t.qual)
	}
	var newRes, oldRes string
	if s.Resource != "" {
		var lit string
		if err := tx.QueryRowContext(ctx, `SELECT quote_literal($1::text)`, s.Resource).Scan(&lit); err != nil {
			return pgPlanned{}, fmt.Errorf("fencegate guard: quote resource: %w", err)
		}
		newRes, oldRes = lit, lit
	} else {
		if err := pgCheckExpr(ctx, tx, t.qual, s.ResourceExpr); err != nil {
			return pgPlanned{}, err
		}
		newRes = "(SELECT (" + s.ResourceExpr + ")::text FROM (SELECT NEW.*) AS fg_row)"
		oldRes = "(SELECT (" + s.ResourceExpr + ")::text FROM (SELECT OLD.*) AS fg_row)"
	}
	meta, _ := json.Marshal(struct {
		Resource     string `json:"resource,omitempty"`
		ResourceExpr string `json:"resource_expr,omitempty"`
	}{s.Resource, s.ResourceExpr})
	var comment, tableLit string
	if err := tx.QueryRowContext(ctx, `SELECT quote_literal($1::text), quote_literal($2::text)`,
		"fencegate guard "+string(meta), t.qual).Scan(&comment, &tableLit); err != nil {
		return pgPlanned{}, fmt.Errorf("fencegate guard: quote: %w", err)
	}
	fg := t.fgSchema
	// Every operator and function of the guard's own code is
	// schema-qualified, so the writer's search_path cannot replace one; a
	// resource expression, the user's SQL, runs under a fixed search_path
	// instead (which costs a few microseconds a row more).
	setPath := ""
	if s.ResourceExpr != "" {
		setPath = "\nSET search_path = pg_catalog, pg_temp"
	}
	up := fmt.Sprintf(`CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql VOLATILE%[10]s AS $fencegate$
#variable_conflict use_column
DECLARE
    fg_x8  xid8 := pg_catalog.pg_current_xact_id();
    fg_x   xid  := fg_x8::xid;
    fg_new text;
    fg_old text;
BEGIN
    IF TG_OP OPERATOR(pg_catalog.<>) 'DELETE' THEN
        fg_new := %[3]s;
        IF NOT EXISTS (SELECT 1 FROM %[2]s.fencegate_floor f WHERE f.resource OPERATOR(pg_catalog.=) fg_new
                         AND (f.pass_xid OPERATOR(pg_catalog.=) fg_x8
                              OR f.xmax OPERATOR(pg_catalog.=) fg_x AND f.xmin OPERATOR(pg_catalog.<>) fg_x)) THEN
            PERFORM %[2]s.fencegate_guard_refuse(%[11]s, %[5]s, TG_OP, fg_new);
        END IF;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.<>) 'INSERT' THEN
        fg_old := %[4]s;
        IF (TG_OP OPERATOR(pg_catalog.=) 'DELETE' OR fg_new IS NULL OR fg_old IS NULL OR fg_old OPERATOR(pg_catalog.<>) fg_new)
           AND NOT EXISTS (SELECT 1 FROM %[2]s.fencegate_floor f WHERE f.resource OPERATOR(pg_catalog.=) fg_old
                             AND (f.pass_xid OPERATOR(pg_catalog.=) fg_x8
                              OR f.xmax OPERATOR(pg_catalog.=) fg_x AND f.xmin OPERATOR(pg_catalog.<>) fg_x)) THEN
            PERFORM %[2]s.fencegate_guard_refuse(%[11]s, %[5]s, TG_OP, fg_old);
        END IF;
    END IF;
    RETURN NULL;
END
$fencegate$;
CREATE TRIGGER %[6]s AFTER INSERT OR UPDATE OR DELETE ON %[7]s
    FOR EACH ROW EXECUTE FUNCTION %[1]s();
CREATE TRIGGER %[8]s BEFORE TRUNCATE ON %[7]s
    FOR EACH STATEMENT EXECUTE FUNCTION %[2]s.fencegate_guard_truncate(%[11]s, %[5]s);
ALTER TABLE %[7]s ENABLE ALWAYS TRIGGER %[6]s, ENABLE ALWAYS TRIGGER %[8]s;
COMMENT ON TRIGGER %[6]s ON %[7]s IS %[9]s;`,
		t.function, fg, newRes, oldRes, tableLit, pgTrigger, t.qual, pgTruncateTrigger, comment, setPath, t.fgSchemaLit)
	return pgPlanned{table: t.qual, up: up, down: pgDown(t)}, nil
}

// pgDown undoes a guard: the function the trigger calls, which a table
// renamed since the install no longer names.
func pgDown(t pgTable) string {
	fn := t.function + "()"
	if t.installed != "" {
		fn = t.installed
	}
	return fmt.Sprintf("DROP TRIGGER %s ON %s;\nDROP TRIGGER %s ON %s;\nDROP FUNCTION %s;",
		pgTrigger, t.qual, pgTruncateTrigger, t.qual, fn)
}

// pgCheckExpr evaluates expr over the table's columns, with no rows, to
// learn that it parses, names only columns that exist, and yields text.
func pgCheckExpr(ctx context.Context, tx *sql.Tx, qual, expr string) error {
	// A savepoint: a failed probe must not abort Install's transaction
	// before it can say why.
	if _, err := tx.ExecContext(ctx, "SAVEPOINT fencegate_guard_probe"); err != nil {
		return fmt.Errorf("fencegate guard: savepoint: %w", err)
	}
	// The trigger evaluates expr with search_path pg_catalog; so does the
	// probe, which the savepoint's rollback then undoes with the setting.
	var typ string
	_, err := tx.ExecContext(ctx, "SET LOCAL search_path = pg_catalog, pg_temp")
	if err == nil {
		err = tx.QueryRowContext(ctx, "SELECT pg_typeof(("+expr+"))::text FROM (SELECT * FROM "+qual+" LIMIT 0) AS fg_row RIGHT JOIN (VALUES (1)) AS fg_one(fg_one) ON true").Scan(&typ)
	}
	if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT fencegate_guard_probe"); rerr != nil {
		return fmt.Errorf("fencegate guard: rollback to savepoint: %w", rerr)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: resource expression %q: %w", ErrInvalidSpec, qual, expr, err)
	}
	if typ != "text" && typ != "character varying" {
		return fmt.Errorf("%w: %s: resource expression %q yields %s, not text (cast it: (%s)::text)", ErrInvalidSpec, qual, expr, typ, expr)
	}
	return nil
}

func pgRemoval(ctx context.Context, tx *sql.Tx, table string) (down, qual string, err error) {
	t, err := pgResolveTable(ctx, tx, table)
	if err != nil {
		return "", "", err
	}
	if !t.guarded {
		return "", "", fmt.Errorf("%w: %s", ErrNotGuarded, t.qual)
	}
	return pgDown(t), t.qual, nil
}

const pgListQuery = `
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), coalesce(obj_description(t.oid, 'pg_trigger'), ''),
       t.tgenabled <> 'D'
  FROM pg_trigger t
  JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_proc p ON p.oid = t.tgfoid
 WHERE t.tgname = 'fencegate_guard' AND t.tgparentid = 0
   AND p.pronamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('fencegate_floor'))
 ORDER BY 1`

func pgList(ctx context.Context, db *sql.DB) ([]Guard, error) {
	rows, err := db.QueryContext(ctx, pgListQuery)
	if err != nil {
		return nil, fmt.Errorf("fencegate guard: list: %w", err)
	}
	defer rows.Close()
	var out []Guard
	for rows.Next() {
		var g Guard
		var comment string
		if err := rows.Scan(&g.Table, &comment, &g.Enabled); err != nil {
			return nil, fmt.Errorf("fencegate guard: list: %w", err)
		}
		var meta struct {
			Resource     string `json:"resource"`
			ResourceExpr string `json:"resource_expr"`
		}
		_ = json.Unmarshal([]byte(strings.TrimPrefix(comment, "fencegate guard ")), &meta)
		g.Resource, g.ResourceExpr = meta.Resource, meta.ResourceExpr
		out = append(out, g)
	}
	return out, rows.Err()
}

const pgBypassList = `
SELECT seq, table_name, op, resource, role_name FROM fencegate_guard_bypass WHERE seq > $1 ORDER BY seq`

// PostgresAppRoleSQL returns the least-privilege setup of an application
// role on Postgres, for fencegate's tables in schema: role can pass the
// fence (fencegate_fence then runs with its owner's rights, with a fixed
// search_path) and read the floors, log refusals and arm CommitBatch's
// write guard, but cannot write or lock fencegate_floor, so it cannot fake
// a pass; nor write the bypass log. Run it as the owner of fencegate's
// tables; the role must not own the guarded tables (an owner can drop or
// disable a trigger) and gets only SELECT, INSERT, UPDATE, DELETE on them.
// The lease coordinator, which writes floors when it grants, runs as a
// role of its own with UPDATE on fencegate_floor.
func PostgresAppRoleSQL(schema, role string) (string, error) {
	if schema == "" || role == "" {
		return "", fmt.Errorf("%w: schema and role are required", ErrInvalidSpec)
	}
	s, r := quoteIdent(schema), quoteIdent(role)
	return fmt.Sprintf(`REVOKE ALL ON %[1]s.fencegate_floor, %[1]s.fencegate_guard_bypass FROM %[2]s;
GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT SELECT ON %[1]s.fencegate_floor, %[1]s.fencegate_lease, %[1]s.fencegate_rejection TO %[2]s;
GRANT INSERT ON %[1]s.fencegate_rejection TO %[2]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.fencegate_write_guard, %[1]s.fencegate_batch_guard TO %[2]s;
ALTER FUNCTION %[1]s.fencegate_fence(text, bigint, text, boolean, boolean) SECURITY DEFINER SET search_path = %[1]s, pg_temp;`, s, r), nil
}

// quoteIdent quotes a Postgres identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
