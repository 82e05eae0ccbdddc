package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// Errors Admin's methods return (wrapped, with the table's name); match
// them with errors.Is. Each leaves the database as it was.
var (
	// ErrNoTable: Install, SQL or Remove was given a table that does not
	// exist (or is not a plain or partitioned table: a view, say).
	ErrNoTable = errors.New("fencegate guard: no such table")
	// ErrAlreadyGuarded: Install or SQL on a table that has a guard.
	ErrAlreadyGuarded = errors.New("fencegate guard: table is already guarded")
	// ErrNotGuarded: Remove on a table without a guard.
	ErrNotGuarded = errors.New("fencegate guard: table is not guarded")
	// ErrInvalidSpec: a Spec with neither or both of Resource and
	// ResourceExpr, an empty or invalid resource name, or a ResourceExpr
	// that does not evaluate over the table's rows to text.
	ErrInvalidSpec = errors.New("fencegate guard: invalid guard")
	// ErrUnsupported: the dialect has no guard (MySQL/MariaDB, SQLite; see
	// the package doc), or the database lacks fencegate's guard migration
	// (Postgres: fencegate_guard_refuse).
	ErrUnsupported = errors.New("fencegate guard: not supported here")
)

// RefusedCode is the SQLSTATE of a write a guard refused (Postgres).
const RefusedCode = "FG006"

// IsRefused reports whether err (from a driver, pgx or database/sql) is a
// guarded table's refusal: the transaction had not passed the fence for
// the row's resource, or its fence was stale. The transaction is then
// aborted: nothing of it commits.
func IsRefused(err error) bool {
	var s interface{ SQLState() string }
	return errors.As(err, &s) && s.SQLState() == RefusedCode
}

// Spec is a guard to install: a table and the resource its rows belong to,
// either fixed or computed from each row.
type Spec struct {
	// Table names the table as SQL would: orders, app.orders, "Odd Name"
	// (quoted as in SQL when the name needs it). Required.
	Table string
	// Resource is the one resource every row of the table belongs to.
	Resource string
	// ResourceExpr is an SQL expression over the row's columns that yields
	// the row's resource as text, for example 'tenant:' || tenant_id. It
	// is evaluated in the trigger with search_path pg_catalog, so it may
	// call built-in functions and schema-qualified ones. It is SQL the
	// operator trusts, as in a migration; it must not contain ';'.
	ResourceExpr string
}

func (s Spec) validate() error {
	switch {
	case strings.TrimSpace(s.Table) == "":
		return fmt.Errorf("%w: no table", ErrInvalidSpec)
	case (s.Resource == "") == (strings.TrimSpace(s.ResourceExpr) == ""):
		return fmt.Errorf("%w: %s: give either a resource or a resource expression", ErrInvalidSpec, s.Table)
	case s.Resource != "":
		if err := fence.ValidateResource(s.Resource); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidSpec, s.Table, err)
		}
	case strings.ContainsAny(s.ResourceExpr, ";\x00") || strings.Contains(s.ResourceExpr, "$fencegate$"):
		return fmt.Errorf("%w: %s: the resource expression must be one SQL expression (no ';')", ErrInvalidSpec, s.Table)
	}
	return nil
}

// Guard is an installed guard, as List reports it.
type Guard struct {
	// Table is the table's qualified name, quoted where SQL needs it.
	Table string
	// Resource or ResourceExpr, as installed.
	Resource     string
	ResourceExpr string
	// Enabled is false when the trigger was disabled (ALTER TABLE …
	// DISABLE TRIGGER): the table is then not guarded at all.
	Enabled bool
}

// Migration is a guard's SQL for the user's own goose migrations.
type Migration struct {
	Up, Down string
}

// Goose returns the migration as a goose SQL file.
func (m Migration) Goose() string {
	return "-- +goose Up\n-- +goose StatementBegin\n" + m.Up + "\n-- +goose StatementEnd\n\n" +
		"-- +goose Down\n-- +goose StatementBegin\n" + m.Down + "\n-- +goose StatementEnd\n"
}

// Admin installs, lists and removes guards on one database. It is safe for
// concurrent use; its zero value is not usable (New).
type Admin struct {
	db      *sql.DB
	dialect sqlstore.Dialect
}

