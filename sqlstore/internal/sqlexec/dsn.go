package sqlexec

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
)

// Redact hides a password in a URL-shaped DSN before it goes into an error,
// also in one url.Parse refuses (a bad port, say): there everything from the
// scheme to the last "@" goes.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, rest, ok := strings.Cut(dsn, "://")
		if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
			return scheme + "://xxxxx@" + rest[at+1:]
		}
		return dsn
	}
	if u.User == nil {
		return dsn
	}
	return u.Redacted()
}

// InvalidDSN is the error for a DSN a driver cannot use: it matches
// sqlstore.ErrInvalidDSN and names the DSN without its password.
func InvalidDSN(dsn string, err error) error {
	return fmt.Errorf("%w: %q: %v", sqlstore.ErrInvalidDSN, Redact(dsn), err)
}
