package sqlexec

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
)

// Form is the database a DSN names by its form.
type Form int

const (
	// SQLite is a path or a "file:" URI.
	SQLite Form = iota
	// Postgres is a "postgres://" or "postgresql://" URL, or libpq's
	// keyword/value form ("host=db user=app dbname=app"), which pgx parses.
	Postgres
	// MySQL is a "mysql://" URL.
	MySQL
)

// String names the database.
func (f Form) String() string {
	switch f {
	case Postgres:
		return "Postgres"
	case MySQL:
		return "MySQL"
	}
	return "SQLite"
}

// FormOf tells which database dsn names, by its form alone; every opener
// (sqlopen, and so the command and the MCP server, and sqlite.DSN) asks it.
// A SQLite path is a path: anything shaped like another database's DSN is
// refused, never opened as a file of that name (which would create it, and
// hand out fences no other holder sees). Refused are go-sql-driver/mysql's
// form (naming the mysql:// URL it means), key=value settings with no
// Postgres keyword among them, and any other scheme ("redis://", "sqlite:");
// a file whose name looks like one is written "./NAME" or "file:NAME". The
// errors match sqlstore.ErrInvalidDSN and never contain a password.
func FormOf(dsn string) (Form, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return Postgres, nil
	case strings.HasPrefix(dsn, "mysql://"):
		return MySQL, nil
	case strings.HasPrefix(dsn, "file:"):
		return SQLite, nil
	}
	if err := checkNativeMySQL(dsn); err != nil {
		return 0, err
	}
	if keys := settingKeys(dsn); len(keys) > 0 {
		for _, k := range keys {
			if postgresKeywords[strings.ToLower(k)] {
				return Postgres, nil
			}
		}
		return 0, fmt.Errorf("%w: key=value settings without a Postgres keyword (host, port, dbname, user, service, …) are no database fencegate opens; "+
			"a SQLite file whose name has \"=\" is written ./NAME or file:NAME", sqlstore.ErrInvalidDSN)
	}
	if m := scheme.FindStringSubmatch(dsn); m != nil || strings.Contains(dsn, "://") {
		what := "?"
		if m != nil {
			what = m[1]
		}
		what = fmt.Sprintf("unsupported scheme %q", what)
		if strings.Contains(dsn, "://") { // Redact finds a URL's password; "user:pw@host" is no URL
			what = fmt.Sprintf("%q: %s", Redact(dsn), what)
		}
		return 0, fmt.Errorf("%w: %s (want postgres://, mysql://, file:, Postgres key=value settings or a path; "+
			"a SQLite file whose name has \":\" is written ./NAME or file:NAME)", sqlstore.ErrInvalidDSN, what)
	}
	return SQLite, nil
}

// scheme matches a URL's scheme, or a DSN's ("sqlite:x.db", "user:pw@host"):
// two characters at least, so that a Windows drive ("C:\x.db") stays a path.
var scheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)

// setting matches a key=value setting at the start of dsn or after a space,
// as libpq's keyword/value form has them ("host=db port = 5432").
var setting = regexp.MustCompile(`(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)\s*=`)

// settingKeys returns the keys of dsn's key=value settings: all of them
// when dsn starts with one, else only those that name a Postgres setting
// ("x.db password=…" is a broken keyword/value DSN, not a path).
func settingKeys(dsn string) []string {
	var keys []string
	starts := false
	for i, m := range setting.FindAllStringSubmatchIndex(dsn, -1) {
		key := dsn[m[2]:m[3]]
		if i == 0 && strings.TrimSpace(dsn[:m[2]]) == "" {
			starts = true
		}
		if starts || postgresKeywords[strings.ToLower(key)] {
			keys = append(keys, key)
		}
	}
	return keys
}

// postgresKeywords are libpq's keywords that name a server, a database or
// a credential: one of them makes key=value settings a Postgres DSN.
var postgresKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"password": true, "passfile": true, "service": true, "sslmode": true,
}

// nativeMySQL matches go-sql-driver/mysql's DSN form,
// [user[:password]@]tcp(host:port)/database[?params] (or unix(path)), and
// captures the user and password, protocol, address, database and params.
var nativeMySQL = regexp.MustCompile(`^(?:(.*)@)?(tcp6?|unix)\(([^)]*)\)/([^?]*)(?:\?(.*))?$`)

// checkNativeMySQL refuses go-sql-driver/mysql's DSN form, naming the
// mysql:// URL that says the same (a tcp address) with the password hidden.
func checkNativeMySQL(dsn string) error {
	want := "mysql://user:password@host:port/database"
	m := nativeMySQL.FindStringSubmatch(dsn)
	if m == nil {
		if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
			return fmt.Errorf("%w: this is go-sql-driver/mysql's DSN form, not a URL (it would open as a SQLite file): write %s",
				sqlstore.ErrInvalidDSN, want)
		}
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
	if proto != "unix" && addr != "" {
		want = (&url.URL{Scheme: "mysql", User: user, Host: addr, Path: "/" + db, RawQuery: params}).String()
	}
	return fmt.Errorf("%w: %q is go-sql-driver/mysql's DSN form, not a URL (it would open as a SQLite file): did you mean %s?",
		sqlstore.ErrInvalidDSN, dsn, want)
}
