// Package mysql is fencegate's driver for MySQL 8 and MariaDB 10.6+ (InnoDB),
// on database/sql with github.com/go-sql-driver/mysql. Its transactions are
// *sql.Tx:
//
//	d, err := mysql.Open(ctx, "mysql://app:secret@db:3306/app") // or mysql.New(db)
//	g := gate.New(d, nil)                                       // *gate.Gate[*sql.Tx]
//
// It keeps to the SQL the two servers share, and was tested on MariaDB 10.11.
//
// # The floor
//
// Commit's floor check is one INSERT … ON DUPLICATE KEY UPDATE floor =
// LAST_INSERT_ID(GREATEST(floor, ?)): the rows-affected count and the last
// insert id of its OK packet tell inserted, raised, equal and refused apart,
// and a refusal hands back the floor. The upsert takes an exclusive lock on
// the floor's record even when it changes nothing, so a writer at the floor's
// fence and a raise exclude each other, and writers of one resource queue on
// that record. The floor table is keyed by its primary key alone, and the
// lease coordinator creates a resource's floor row when it grants the first
// lease, so Commit updates a row that exists rather than locking a gap.
//
// Never put a trigger on fencegate_floor: MariaDB 10.11 reports 0 as the
// last insert id of any statement on a table that has one, so every floor
// check would fail with an unexpected outcome (closed: nothing is admitted).
//
// # Isolation and retries
//
// Callers may run at any isolation level; InnoDB updates the newest
// committed row at all of them. Deadlocks (error 1213, likelier under
// REPEATABLE READ and SERIALIZABLE, which lock gaps) and lock wait timeouts
// (1205) are retryable (sqlstore.IsRetryable), never a refusal; gate.Do runs
// the transaction again. The driver's own transactions (Store.InTx: grants,
// Admit) run at READ COMMITTED, so two first grants of a resource do not
// deadlock on a gap. READ COMMITTED needs binlog_format ROW or MIXED (the
// defaults); under STATEMENT the server refuses its writes.
//
// Coordinator.LockTimeout sets innodb_lock_wait_timeout for the granting
// transaction, rounded up to whole seconds, MySQL's unit. The session value
// is put back before the transaction ends, so a pooled connection returns as
// it came; a transaction in which SetLockTimeout ran must end through the
// driver's Commit or Rollback for that.
//
// # Commits bounded by ctx
//
// database/sql's Tx.Commit takes no context: a COMMIT whose reply was lost
// would wait as long as the network lets it (gate.Do under a 2 s ctx once
// ran 12 s). The driver's Commit (gate.Do's, and the lease coordinator's
// grants') sends COMMIT as a statement under ctx, so go-sql-driver closes
// the connection when ctx ends, and returns an error that
// sqlstore.IsOutcomeUnknown reports: the server may have committed. It
// costs a round trip: tx.Commit then hands the connection back with a
// COMMIT that finds nothing to commit. Under a ctx that never ends, Commit
// is tx.Commit alone.
//
// # Fences
//
// MySQL has no sequences, and AUTO_INCREMENT values may be reused after a
// crash. Fences come from a one-row counter, UPDATE … SET last =
// LAST_INSERT_ID(last + 1), in the granting transaction: durable with the
// lease, rolled back with it, and without gaps. Its row lock makes grants
// take turns, across resources, until each granting transaction ends.
//
// # Time
//
// Expiry is computed and compared in the database's clock, UTC_TIMESTAMP(6):
// microseconds, UTC whatever the session's time_zone, stored in DATETIME(6)
// columns (no 2038 limit). It is the server host's wall clock, fixed at each
// statement's start, and it follows that clock's steps: a step forward
// expires leases early (their fences still guard the writes), a step back
// makes them last longer. A session's SET timestamp would freeze it: Config
// refuses a timestamp parameter, and every connection Open (NewConnector)
// opens has its clock put back on the server's (SET timestamp = DEFAULT),
// since a parameter's value can hide the assignment.
//
// # Connection strings
//
// Open takes mysql://user:password@host:port/database?params, with
// go-sql-driver's own parameters; Config maps it onto that driver's
// configuration for programs that open the *sql.DB themselves (open it with
// sql.OpenDB(NewConnector(cfg)), which checks each connection as Open
// does). The password never appears in an error.
//
// # Session settings
//
// go-sql-driver turns unknown parameters into session variables (SET name
// = value, the value SQL text). Every connection reads back, as it opens,
// the ones fencegate's statements depend on, and is refused (an error
// matching sqlstore.ErrUnsafeSettings) when the parameters changed them:
//
//   - autocommit=0: the statements fencegate runs on their own (the
//     refusal log's row among them) would stay uncommitted on a pooled
//     connection, and a later transaction fail with error 1568;
//   - completion_type CHAIN or RELEASE: a COMMIT would open a new
//     transaction or drop the connection;
//   - sql_log_bin=0: grants would not reach replicas, and a failover to one
//     would issue their fences again;
//   - sql_mode with EMPTY_STRING_IS_NULL or ORACLE: they change what
//     fencegate's SQL means (the empty string would be NULL);
//   - sql_select_limit: lists of leases, floors and waiters cut short;
//   - insert_id: a refusal or waiter numbered by hand.
//
// Kept, because fencegate does not depend on them: time_zone (the clock
// is UTC_TIMESTAMP, the columns DATETIME), the rest of sql_mode (the SQL
// quotes strings with ' and binds every argument), the session's isolation
// level (see Isolation and retries), innodb_lock_wait_timeout (a wait that
// runs out is retryable), and a read-only session (its writes fail, closed).
//
// # Migrations
//
// Migrate runs the embedded goose migrations (package migrations/mysql;
// Migrations for sqlstore.MigrateDown and MigrateStatus) with the version table
// fencegate_goose_version. goose's migration lock is Postgres-only;
// here GET_LOCK, named after the database, serializes concurrent first
// migrations, and every DDL statement is idempotent because MySQL commits
// each one on its own.
//
// # Durability
//
// A grant acknowledged and then lost could let a fence be issued twice: run
// fencegate's tables with innodb_flush_log_at_trx_commit=1 and, with binary
// logging, sync_binlog=1 (MySQL 8's defaults), and fail over only to
// replicas that have every acknowledged transaction.
package mysql
