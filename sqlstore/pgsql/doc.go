// Package pgsql is fencegate's Postgres driver for database/sql, through
// pgx's stdlib: a sqlstore.Driver[*sql.Tx], so the gate takes the caller's
// *sql.Tx unwrapped.
//
//	db, _ := sql.Open("pgx", dsn)      // import _ "github.com/jackc/pgx/v5/stdlib"
//	d := pgsql.New(db)
//	err := d.Migrate(ctx)              // fencegate's tables, idempotent
//	g := gate.New(d, nil)              // *gate.Gate[*sql.Tx]
//
// Or let Open make the pool and the *sql.DB: d, err := pgsql.Open(ctx, dsn).
//
// It shares its SQL, migrations and error classification with pgxv5, the
// native pgx driver, and links no SQLite.
//
// One upstream edge to know about (pgx v5.12 with database/sql): a statement
// with no bound arguments, run outside a transaction, whose reply is lost to
// a broken connection, is reported to database/sql as safe to retry, and
// database/sql silently runs it again. fencegate's own statements all bind
// arguments and are not affected; an application's sharing the *sql.DB may be.
// integration/internal/faults has the reproduction.
package pgsql
