package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
)

// ErrNotFound is returned (wrapped) by Executor.FloorGet and
// Executor.LeaseGet for a resource the table has no row for.
var ErrNotFound = errors.New("fencegate: not found")

// ErrInvalidDSN is matched (errors.Is) by the error a driver's Open (and
// sqlopen.Open, and sqlite.DSN) returns for a connection string it cannot
// use. Nothing is opened or created.
var ErrInvalidDSN = errors.New("fencegate: invalid DSN")

// ErrUnsafeSettings is matched (errors.Is) by the error a driver's Open (or
// a connection it opens) returns when the database session would run with
// settings under which fencegate's guarantee does not hold: SQLite without
// file locking, without a journal or with synchronous=OFF; a MySQL session
// whose clock, autocommit or binary logging was changed. The error says
// which setting and why. Found in the connection string's text, before
// connecting, it matches ErrInvalidDSN too. Nothing is written.
var ErrUnsafeSettings = errors.New("fencegate: unsafe database settings")

// ErrNotMigrated is matched (errors.Is) by the error of any Executor call,
// and so of gate and lease calls, that found fencegate's tables missing: the
// database was never migrated. Run Store.Migrate (or `fencegate migrate`).
var ErrNotMigrated = errors.New("fencegate: tables missing: run Migrate (fencegate migrate) first")

// ErrNestedTx is returned (wrapped) for a pgx savepoint (pgx.Tx.Begin on a
// transaction) where a fence must be checked in the outermost transaction:
// a refusal could roll back only the savepoint, and the outer transaction
// would commit its writes. gate.ErrNestedTx is the same error.
var ErrNestedTx = errors.New("fencegate: a nested transaction (savepoint) cannot be fenced; pass the outermost transaction")

// ErrorClass is what a driver found a native error to mean.
type ErrorClass struct {
	// NotMigrated: a table or sequence of fencegate's is missing; the error
	// then also matches ErrNotMigrated, and its text says to run Migrate.
	NotMigrated bool
	// Retryable: the transaction lost a race (serialization failure,
	// deadlock, lock timeout, SQLite busy) and can run again from BEGIN.
	// Nothing of it committed.
	Retryable bool
	// ConnLost: the connection broke. A COMMIT that failed this way may or
	// may not have been applied. It implies OutcomeUnknown.
	ConnLost bool
	// OutcomeUnknown: a COMMIT (or an autocommit statement) that failed
	// this way may or may not have been applied, though the connection
	// may be fine: the database could not say whether the transaction is
	// durable (SQLite's SQLITE_IOERR, SQLITE_IOERR_FSYNC among them).
	OutcomeUnknown bool
}

// WithClass returns err marked with class, so that IsRetryable and
// IsConnLost answer by it; errors.Is and errors.As still find err and
// everything it wraps, and the message is err's (for NotMigrated, after
// ErrNotMigrated's, which says what to do). It returns err itself when
// err is nil, when class is empty, or when err is marked already.
//
// Drivers call it on every error they return (through their ClassifyError);
// that is how a new driver plugs its database's errors in without a change
// here.
func WithClass(err error, class ErrorClass) error {
	if err == nil || class == (ErrorClass{}) {
		return err
	}
	if _, ok := errors.AsType[*classedError](err); ok {
		return err
	}
	return &classedError{err: err, class: class}
}

// classedError carries a driver's verdict on err, pgx SafeToRetry style:
// callers ask for the behaviour through an interface, not the type.
type classedError struct {
	err   error
	class ErrorClass
}

func (e *classedError) Error() string {
	if e.class.NotMigrated {
		return ErrNotMigrated.Error() + ": " + e.err.Error()
	}
	return e.err.Error()
}

func (e *classedError) Unwrap() []error {
	if e.class.NotMigrated {
		return []error{ErrNotMigrated, e.err}
	}
	return []error{e.err}
}

func (e *classedError) Retryable() bool { return e.class.Retryable }
func (e *classedError) ConnLost() bool  { return e.class.ConnLost }
func (e *classedError) OutcomeUnknown() bool {
	return e.class.OutcomeUnknown || e.class.ConnLost
}

// IsRetryable reports whether err means the transaction lost a race and can
// be run again from BEGIN: an error in whose chain something has a
// Retryable() bool method that says true. Every driver marks its
// database's retryable errors so (WithClass); for a native error that did
// not pass through fencegate, ask the driver first: Store.ClassifyError.
func IsRetryable(err error) bool {
	r, ok := errors.AsType[interface {
		error
		Retryable() bool
	}](err)
	return ok && r.Retryable()
}

// IsConnLost reports whether err means the connection to the database broke.
// The outcome of a COMMIT that failed this way is unknown: it may or may not
// have been applied. It is true for an error in whose chain something has a
// ConnLost() bool method that says true (drivers mark their own, as for
// IsRetryable), and for database/sql's and the network's own signs of a
// broken connection. Cancellation is never a lost connection.
func IsConnLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if c, ok := errors.AsType[interface {
		error
		ConnLost() bool
	}](err); ok && c.ConnLost() {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// IsOutcomeUnknown reports whether err, returned by a call that commits (a
// COMMIT, an autocommit statement, Store.InTx, gate.Commit's caller's
// COMMIT, a lease.Coordinator call), leaves it unknown whether that commit
// was applied: it may or may not have been. It is true
//
//   - when IsConnLost(err) is: the connection broke, or the COMMIT's reply
//     was lost (pgx's conn closed), after the COMMIT could have been sent;
//   - for a cancelled or timed-out call (context.Canceled,
//     context.DeadlineExceeded): the COMMIT may have landed before the
//     cancellation reached the database;
//   - for an error in whose chain something has an OutcomeUnknown() bool
//     method that says true, pgx SafeToRetry style: drivers mark their
//     database's errors so (ErrorClass.OutcomeUnknown), for example
//     SQLite's I/O errors (SQLITE_IOERR_FSYNC: the row may survive
//     recovery).
//
// Anything else is a definite answer: the database refused, and nothing
// of the transaction was applied. An error from a statement inside a
// transaction that was then rolled back, never committed, means nothing
// was applied whatever this says; it is conservative there.
func IsOutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	if IsConnLost(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	u, ok := errors.AsType[interface {
		error
		OutcomeUnknown() bool
	}](err)
	return ok && u.OutcomeUnknown()
}
