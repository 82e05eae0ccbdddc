package pg

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/sqlstore"
)

// ClockPrecision is the tick of clock_timestamp(): a microsecond.
const ClockPrecision = time.Microsecond

// SQLSTATEs that mean "try the whole transaction again".
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03" // lock_timeout expired
	pgUndefinedTable       = "42P01" // also a missing sequence: not migrated
	pgUndefinedFunction    = "42883" // fencegate_fence and the like: not migrated (that far)
)

// Classify reads a Postgres error: a serialization failure, deadlock or lock
// timeout is retryable; a broken connection (class 08, the server shutting
// down, pgx's closed connection or failed connect) is a lost one; an
// undefined table, or an undefined fencegate function, means fencegate's
// migrations never ran (or not all of them).
func Classify(err error) sqlstore.ErrorClass {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case pgSerializationFailure, pgDeadlockDetected, pgLockNotAvailable:
			return sqlstore.ErrorClass{Retryable: true}
		case pgUndefinedTable:
			return sqlstore.ErrorClass{NotMigrated: true}
		case pgUndefinedFunction:
			// Only fencegate's own functions: a caller's batch statement
			// calling a function of its own that is missing is not ours.
			if strings.Contains(pgErr.Message, "fencegate_") {
				return sqlstore.ErrorClass{NotMigrated: true}
			}
		}
		// Class 08: connection exception; 57P01..57P03: the server is
		// shutting down or restarting.
		lost := pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
		return sqlstore.ErrorClass{ConnLost: lost}
	}
	if errors.Is(err, pgconn.ErrConnClosed) { // pgx's answer to a COMMIT whose reply was lost
		return sqlstore.ErrorClass{ConnLost: true}
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return sqlstore.ErrorClass{ConnLost: true}
	}
	return sqlstore.ErrorClass{}
}
