package confined

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// Errors Write returns inside a *StatementError, matchable with errors.Is.
// They are the driver's (its sqlstore.ConfinedSession returns them).
var (
	// ErrTransactionControl: the statement would end, restart or nest the
	// fenced transaction. Nothing was committed.
	ErrTransactionControl = sqlstore.ErrTransactionControl
	// ErrNotAllowed: the statement does something a confined write refuses
	// besides transaction control (SQLite: ATTACH, DETACH, PRAGMA;
	// Postgres: COPY FROM STDIN).
	ErrNotAllowed = sqlstore.ErrNotAllowed
	// ErrInvalidStatement: the statement is empty, holds more than one
	// statement or a NUL byte, or its arguments do not match its parameters.
	// Nothing ran.
	ErrInvalidStatement = sqlstore.ErrInvalidStatement
)

// maxAttempts bounds how often Write runs a transaction that failed with a
// retryable error (serialization failure, deadlock, SQLite busy).
const maxAttempts = 3

// Statement is one SQL statement and the values bound to its parameters
// ($1, $2 on Postgres; ? or ?NNN on SQLite; ? on MySQL), in order. Values
// are never formatted into the SQL.
type Statement struct {
	SQL  string
	Args []any
}

// Outcome says what Write left in the database.
type Outcome int

const (
	// NotCommitted: nothing the statements did is in the database.
	NotCommitted Outcome = iota
	// Committed: every statement ran and committed together with the gate's
	// admission of the token.
	Committed
	// Unknown: the COMMIT was sent and its answer was lost (the connection
	// broke): the statements may or may not have committed.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Unknown:
		return "unknown"
	}
	return "not committed"
}

// Result is what Write did. The zero value is NotCommitted.
type Result struct {
	Outcome Outcome
	// RowsAffected holds, for each statement that ran in the last attempt,
	// the rows it inserted, updated or deleted, in order. It has an entry
	// for every statement when Outcome is Committed.
	RowsAffected []int64
}

// StatementError is a failure of one statement; Write then committed
// nothing. Err is the database's error, or ErrTransactionControl,
// ErrNotAllowed or ErrInvalidStatement.
type StatementError struct {
	Index int // the statement, from 0
	Err   error
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("fencegate: statement %d: %s", e.Index+1, strings.TrimPrefix(e.Err.Error(), "fencegate: "))
}

func (e *StatementError) Unwrap() error { return e.Err }

// Driver is a database/sql driver with its database: Write takes a
// connection of its own from DB.
type Driver interface {
	sqlstore.Driver[*sql.Tx]
	DB() *sql.DB
}

// Write runs stmts, in order, in one transaction on d's database after
// g.Commit admitted token in it, and commits them only together with that
// admission. g must be a gate over d, and d must confine transactions (sqlstore.Confiner:
// pgsql.Driver, Postgres through pgx's stdlib; sqlite.Driver; or
// mysql.Driver); with any other driver Write runs nothing and returns an
// error matching errors.ErrUnsupported. db must be migrated (on Postgres,
// the write guard: fencegate_write_guard).
//
// A refused token returns the gate's *gate.StaleFenceError (logged in the
// rejection log) and runs no statement. A failing statement returns a
// *StatementError; so does, before anything is sent, one the driver refuses
// from its text alone (sqlstore.StatementChecker: DDL on MySQL, which
// commits implicitly). Either way, and whenever err is not nil, Result.Outcome
// says what committed: NotCommitted, except Unknown when the final COMMIT's
// answer was lost (and Committed if the SQL's own COMMIT went through, which
// only a Postgres database without the write guard lets happen: the
// statements before it committed with the admission). A transaction that failed with a retryable error runs
// again, up to 3 times; its effects commit at most once.
func Write(ctx context.Context, d Driver, g *gate.Gate[*sql.Tx], token fence.Token, stmts []Statement) (Result, error) {
	if len(stmts) == 0 {
		return Result{}, fmt.Errorf("%w: no statements", ErrInvalidStatement)
	}
	for i, st := range stmts {
		if err := validate(st); err != nil {
			return Result{}, &StatementError{Index: i, Err: err}
		}
	}
	c, ok := d.(sqlstore.Confiner)
	if !ok {
		return Result{}, fmt.Errorf("fencegate: confined writes need a driver that confines transactions (sqlstore.Confiner), not %T: %w", d, errors.ErrUnsupported)
	}
	if ch, ok := c.(sqlstore.StatementChecker); ok {
		for i, st := range stmts {
			if err := ch.CheckStatement(st.SQL); err != nil {
				return Result{}, &StatementError{Index: i, Err: err}
			}
		}
	}
	for attempt := 1; ; attempt++ {
		res, err := writeOnce(ctx, d.DB(), c, g, token, stmts)
		if err == nil || res.Outcome != NotCommitted || !sqlstore.IsRetryable(d.ClassifyError(err)) || attempt >= maxAttempts || ctx.Err() != nil {
			return res, err
		}
	}
}

