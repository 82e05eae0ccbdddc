package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Postgres SQLSTATEs that mean "try the whole transaction again".
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03" // lock_timeout expired
)

// IsRetryable reports whether err means the transaction lost a race and can
// be run again from BEGIN: a Postgres serialization failure, deadlock or lock
// timeout, or SQLite's BUSY/LOCKED. Nothing of the failed transaction
// committed.
func IsRetryable(err error) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case pgSerializationFailure, pgDeadlockDetected, pgLockNotAvailable:
			return true
		}
		return false
	}
	if sqliteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		switch sqliteErr.Code() & 0xff { // extended codes keep the primary in the low byte
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// IsConnLost reports whether err means the connection to the database broke.
// The outcome of a COMMIT that failed this way is unknown: it may or may not
// have been applied.
func IsConnLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, pgconn.ErrConnClosed) { // pgx's answer to a COMMIT whose reply was lost
		return true
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		// Class 08: connection exception; 57P01..57P03: the server is
		// shutting down or restarting.
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return false
}

// ErrNotMigrated is matched (errors.Is) by the error of any Executor call,
// and so of gate and lease calls, that found fencegate's tables missing: the
// database was never migrated. Run Store.Migrate (or `fencegate migrate`).
var ErrNotMigrated = errors.New("fencegate: tables missing: run Migrate (fencegate migrate) first")

const pgUndefinedTable = "42P01" // also a missing sequence

// failed wraps err from the statement what; a missing table also matches
// ErrNotMigrated, whose text says what to do.
func failed(what string, err error) error {
	if isUndefinedTable(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrNotMigrated, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isUndefinedTable(err error) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code == pgUndefinedTable
	}
	if sqliteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		return strings.Contains(sqliteErr.Error(), "no such table")
	}
	return false
}

func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows)
}
