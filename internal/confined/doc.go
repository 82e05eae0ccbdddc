// Package confined runs SQL that a user or an agent hands in (fencegate gate,
// the MCP server's write tool) inside a fenced transaction that the SQL can
// never end, restart or nest: COMMIT, END, ROLLBACK, ABORT, BEGIN, START
// TRANSACTION, SAVEPOINT, RELEASE, ROLLBACK TO, PREPARE TRANSACTION and
// COMMIT PREPARED fail, in any spelling, behind comments, in a DO block or in
// a string of several statements. Only Write's own COMMIT commits, and only
// after gate.Commit admitted the token in the same transaction.
//
// The databases enforce it, not a reading of the SQL text:
//
//   - Postgres: every statement goes through the extended protocol on its
//     own (Parse refuses a string of several statements), the server's
//     transaction status and command tag are checked after each one, and a
//     deferred constraint trigger (migration 00004) turns any COMMIT that
//     Write did not arm into a rollback. DO blocks and procedures cannot
//     COMMIT inside a transaction block at all. COPY … FROM STDIN is
//     refused before it runs: its input would never come.
//   - SQLite: an authorizer on the connection refuses to compile transaction
//     statements, savepoints, ATTACH, DETACH and PRAGMA; a commit hook vetoes
//     any commit while the user's SQL runs, and a rollback hook notices a
//     transaction that an error (or INSERT OR ROLLBACK) ended. SQLite's
//     driver runs every statement of a multi-statement string and ignores
//     extra arguments, so Write also counts statements and parameters; that
//     count is for honest errors, the authorizer is what confines.
//   - MySQL and MariaDB: the transaction is an XA transaction under a random
//     id. While it is active the server refuses, with XAER_RMFAIL, every
//     statement that would end it or commit implicitly: COMMIT, ROLLBACK,
//     BEGIN, DDL, LOCK TABLES, also inside a procedure or a prepared
//     statement. Write's own COMMIT is XA END then XA COMMIT … ONE PHASE:
//     never prepared, the transaction never outlives its connection.
//     Statements run as server-side prepared statements, one each (its
//     parameters are ?); SAVEPOINT and RELEASE, which XA allows, are refused
//     by their first word, as is a string of several statements.
//
// The connection a write used is closed afterwards, never returned to the
// pool, so session state the SQL left behind (SET, temporary tables, session
// advisory locks) cannot reach fencegate's own statements.
//
// Confinement is against ending the transaction, not against SQL that
// deliberately tampers with fencegate's own tables: whoever can run SQL on
// the database can also bypass the gate.
package confined
