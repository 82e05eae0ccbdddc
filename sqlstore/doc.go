// Package sqlstore is the contract between fencegate's policy (packages gate
// and lease) and a SQL database: the Driver, Store and Executor interfaces,
// the rows they read and write, and the errors. It holds no SQL and links no
// database driver; each dialect is a package of its own below it:
//
//	pgxv5.New(pool)       // Driver[pgx.Tx]: Postgres through a pgx/v5 pool
//	pgsql.New(db)         // Driver[*sql.Tx]: Postgres through database/sql (pgx stdlib)
//	sqlite.New(db)        // Driver[*sql.Tx]: SQLite through modernc.org/sqlite
//	mysql.New(db)         // Driver[*sql.Tx]: MySQL, MariaDB through go-sql-driver/mysql
//	distributed.New(pool, opts) // Driver[pgx.Tx]: pgxv5's profile for distributed SQL engines (pgxv5/distributed)
//	sqlite.Open(ctx, path) / pgsql.Open(ctx, dsn) / mysql.Open(ctx, dsn)
//	sqlopen.Open(ctx, dsn) // any of the database/sql ones, chosen by the DSN
//
// A program links only the drivers it imports: a pgx program links no SQLite
// and no MySQL driver, a SQLite program no pgx. sqlopen imports them all, for the fencegate
// command.
//
// # Writing a driver
//
// A dialect is one package (one folder) plus one line in the conformance
// list, internal/dbtest.Drivers. The package implements:
//
//   - Driver[TTx] for its native transaction type (river's shape): Begin,
//     Commit, Rollback (of a finished transaction: nil), UnwrapExecutor, and
//     the Store methods below. Prove it with var _ sqlstore.Driver[*sql.Tx]
//     = (*Driver)(nil).
//   - Store: Dialect (a sqlstore.Dialect constant the package declares),
//     Executor (autocommit), InTx, Migrate (its embedded goose migrations,
//     run by MigrateUp with fencegate's version table MigrationTable),
//     ClockPrecision (the tick of the clock its SQL stamps times with; the
//     lease coordinator shaves it off every TTL), and ClassifyError.
//   - The capabilities a database may lack, each a method every Store
//     has, answered as documented where the database lacks it (river's
//     SupportsListener): SupportsListener, ListenLeases and WatchLeases
//     (Postgres: LISTEN/NOTIFY, fed by triggers in its migrations that
//     announce a release only when its resource has a live waiter or a
//     watcher, so waiting acquisitions wake at once and a release nobody
//     waits for costs no notify lock; elsewhere ErrNotSupported, and waiters
//     wake by timers across processes), DurabilityWarnings (none where
//     nothing is checked), OnConn and MaxConns (a pool's pinned connection
//     and its size; elsewhere fn on Executor, and 0).
//   - Executor: fencegate's statements, every argument bound, each method's
//     contract as documented on the interface; times come from the
//     database's clock. The lease rules are required methods, stated once
//     per dialect: LeaseAcquire (a waiter's turn included:
//     LeaseAcquireParams.Waiter deletes its queue place when granted),
//     LeaseRenew, LeaseRenewBatch and LeaseRelease (naming the first
//     waiter where asked and able). The Postgres drivers state them in SQL
//     (fencegate_grant on their own, with a fast path for a free lease
//     row, and fencegate_acquire in a transaction; fencegate_acquire_turn
//     for a waiter: functions their migrations install); a dialect that
//     states them in no SQL calls the shared step-by-step implementation,
//     internal/steps, over its own statements (SQLite does; MySQL for set
//     and path claims, its one-resource acquisition being the protocol's
//     procedure fencegate_claim_one).
//   - Error classification: every error the driver returns passes through
//     WithClass with the driver's reading of its database's errors
//     (ErrorClass: retryable, connection lost, outcome unknown), so
//     IsRetryable, IsConnLost and IsOutcomeUnknown need no type switch
//     over drivers. A driver may instead give its own error types
//     Retryable, ConnLost and OutcomeUnknown bool methods, pgx SafeToRetry
//     style: the helpers ask for the behaviour, not a type. ClassifyError offers the
//     same reading for errors of the caller's own statements.
//   - Its DSN handling: an Open(ctx, dsn) that returns errors matching
//     ErrInvalidDSN for input it cannot use, never printing a password.
//
// To be opened from a DSN by sqlopen (and so by the fencegate command), a
// database/sql driver also has DB, Migrations and Close (sqlopen.Driver),
// and sqlopen.Open gets one case for its scheme. The shared tests write
// their own SQL with $1 placeholders; a database that takes others says how
// in its line (mysql's rebinds them to ?, internal/mysqltest.Rebind).
//
// Optionally, a database/sql driver implements Confiner: Confine(ctx, conn,
// fn) hands fn a ConfinedSession over one connection, which begins the
// transaction (Begin), confines it after the gate's admission (Arm), runs
// one statement of outside SQL at a time, refusing any that would end,
// restart or nest the transaction with errors matching
// ErrTransactionControl, ErrNotAllowed or ErrInvalidStatement (Exec, which
// also does the dialect's statement and parameter scans), lifts the
// confinement before the caller's COMMIT (Disarm) and tells a COMMIT the
// database refused from one whose answer was lost (Answered). All of the
// dialect's confinement lives there, its SQL included: the command's
// confined write path (cmd/fencegate/internal/confined, behind fencegate
// gate and the MCP server's SQL write) holds only the algorithm and is
// handed the driver with the gate. A driver without Confiner still serves
// the gate and the lease; confined writes on it fail with an error matching
// errors.ErrUnsupported. pgsql's session relies on a write-guard trigger
// (fencegate_write_guard), sqlite's on an authorizer and commit hook, mysql's on
// an XA transaction; sqlstore/internal/confine holds what they share.
//
// The conformance suite, sqlstoretest.Exercise, states the contract on a
// real database, one area per file, and every lease rule as one row of a
// table (sqlstoretest.Rules), run on the driver's SQL and on the shared
// steps over its statements; the gate's and the lease's rules run on top
// of it from the same list. A database/sql dialect may instead supply only
// its SQL text and facts to the shared machinery in internal/sqlexec (as
// pgsql and sqlite do); the Postgres SQL both Postgres drivers use is in
// internal/pg.
//
// # Migrations
//
// MigrateUp, MigrateDown and MigrateStatus run a driver's Migrations (the
// goose files of its dialect's package under migrations/) with a version
// table of fencegate's own, fencegate_goose_version, ignoring the host
// program's registered Go migrations; on Postgres under an advisory lock id
// of fencegate's own.
//
// # Errors
//
// A call on a database that was never migrated fails with an error matching
// ErrNotMigrated, which says to run Migrate (fencegate migrate).
//
// IsRetryable tells errors after which the whole transaction may run again
// (serialization failure, deadlock, lock timeout, SQLite busy); IsConnLost
// tells a broken connection. IsOutcomeUnknown is the one classification of
// "may or may not have committed" for an error from a call that commits: a
// lost connection, a lost COMMIT reply, an I/O or fsync error (SQLite's
// SQLITE_IOERR_FSYNC), a cancelled or timed-out COMMIT. Anything else is a
// definite refusal: nothing was applied.
// ErrNotFound and ErrInvalidDSN are sentinels.
//
// # Durability
//
// A grant acknowledged under Postgres synchronous_commit=off, or lost in a
// failover to an asynchronous replica, could let a fence be issued twice.
// Run fencegate's tables with synchronous commit; SQLite needs
// synchronous(FULL), which sqlite.Open sets (NORMAL is a durability
// warning, OFF refused). A release on its own
// (Store.Executor's LeaseRelease) is the exception on Postgres: it commits
// without waiting for the flush, since losing one only keeps a resource
// locked until its lease expires.
package sqlstore
