package sqlstore

import (
	"context"
	"database/sql"
	"errors"
)

// Confiner is an optional capability of a database/sql driver: confining a
// transaction so that SQL handed in from outside (fencegate gate's SQL, the
// MCP server's SQL write) can run in it but never end, restart or nest it.
// Only the caller's own COMMIT, after the gate admitted its token, commits.
// A driver without it cannot serve confined writes.
//
// pgsql.Driver, sqlite.Driver and mysql.Driver implement it; each says how
// its database enforces the confinement.
type Confiner interface {
	// Confine calls fn with a session over conn, a connection of the
	// driver's database held for one confined transaction (the caller closes
	// it afterwards and never returns it to the pool), and returns fn's
	// error. It fails without calling fn when conn is not one it can
	// confine (another database's connection, say).
	Confine(ctx context.Context, conn *sql.Conn, fn func(ConfinedSession) error) error
}

// StatementChecker is an optional capability of a Confiner: refusing, from
// its text alone and before anything is sent, a statement its sessions
// would refuse. A confined write checks every statement with it before it
// begins, so such a write does nothing at all.
//
// mysql.Driver implements it: MySQL and MariaDB commit DDL implicitly, which
// no transaction can hold.
type StatementChecker interface {
	// CheckStatement returns the error a session's Exec would return for
	// query when the text alone decides it, and nil otherwise.
	CheckStatement(query string) error
}

// ConfinedSession confines one transaction on one connection. Its caller
// runs, in this order: Begin, the gate's Commit in the transaction, Arm,
// Exec for each statement, Disarm, and the transaction's Commit; on any
// error it rolls the transaction back instead.
type ConfinedSession interface {
	// Begin starts the transaction on the session's connection.
	Begin(ctx context.Context) (*sql.Tx, error)
	// Arm confines tx, after the gate admitted the token in it.
	Arm(ctx context.Context, tx *sql.Tx) error
	// Exec runs one statement of outside SQL inside the transaction, args
	// bound to its parameters, and returns the rows it inserted, updated or
	// deleted. A statement that would end, restart or nest the transaction
	// fails with an error matching ErrTransactionControl, one the session
	// refuses for another reason with ErrNotAllowed, and one that is not
	// exactly one statement taking len(args) arguments with
	// ErrInvalidStatement. committed reports, with an error, that the
	// statement committed the transaction all the same.
	Exec(ctx context.Context, query string, args []any) (rows int64, committed bool, err error)
	// Disarm lifts the confinement just before the transaction's Commit.
	Disarm(ctx context.Context, tx *sql.Tx) error
	// Answered reports whether err, from the transaction's Commit, is the
	// database's answer: nothing committed. Any other failure of a COMMIT
	// leaves its outcome unknown.
	Answered(err error) bool
}

// Errors a ConfinedSession's Exec returns (wrapped), matchable with
// errors.Is. Nothing of the transaction commits after them.
var (
	// ErrTransactionControl: the statement would end, restart or nest the
	// confined transaction. pgxgate.CommitBatch (pgxv5.FloorRaiseBatch)
	// returns it too, for a batch that would end its own transaction;
	// nothing of the batch commits.
	ErrTransactionControl = errors.New("fencegate: a fenced write's SQL may not end, restart or nest its transaction")
	// ErrNotAllowed: the statement does something a confined transaction
	// refuses besides transaction control (SQLite: ATTACH, DETACH, PRAGMA;
	// Postgres: COPY FROM STDIN).
	ErrNotAllowed = errors.New("fencegate: statement not allowed in a fenced write")
	// ErrInvalidStatement: the statement is empty, holds more than one
	// statement or a NUL byte, or its arguments do not match its parameters.
	ErrInvalidStatement = errors.New("fencegate: invalid statement")
)
