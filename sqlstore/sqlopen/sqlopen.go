// Package sqlopen opens a fencegate driver from a DSN, choosing the dialect
// by its form. It imports every database/sql driver fencegate has, so a
// program that links it links SQLite, pgx and go-sql-driver/mysql; a
// library user who knows the database calls that driver's Open
// (sqlite.Open, pgsql.Open, mysql.Open) or New instead and links only it. The fencegate command uses this package.
package sqlopen

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
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
// the connection (Close releases it):
//
//   - "postgres://…" or "postgresql://…": Postgres (pgsql.Open), through a
//     pgx pool and database/sql on top of it;
//   - "mysql://…": MySQL or MariaDB (mysql.Open);
//   - "file:…" URIs and plain paths: a SQLite file, created if missing
//     (sqlite.Open).
//
// Open does not migrate; call Migrate. Malformed input, an unknown scheme
// included, returns an error matching sqlstore.ErrInvalidDSN.
func Open(ctx context.Context, dsn string) (Driver, error) {
	if err := checkScheme(dsn); err != nil {
		return nil, err
	}
	switch {
	case isPostgres(dsn):
		return driver(pgsql.Open(ctx, dsn))
	case isMySQL(dsn):
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
// absolute, a "file:" URI normalised (sqlite.DSN); a Postgres URL as it is.
func Resolve(dsn string) (string, error) {
	if err := checkScheme(dsn); err != nil {
		return "", err
	}
	switch {
	case isPostgres(dsn):
		return dsn, nil
	case isMySQL(dsn):
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
// from Resolve), or "" for a Postgres or MySQL DSN or a "file:" URI it
// cannot parse.
func SQLiteFile(dsn string) string {
	if isPostgres(dsn) || isMySQL(dsn) {
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

// checkScheme refuses a URL of a scheme no driver here takes, and
// go-sql-driver/mysql's own DSN form, which would otherwise open as a
// SQLite path.
func checkScheme(dsn string) error {
	if err := checkNativeMySQL(dsn); err != nil {
		return err
	}
	if i := strings.Index(dsn, "://"); i > 0 && !isPostgres(dsn) && !isMySQL(dsn) && !strings.HasPrefix(dsn, "file:") {
		return fmt.Errorf("%w: %q: unsupported scheme %q (want postgres://, mysql://, file: or a path)",
			sqlstore.ErrInvalidDSN, sqlexec.Redact(dsn), dsn[:i])
	}
	return nil
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func isMySQL(dsn string) bool { return strings.HasPrefix(dsn, "mysql://") }

// nativeMySQL matches go-sql-driver/mysql's DSN form,
// [user[:password]@]tcp(host:port)/database[?params] (or unix(path)), and
// captures the user and password, protocol, address, database and params.
var nativeMySQL = regexp.MustCompile(`^(?:(.*)@)?(tcp6?|unix)\(([^)]*)\)/([^?]*)(?:\?(.*))?$`)

// checkNativeMySQL refuses go-sql-driver/mysql's DSN form, naming the
// mysql:// URL that says the same (a tcp address) with the password hidden.
func checkNativeMySQL(dsn string) error {
	m := nativeMySQL.FindStringSubmatch(dsn)
	if m == nil {
		return nil
	}
	userinfo, proto, addr, db, params := m[1], m[2], m[3], m[4], m[5]
	var user *url.Userinfo
	if userinfo != "" {
		name, _, hasPassword := strings.Cut(userinfo, ":")
		user = url.User(name)
		if hasPassword {
			user = url.UserPassword(name, "xxxxx")
		}
		dsn = user.String() + "@" + dsn[len(userinfo)+1:]
	}
	want := "mysql://user:password@host:port/database"
	if proto != "unix" && addr != "" {
		want = (&url.URL{Scheme: "mysql", User: user, Host: addr, Path: "/" + db, RawQuery: params}).String()
	}
	return fmt.Errorf("%w: %q is go-sql-driver/mysql's DSN form, not a URL (it would open as a SQLite file): did you mean %s?",
		sqlstore.ErrInvalidDSN, dsn, want)
}
