package sqlite

import (
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	migrations "github.com/fencegate/fencegate/migrations/sqlite"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is SQLite's name.
const Dialect sqlstore.Dialect = "sqlite"

// ClockPrecision is the tick of SQLite's clock as fencegate reads it:
// julianday('now') has whole milliseconds.
const ClockPrecision = time.Millisecond

// Driver runs fencegate on SQLite through database/sql and
// modernc.org/sqlite. Its transactions are *sql.Tx. It keeps every
// statement prepared (modernc.org/sqlite parses each anew, a tenth of a
// fenced transaction). A transaction begun on another *sql.DB over the same
// file works too; its statements then run from their text instead of the
// driver's prepared statements. Close the driver before the *sql.DB it runs
// on.
//
// Besides the methods of sqlstore.Driver[*sql.Tx] it has DB (the *sql.DB it
// runs on), Migrations (its embedded goose migrations, for
// sqlstore.MigrateDown and MigrateStatus), Close (its prepared statements,
// and what Open opened), and Confine (sqlstore.Confiner, for confined
// writes).
//
// The zero value is not usable; create one with New or Open.
type Driver struct{ impl *sqlexec.Driver }

var _ sqlstore.Driver[*sql.Tx] = (*Driver)(nil)

// New returns a driver over db, which must take the write lock at BEGIN
// (_txlock=immediate) and should use WAL, synchronous(FULL) and a busy
// timeout: open it with sql.OpenDB(NewConnector(dsn)), which also checks
// every connection's settings (or sql.Open on DSN's output, which does
// not). The *sql.DB stays the caller's to close.
func New(db *sql.DB) *Driver { return &Driver{sqlexec.NewDriver(db, dialect, nil)} }

var dialect = sqlexec.Dialect{
	Name:            Dialect,
	Queries:         queries,
	Migrations:      Migrations,
	Classify:        Classify,
	ClockPrecision:  ClockPrecision,
	CacheStatements: true,
}

// Classify reads a SQLite error: BUSY and LOCKED are retryable (nothing of
// the failed transaction committed); an I/O error (SQLITE_IOERR and its
// extended codes, SQLITE_IOERR_FSYNC among them) leaves the outcome of a
// COMMIT unknown: the transaction may survive recovery (the reliability
// suite saw one that did); "no such table" means fencegate's migrations
// never ran. SQLite has no connection to lose.
func Classify(err error) sqlstore.ErrorClass {
	sqliteErr, ok := errors.AsType[*sqlite.Error](err)
	if !ok {
		return sqlstore.ErrorClass{}
	}
	return classifyCode(sqliteErr.Code(), sqliteErr.Error())
}

func classifyCode(code int, msg string) sqlstore.ErrorClass {
	switch code & 0xff { // extended codes keep the primary in the low byte
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return sqlstore.ErrorClass{Retryable: true}
	case sqlite3.SQLITE_IOERR:
		return sqlstore.ErrorClass{OutcomeUnknown: true}
	}
	return sqlstore.ErrorClass{NotMigrated: strings.Contains(msg, "no such table")}
}

// Migrations returns fencegate's SQLite migrations, embedded: package
// migrations/sqlite, with goose's sqlite3 dialect.
func Migrations() sqlstore.Migrations {
	return sqlstore.Migrations{Dialect: goose.DialectSQLite3, FS: migrations.FS()}
}
