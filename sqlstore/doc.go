// Package sqlstore is fencegate's one place for SQL dialects: Postgres
// through pgx/v5 (a pool, or database/sql through pgx's stdlib) and SQLite
// through modernc.org/sqlite (pure Go, no cgo).
//
// # Drivers
//
// A driver carries the caller's native transaction type into the gate:
//
//	sqlstore.NewPgx(pool)                  // Driver[pgx.Tx]
//	sqlstore.NewSQL(db, sqlstore.Postgres) // Driver[*sql.Tx], pgx stdlib
//	sqlstore.NewSQL(db, sqlstore.SQLite)   // Driver[*sql.Tx], modernc sqlite
//	sqlstore.Open(ctx, dsn)                // Driver[*sql.Tx] from a DSN
//
// Each driver holds its dialect's SQL text (queries.go); gate and lease hold
// the policy and never see SQL. Every argument is bound.
//
// # SQLite settings
//
// Open (and SQLiteDSN) set WAL, a busy timeout, synchronous(FULL) (a fence
// acknowledged and then lost to power failure could be issued twice) and
// _txlock=immediate, so write transactions take SQLite's single write lock at
// BEGIN rather than failing with SQLITE_BUSY half-way. A *sql.DB handed to
// NewSQL should be opened the same way.
//
// # Migrations
//
// MigrateUp, MigrateDown and MigrateStatus run fencegate's embedded goose
// migrations (package migrations) with a version table of fencegate's own,
// fencegate_goose_version, and on Postgres an advisory lock id of its own.
//
// # Errors
//
// A call on a database that was never migrated fails with an error matching
// ErrNotMigrated, which says to run Migrate (fencegate migrate).
//
// IsRetryable tells errors after which the whole transaction may run again
// (serialization failure, deadlock, lock timeout, SQLite busy); IsConnLost
// tells a broken connection, after which a COMMIT's outcome is unknown.
//
// One upstream edge to know about (pgx v5.12 with database/sql): a statement
// with no bound arguments, run outside a transaction, whose reply is lost to
// a broken connection, is reported to database/sql as safe to retry, and
// database/sql silently runs it again. fencegate's own statements all bind
// arguments and are not affected; an application's sharing the *sql.DB may be.
// integration/internal/faults has the reproduction.
//
// # Durability
//
// A grant acknowledged under Postgres synchronous_commit=off, or lost in a
// failover to an asynchronous replica, could let a fence be issued twice.
// Run fencegate's tables with synchronous commit.
package sqlstore
