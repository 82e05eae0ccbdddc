// Package confine holds what the drivers' confined sessions
// (sqlstore.ConfinedSession) share: argument conversion, the errors for a
// statement of the wrong shape, and comment skipping for statement scans.
package confine

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
)

// Errors for a string that is not exactly one statement.
var (
	ErrSeveral     = fmt.Errorf("%w: more than one statement (pass each as its own)", sqlstore.ErrInvalidStatement)
	ErrNoStatement = fmt.Errorf("%w: no statement, only comments", sqlstore.ErrInvalidStatement)
)

// ArgCount is the error for a statement taking want arguments given got.
func ArgCount(want, got int) error {
	s := "s"
	if want == 1 {
		s = ""
	}
	return fmt.Errorf("%w: it takes %d argument%s, got %d", sqlstore.ErrInvalidStatement, want, s, got)
}

// NamedValues converts args as database/sql would for a driver without a
// converter of its own.
func NamedValues(args []any) ([]driver.NamedValue, error) {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("%w: argument %d: %v", sqlstore.ErrInvalidStatement, i+1, err)
		}
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out, nil
}

// LineCommentEnd returns where the line comment that starts at q[i] ends:
// after its newline, or at the end of q.
func LineCommentEnd(q string, i int) int {
	if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(q)
}

// BlockCommentEnd returns where the /* comment that starts at q[i] ends:
// after its */, or at the end of q.
func BlockCommentEnd(q string, i int) int {
	if j := strings.Index(q[i+2:], "*/"); j >= 0 {
		return i + j + 4
	}
	return len(q)
}

// CheckConn fails, naming what the driver needs, unless usable accepts
// conn's driver connection.
func CheckConn(conn *sql.Conn, needs string, usable func(dc any) bool) error {
	return conn.Raw(func(dc any) error {
		if !usable(dc) {
			return fmt.Errorf("fencegate: confined writes %s, not %T", needs, dc)
		}
		return nil
	})
}