// validate refuses what no dialect can run faithfully: an empty statement,
// and NUL bytes, at which SQLite cuts text off.
func validate(st Statement) error {
	if strings.TrimSpace(st.SQL) == "" {
		return fmt.Errorf("%w: empty", ErrInvalidStatement)
	}
	if strings.ContainsRune(st.SQL, 0) {
		return fmt.Errorf("%w: the SQL contains a NUL byte", ErrInvalidStatement)
	}
	for j, a := range st.Args {
		if s, ok := a.(string); ok && strings.ContainsRune(s, 0) {
			return fmt.Errorf("%w: argument %d contains a NUL byte", ErrInvalidStatement, j+1)
		}
	}
	return nil
}

// writeOnce is one attempt of Write, on a connection of its own.
func writeOnce(ctx context.Context, db *sql.DB, c sqlstore.Confiner, g *gate.Gate[*sql.Tx], token fence.Token, stmts []Statement) (res Result, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("fencegate: connect: %w", err)
	}
	// Never back to the pool: the user's SQL may have left session state.
	// Closing the connection also rolls back, on the server, a transaction
	// that is still open, without waiting for an answer.
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	err = c.Confine(ctx, conn, func(s sqlstore.ConfinedSession) error {
		res, err = run(ctx, s, g, token, stmts)
		return err
	})
	return res, err
}

// run is one attempt of Write in a transaction confined by s.
func run(ctx context.Context, s sqlstore.ConfinedSession, g *gate.Gate[*sql.Tx], token fence.Token, stmts []Statement) (res Result, err error) {
	txCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tx, err := s.Begin(txCtx)
	if err != nil {
		return Result{}, fmt.Errorf("fencegate: begin: %w", err)
	}
	rollback := func() { cancel(); _ = tx.Rollback() } // bounded: cancel first, the conn is closed after
	if err := g.Commit(ctx, tx, token); err != nil {
		rollback()
		return Result{}, err
	}
	if err := s.Arm(ctx, tx); err != nil {
		rollback()
		return Result{}, fmt.Errorf("fencegate: confine the transaction: %w", err)
	}
	for i, st := range stmts {
		rows, committed, err := s.Exec(ctx, st.SQL, st.Args)
		if err != nil {
			rollback()
			if committed {
				// Only possible without the write guard's trigger: the
				// statements up to this one committed with the admission.
				res.Outcome = Committed
			}
			return res, &StatementError{Index: i, Err: err}
		}
		res.RowsAffected = append(res.RowsAffected, rows)
	}
	if err := s.Disarm(ctx, tx); err != nil {
		rollback()
		return res, fmt.Errorf("fencegate: commit: %w", err)
	}
	if err := ctx.Err(); err != nil {
		rollback()
		return res, err
	}
	if err := tx.Commit(); err != nil {
		if !s.Answered(err) && !errors.Is(err, sql.ErrTxDone) {
			res.Outcome = Unknown // sent, and no answer from the database
		}
		return res, fmt.Errorf("fencegate: commit: %w", err)
	}
	res.Outcome = Committed
	return res, nil
}
