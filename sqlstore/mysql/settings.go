package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
)

// NewConnector returns a connector for sql.OpenDB to the server cfg (from
// Config) names, that checks every connection as it opens: a session whose
// settings break fencegate's statements (see the package documentation:
// autocommit, completion_type, sql_log_bin, sql_mode, sql_select_limit,
// insert_id) is closed, and its error matches sqlstore.ErrUnsafeSettings;
// the session's clock is put back on the server's. Open uses it; use it for
// a *sql.DB handed to New.
func NewConnector(cfg *gomysql.Config) (driver.Connector, error) {
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return checkedConnector{c}, nil
}

// checkedConnector is go-sql-driver's connector whose connections pass
// checkSession. It hands out go-sql-driver's connections themselves, so
// database/sql finds every optional interface they implement.
type checkedConnector struct{ driver.Connector }

func (c checkedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkSession(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkSession reads back conn's session settings (sessionSettings),
// refuses those that break fencegate's statements, and resets the
// session's clock (clockReset).
func checkSession(ctx context.Context, conn driver.Conn) error {
	q, qok := conn.(driver.QueryerContext)
	e, eok := conn.(driver.ExecerContext)
	if !qok || !eok {
		return fmt.Errorf("fencegate: mysql connection %T cannot be queried", conn)
	}
	rows, err := q.QueryContext(ctx, sessionSettings, nil)
	if err != nil {
		return fmt.Errorf("fencegate: read session settings: %w", mark(err))
	}
	v := make([]driver.Value, 6)
	err = rows.Next(v)
	rows.Close()
	if errors.Is(err, io.EOF) {
		err = errors.New("no row")
	}
	if err != nil {
		return fmt.Errorf("fencegate: read session settings: %w", mark(err))
	}
	s := make([]string, len(v))
	for i, x := range v {
		if b, ok := x.([]byte); ok {
			x = string(b)
		}
		s[i] = strings.ToUpper(fmt.Sprint(x))
	}
	if why := judgeSession(s[0], s[1], s[2], s[3], s[4], s[5]); why != "" {
		return fmt.Errorf("%w: mysql session %s", sqlstore.ErrUnsafeSettings, why)
	}
	if _, err := e.ExecContext(ctx, clockReset, nil); err != nil {
		return fmt.Errorf("fencegate: reset session clock: %w", mark(err))
	}
	return nil
}

// noSelectLimit is sql_select_limit's default: no limit.
const noSelectLimit = "18446744073709551615"

// judgeSession says why a session with these settings (upper case, as read
// back) would break fencegate's statements, or "" when it would not.
func judgeSession(autocommit, completion, logBin, sqlMode, selectLimit, insertID string) string {
	modes := strings.Split(sqlMode, ",")
	switch {
	case autocommit != "1":
		return "autocommit=" + autocommit + ": the statements fencegate runs on their own " +
			"(the refusal log's among them) would stay uncommitted on a pooled connection"
	case completion != "NO_CHAIN" && completion != "0":
		return "completion_type=" + completion + ": a COMMIT would open a new transaction (CHAIN) " +
			"or drop the connection (RELEASE), so later statements would stay uncommitted or fail"
	case logBin != "1":
		return "sql_log_bin=" + logBin + ": grants and writes would not reach the binary log, " +
			"so a replica promoted in a failover would issue their fences again"
	case slices.Contains(modes, "EMPTY_STRING_IS_NULL") || slices.Contains(modes, "ORACLE"):
		return "sql_mode=" + sqlMode + ": EMPTY_STRING_IS_NULL (which makes '' NULL: the refusal log " +
			"would read empty) and ORACLE change what fencegate's SQL means"
	case selectLimit != noSelectLimit:
		return "sql_select_limit=" + selectLimit + ": lists of leases, floors and waiters would be cut short"
	case insertID != "0":
		return "insert_id=" + insertID + ": the next refusal or waiter would take a sequence number chosen by hand"
	}
	return ""
}

// clockParam reports whether a DSN parameter (a session variable, as
// go-sql-driver sets it: SET name = value) names the session's clock:
// timestamp, @@timestamp, @@session.timestamp, `timestamp`, …
func clockParam(name string) bool {
	name = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(name), "`", ""))
	name = strings.TrimPrefix(name, "@@")
	for _, scope := range []string{"session", "local"} {
		if rest, ok := strings.CutPrefix(name, scope); ok && rest != "" && (rest[0] == '.' || rest[0] == ' ') {
			name = strings.TrimSpace(rest[1:])
		}
	}
	return name == "timestamp"
}
