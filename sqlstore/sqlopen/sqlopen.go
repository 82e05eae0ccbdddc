package sqlopen

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// Driver is a driver Open returns: a database/sql driver that owns its
// connection.
type Driver interface {
	sqlstore.Driver[*sql.Tx]
	// DB returns the *sql.DB the driver runs on.
	DB() *sql.DB
	// Migrations returns the dialect's embedded goose migrations, for
	// sqlstore.MigrateDown and sqlstore.MigrateStatus.
	Migrations() sqlstore.Migrations
	// Close releases the connection.
	Close() error
}

var (
	_ Driver = (*pgsql.Driver)(nil)
	_ Driver = (*sqlite.Driver)(nil)
	_ Driver = (*mysql.Driver)(nil)
)

// Open connects to the database dsn names and returns a driver that owns
// the connection (Close releases it). The DSN's form alone chooses the
// database (the package doc's DSNs):
//
//   - "postgres://…" or "postgresql://…" URLs, and libpq's keyword/value
//     settings ("host=db user=app dbname=app"): Postgres (pgsql.Open),
//     through a pgx pool and database/sql on top of it;
//   - "mysql://…": MySQL or MariaDB (mysql.Open);
//   - "file:…" URIs and plain paths: a SQLite file, created if missing
//     (sqlite.Open).
//
// Open does not migrate; call Migrate. Malformed input, an unknown scheme or
// another database's DSN form included, returns an error matching
// sqlstore.ErrInvalidDSN, without the DSN's password, and creates no file;
// settings under which fencegate's guarantee does not hold (SQLite without
// locking or a journal, a MySQL session with autocommit off, …), one
// matching sqlstore.ErrUnsafeSettings.
func Open(ctx context.Context, dsn string) (Driver, error) {
	form, err := sqlexec.FormOf(dsn)
	switch {
	case err != nil:
		return nil, err
	case form == sqlexec.Postgres:
		return driver(pgsql.Open(ctx, dsn))
	case form == sqlexec.MySQL:
		return driver(mysql.Open(ctx, dsn))
	}
	return driver(sqlite.Open(ctx, dsn))
}

// driver keeps a failed Open's nil pointer from becoming a non-nil Driver.
func driver[D Driver](d D, err error) (Driver, error) {
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Resolve checks dsn the way Open will and returns it in a form that names
// the same database from any working directory: a SQLite path made
// absolute, a "file:" URI normalised (sqlite.DSN); a Postgres DSN as it is.
func Resolve(dsn string) (string, error) {
	form, err := sqlexec.FormOf(dsn)
	switch {
	case err != nil:
		return "", err
	case form == sqlexec.Postgres:
		return dsn, nil
	case form == sqlexec.MySQL:
		if _, err := mysql.Config(dsn); err != nil {
			return "", err
		}
		return dsn, nil
	}
	sqliteDSN, err := sqlite.DSN(dsn)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(dsn, "file:") {
		return sqliteDSN, nil
	}
	return filepath.Abs(dsn)
}

// SQLiteFile returns the file a SQLite DSN names (absolute when dsn came
// from Resolve), or "" for any other DSN or a "file:" URI it cannot parse.
func SQLiteFile(dsn string) string {
	if form, err := sqlexec.FormOf(dsn); err != nil || form != sqlexec.SQLite {
		return ""
	}
	if strings.HasPrefix(dsn, "file:") {
		u, err := url.Parse(dsn)
		if err != nil {
			return ""
		}
		return filepath.FromSlash(u.Path)
	}
	return dsn
}
