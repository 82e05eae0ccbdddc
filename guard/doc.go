// Package guard makes a table refuse, in the database, every write from a
// transaction that has not passed the fence (gate.Commit and the ways built
// on it) for the resource the row belongs to. Without a guard, a write that
// skips the gate is outside fencegate's guarantee; on a guarded table the
// database refuses it.
//
// # Installing a guard
//
// A guard names the table and the resource: one fixed resource for the
// whole table, or an SQL expression over the row that yields it as text:
//
//	admin, _ := guard.New(db, "postgres")
//	admin.Install(ctx, guard.Spec{Table: "orders", ResourceExpr: "'tenant:' || tenant_id"})
//
// INSERT checks the new row, DELETE the old, UPDATE both: a row moved from
// one resource to another needs both fences in the transaction. Admin.SQL
// prints the same as a goose migration for the application's own
// migrations; `fencegate guard` does all of it from the command line.
// Install runs in one transaction and checks first: a missing table, an
// expression that names a missing column or does not yield text, a second
// guard on a table, or a Remove of a guard that is not there is an error
// and changes nothing.
//
// # The proof (Postgres)
//
// Passing the fence marks the resource's fencegate_floor row with the
// writer's transaction: a raise (or a hand-over at the same fence) has a
// trigger set fencegate_floor.pass_xid to its 64-bit id, a fence equal to the floor locks the row FOR NO KEY UPDATE (its xmax
// is then the transaction's id until the transaction ends). The guard's
// trigger, an AFTER row trigger, looks the row up by the resource and
// requires "pass_xid ours, or xmax ours and xmin not" (an upsert that
// refused a stale fence rewrites the row, unchanged, and carries its lock
// over, but does not set pass_xid). A session setting the writer could set plays no
// part, and a pass ends with its transaction. A transaction that passed the
// fence for several resources passes for the rows of each.
//
// A refused write fails with SQLSTATE FG006 (IsRefused), whose message
// names the table, the resource, and "no fence in this transaction" or the
// stale fence; the statement, and so the transaction, is aborted and
// nothing of it commits. Postgres has no autonomous transactions, so the
// trigger cannot leave a row in fencegate_rejection that survives the
// rollback: the refusal goes to the server log (a WARNING) instead.
//
// The fence must be passed in the outermost transaction (gate.Commit
// insists): a lock taken in a savepoint carries the savepoint's own id, so
// the guard refuses the writes (it fails closed). Writes in a savepoint
// after the fence pass.
//
// # The one hole: the operator's bypass
//
// A session with the setting fencegate.guard_bypass = 'on' whose role may
// UPDATE fencegate_floor (and so could fake the proof anyway) writes past
// the guard, and every such row is logged in fencegate_guard_bypass in the
// same transaction (Admin.Bypasses reads it). It is off by default; an
// application role given the least-privilege setup (PostgresAppRoleSQL)
// can set the setting but not use it. TRUNCATE, which fires no row
// trigger, is refused unless bypassed.
//
// # Privileges
//
// The guarantee needs the application role to be unable to write or lock
// fencegate_floor (UPDATE on it is all a forger needs), to own neither
// fencegate's objects nor the guarded tables (an owner can drop or disable
// a trigger), and not to be a superuser. PostgresAppRoleSQL prints that
// setup: the role calls the fence, which then runs with its owner's rights.
// What the guard does not judge is the fence itself: a role that may call
// the fence may pass it with a fence it made up (it then raises the floor
// and locks out the real holder, visibly); with the lease coordinator in the
// same database, gate.Options.VerifyIssued refuses such fences, but a role
// that may write fencegate_lease could still forge one.
//
// # MySQL and MariaDB; SQLite
//
// MySQL and MariaDB guards are not built (New accepts the dialect, the
// calls return ErrUnsupported): neither server gives a trigger a reliable
// id of the current transaction to compare with what the fence statement
// left (information_schema.INNODB_TRX is a cache refreshed at most every
// 100 ms), and anything keyed by the connection outlives the transaction
// on a pooled connection. docs/GUARDED-TABLES.md tells more.
//
// SQLite has no guard: its triggers cannot tell one transaction or
// connection from another, anything a fenced transaction could leave for a
// trigger to see an unfenced one on another connection could leave too, and
// a connection that can write a table can drop its trigger; New returns
// ErrUnsupported.
package guard