// New returns an Admin for db, a database/sql handle of the given dialect
// ("postgres" or "mysql"; sqlstore.Store.Dialect reports it). With pgx,
// stdlib.OpenDBFromPool gives one. The connections must see fencegate's
// tables (migrated, in the search_path on Postgres).
func New(db *sql.DB, dialect sqlstore.Dialect) (*Admin, error) {
	switch dialect {
	case "postgres", "mysql":
		return &Admin{db: db, dialect: dialect}, nil
	case "sqlite":
		return nil, fmt.Errorf("%w: SQLite: a trigger there cannot tell which transaction or connection wrote (see the guard package doc)", ErrUnsupported)
	}
	return nil, fmt.Errorf("%w: dialect %q", ErrUnsupported, dialect)
}

// Install guards a table, in one transaction on Postgres: it checks the
// table and the resource expression, and installs the trigger. Nothing is
// left half-installed when it fails.
func (a *Admin) Install(ctx context.Context, s Spec) (Guard, error) {
	if err := s.validate(); err != nil {
		return Guard{}, err
	}
	if a.dialect == "mysql" {
		return a.mysqlInstall(ctx, s)
	}
	var g Guard
	err := a.inTx(ctx, func(tx *sql.Tx) error {
		p, err := pgPlan(ctx, tx, s)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, p.up); err != nil {
			return fmt.Errorf("fencegate guard: install on %s: %w", p.table, err)
		}
		g = Guard{Table: p.table, Resource: s.Resource, ResourceExpr: s.ResourceExpr, Enabled: true}
		return nil
	})
	return g, err
}

// SQL returns the SQL that Install would run (and its undo) for the user's
// own migrations, checked against the database as Install checks it;
// nothing is written.
func (a *Admin) SQL(ctx context.Context, s Spec) (Migration, error) {
	if err := s.validate(); err != nil {
		return Migration{}, err
	}
	if a.dialect == "mysql" {
		return a.mysqlSQL(ctx, s)
	}
	var m Migration
	err := a.inTx(ctx, func(tx *sql.Tx) error {
		p, err := pgPlan(ctx, tx, s)
		if err != nil {
			return err
		}
		m = Migration{Up: p.up, Down: p.down}
		return nil
	})
	return m, err
}

// Remove takes the guard off a table, in one transaction on Postgres.
func (a *Admin) Remove(ctx context.Context, table string) error {
	if strings.TrimSpace(table) == "" {
		return fmt.Errorf("%w: no table", ErrInvalidSpec)
	}
	if a.dialect == "mysql" {
		return a.mysqlRemove(ctx, table)
	}
	return a.inTx(ctx, func(tx *sql.Tx) error {
		down, qual, err := pgRemoval(ctx, tx, table)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, down); err != nil {
			return fmt.Errorf("fencegate guard: remove from %s: %w", qual, err)
		}
		return nil
	})
}

// List returns the guarded tables, ordered by name.
func (a *Admin) List(ctx context.Context) ([]Guard, error) {
	if a.dialect == "mysql" {
		return a.mysqlList(ctx)
	}
	return pgList(ctx, a.db)
}

// Bypass is one record of the operator bypass log.
type Bypass struct {
	Seq      int64
	Table    string
	Op       string // INSERT, UPDATE, DELETE, TRUNCATE
	Resource string
	Role     string
}

// Bypasses returns the operator bypass log, oldest first, after seq.
func (a *Admin) Bypasses(ctx context.Context, afterSeq int64) ([]Bypass, error) {
	if a.dialect == "mysql" {
		return nil, errMySQL
	}
	rows, err := a.db.QueryContext(ctx, pgBypassList, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("fencegate guard: list bypasses: %w", err)
	}
	defer rows.Close()
	var out []Bypass
	for rows.Next() {
		var b Bypass
		var res sql.NullString
		if err := rows.Scan(&b.Seq, &b.Table, &b.Op, &res, &b.Role); err != nil {
			return nil, fmt.Errorf("fencegate guard: list bypasses: %w", err)
		}
		b.Resource = res.String
		out = append(out, b)
	}
	return out, rows.Err()
}

func (a *Admin) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fencegate guard: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fencegate guard: commit: %w", err)
	}
	return nil
}
