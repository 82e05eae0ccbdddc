// Package confined runs SQL that a user or an agent hands in (fencegate gate,
// the MCP server's write tool) inside a fenced transaction that the SQL can
// never end, restart or nest: COMMIT, END, ROLLBACK, ABORT, BEGIN, START
// TRANSACTION, SAVEPOINT, RELEASE, ROLLBACK TO, PREPARE TRANSACTION and
// COMMIT PREPARED fail, in any spelling, behind comments, in a DO block or in
// a string of several statements. Only Write's own COMMIT commits, and only
// after gate.Commit admitted the token in the same transaction.
//
// The databases enforce it, not a reading of the SQL text, and the driver
// knows how: Write takes a sqlstore.ConfinedSession from the gate's driver
// (sqlstore.Confiner) and runs the dialect-free algorithm on it (a
// connection of its own, begin, gate.Commit, arm, each statement on its
// own, disarm, commit, a truthful Outcome). This package holds no SQL and
// links no database driver. Each driver's Confine documents its means:
//
//   - pgsql (Postgres): each statement alone through the extended protocol,
//     the transaction status and command tag checked after each one, and a
//     deferred constraint trigger (fencegate_write_guard) that turns any COMMIT
//     Write did not arm into a rollback; COPY … FROM STDIN is refused.
//   - sqlite: an authorizer refusing transaction statements, savepoints,
//     ATTACH, DETACH and PRAGMA, a commit hook vetoing any commit while the
//     user's SQL runs, and a rollback hook noticing one that ended it; a
//     count of statements and parameters keeps the errors honest.
//   - mysql (MySQL, MariaDB): an XA transaction under a random id, in which
//     the server refuses every statement that would end it or commit
//     implicitly; Write's own COMMIT is XA END then XA COMMIT … ONE PHASE.
//     SAVEPOINT, RELEASE and strings of several statements are refused by
//     a scan.
//
// A driver without the capability cannot serve confined writes: Write then
// fails with an error matching errors.ErrUnsupported and runs nothing.
//
// The connection a write used is closed afterwards, never returned to the
// pool, so session state the SQL left behind (SET, temporary tables, session
// advisory locks) cannot reach fencegate's own statements.
//
// Confinement is against ending the transaction, not against SQL that
// deliberately tampers with fencegate's own tables: whoever can run SQL on
// the database can also bypass the gate.
package confined
