package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Open connects to the MySQL or MariaDB database a URL names and returns a
// driver that owns the connection pool (Close releases it):
//
//	mysql://user:password@host:port/database?param=value&…
//
// The port defaults to 3306 and the database is required. Parameters are
// go-sql-driver/mysql's own (tls, timeout, charset, allowPublicKeyRetrieval,
// …); unknown ones set session variables, as with that driver's DSN.
// fencegate sets parseTime=true and rejectReadOnly=true unless they are
// given, and refuses clientFoundRows=true and interpolateParams=true (see
// New), and a session variable that sets the clock (timestamp). The user
// and password are percent-decoded. Each connection is checked as it opens
// (NewConnector): session settings fencegate's statements depend on that
// the parameters changed (autocommit=0, for one) are refused.
//
// Open does not migrate; call Migrate. Malformed input returns an error
// matching sqlstore.ErrInvalidDSN; unsafe session settings one matching
// sqlstore.ErrUnsafeSettings; no error message carries the password.
func Open(ctx context.Context, dsn string) (*Driver, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := NewConnector(cfg)
	if err != nil {
		return nil, sqlexec.InvalidDSN(dsn, err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("fencegate: open %s: %w", sqlexec.Redact(dsn), mark(err))
	}
	return &Driver{db: db, opened: true}, nil
}

// Config turns a mysql:// URL (see Open) into go-sql-driver/mysql's
// configuration, for programs that open the *sql.DB themselves and pass it
// to New.
func Config(dsn string) (*gomysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, sqlexec.InvalidDSN(dsn, errorWithoutURL(err))
	}
	if u.Scheme != "mysql" {
		return nil, sqlexec.InvalidDSN(dsn, fmt.Errorf("scheme %q, want mysql://", u.Scheme))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, sqlexec.InvalidDSN(dsn, fmt.Errorf("want mysql://user:password@host:port/database"))
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, sqlexec.InvalidDSN(dsn, fmt.Errorf("database name %q: want exactly one path segment", db))
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	// go-sql-driver reads its parameters from its own DSN form. The user and
	// password are set afterwards, so they need no escaping and never reach
	// its error messages.
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, sqlexec.InvalidDSN(dsn, err)
	}
	cfg, err := gomysql.ParseDSN("tcp(" + addr + ")/" + db + "?" + query.Encode())
	if err != nil {
		return nil, sqlexec.InvalidDSN(dsn, err)
	}
	switch {
	case cfg.ClientFoundRows:
		return nil, sqlexec.InvalidDSN(dsn, fmt.Errorf("clientFoundRows=true would hide the floor upsert's outcome"))
	case cfg.InterpolateParams:
		return nil, sqlexec.InvalidDSN(dsn, fmt.Errorf("interpolateParams=true: fencegate binds every argument on the server"))
	}
	for name := range query { // decoded: the names go-sql-driver's SET may use
		if clockParam(name) {
			return nil, fmt.Errorf("%w: %q: %w: %s=%s would freeze UTC_TIMESTAMP, fencegate's clock "+
				"(a lease granted through it would be expired for every other coordinator)",
				sqlstore.ErrInvalidDSN, sqlexec.Redact(dsn), sqlstore.ErrUnsafeSettings, name, query.Get(name))
		}
	}
	if !query.Has("parseTime") {
		cfg.ParseTime = true
	}
	if !query.Has("rejectReadOnly") {
		// After a failover, a connection to the demoted, read-only primary
		// is dropped rather than failing every write.
		cfg.RejectReadOnly = true
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	return cfg, nil
}

// errorWithoutURL drops the input from url.Parse's error, which quotes it
// whole, password included.
func errorWithoutURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
