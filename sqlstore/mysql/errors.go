package mysql

import (
	"errors"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
)

// Server error numbers fencegate reads.
const (
	erLockWaitTimeout  = 1205 // innodb_lock_wait_timeout expired: the statement was undone
	erLockDeadlock     = 1213 // chosen as a deadlock victim: the transaction was rolled back
	erCheckRead        = 1020 // MariaDB's snapshot isolation: a row changed since the snapshot
	erNoSuchTable      = 1146 // not migrated
	erNoSuchProcedure  = 1305 // not migrated (the SQL protocol's procedures, migrations/mysql/00002)
	erServerShutdown   = 1053
	erNormalShutdown   = 1077
	erGotSignal        = 1078
	erShutdownComplete = 1079
	erAbortingConn     = 1152
	erConnKilled       = 1927 // MariaDB: KILL of the connection
	erSessionKilled    = 3169 // MySQL 8: the session was killed
	erClientIdle       = 4031 // MySQL 8: disconnected by the server for inactivity
)

// Classify reads an error of go-sql-driver/mysql: a deadlock, a lock wait
// timeout or (MariaDB) a snapshot conflict is retryable; a connection that
// broke, was killed or whose server is shutting down is a lost one. The
// Driver marks every error it returns by it, and its ClassifyError marks the
// caller's own.
//
// A deadlock (1213) rolls the whole transaction back; a lock wait timeout
// (1205) undoes only the statement (unless innodb_rollback_on_timeout), but
// fencegate never goes on after it: both mean "run the transaction again",
// and neither is ever a refusal.
func Classify(err error) sqlstore.ErrorClass {
	if err == nil {
		return sqlstore.ErrorClass{}
	}
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		if string(me.SQLState[:]) == "40001" {
			// A serialization failure, whatever its number: the protocol's
			// procedures SIGNAL it (1644) for "run the transaction again".
			return sqlstore.ErrorClass{Retryable: true}
		}
		switch me.Number {
		case erLockWaitTimeout, erLockDeadlock, erCheckRead:
			return sqlstore.ErrorClass{Retryable: true}
		case erServerShutdown, erNormalShutdown, erGotSignal, erShutdownComplete,
			erAbortingConn, erConnKilled, erSessionKilled, erClientIdle:
			return sqlstore.ErrorClass{ConnLost: true}
		}
		return sqlstore.ErrorClass{}
	}
	// The driver answers a connection that broke after a command was sent
	// with ErrInvalidConn; the rest (driver.ErrBadConn, io.EOF, net errors)
	// sqlstore.IsConnLost knows.
	if errors.Is(err, gomysql.ErrInvalidConn) {
		return sqlstore.ErrorClass{ConnLost: true}
	}
	return sqlstore.ErrorClass{}
}

// mark marks err with its class (sqlstore.WithClass); nil stays nil.
func mark(err error) error { return sqlstore.WithClass(err, Classify(err)) }
