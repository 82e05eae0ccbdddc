package sqlexec

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
)

// Redact hides the passwords of a DSN before it goes into an error: a URL's
// userinfo password, also in a URL url.Parse refuses (a bad port, say: there
// everything from the scheme to the last "@" goes), and password= and
// sslpassword= settings, quoted or not, in a URL's query or a keyword/value
// DSN.
func Redact(dsn string) string {
	dsn = passwordSettings(dsn).ReplaceAllString(dsn, "${1}xxxxx")
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

// passwordSettings returns the pattern of a password setting in dsn, quoted
// or not, which captures what comes before the value and the value: it ends
// at a space, and in a URL's query also at "&".
func passwordSettings(dsn string) *regexp.Regexp {
	if strings.Contains(dsn, "://") {
		return queryPassword
	}
	return kvPassword
}

var (
	kvPassword    = passwordSetting("")
	queryPassword = passwordSetting("&")
)

func passwordSetting(end string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)((?:^|[\s?&])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s` + end + `]+)`)
}

// hidePasswords replaces every password of dsn in text, for an error of a
// driver's parser that quotes dsn.
func hidePasswords(text, dsn string) string {
	var pws []string
	for _, m := range passwordSettings(dsn).FindAllStringSubmatch(dsn, -1) {
		pws = append(pws, m[2], strings.Trim(m[2], "'"))
	}
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				pws = append(pws, pw)
			}
		}
	}
	slices.SortFunc(pws, func(a, b string) int { return len(b) - len(a) }) // a password inside another goes last
	for _, pw := range pws {
		if pw != "" {
			text = strings.ReplaceAll(text, pw, "xxxxx")
		}
	}
	return text
}

// InvalidDSN is the error for a DSN a driver cannot use: it matches
// sqlstore.ErrInvalidDSN and names the DSN without its password.
func InvalidDSN(dsn string, err error) error {
	return fmt.Errorf("%w: %q: %s", sqlstore.ErrInvalidDSN, Redact(dsn), hidePasswords(err.Error(), dsn))
}
