package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/confine"
)

var (
	_ sqlstore.Confiner         = (*Driver)(nil)
	_ sqlstore.StatementChecker = (*Driver)(nil)
)

// MySQL's XA errors: XAER_RMFAIL is the refusal of a statement that would end
// or implicitly commit an active XA transaction; the others answer XA
// statements aimed at it.
const (
	myXAERNota    = 1397
	myXAERInval   = 1398
	myXAERRmfail  = 1399
	myXAEROutside = 1400
	myEmptyQuery  = 1065
	myNotPrepared = 1295 // the statement cannot be prepared
)

// mysqlTxWords are the first words of statements that end, restart or nest a
// transaction in MySQL or another dialect. The server refuses those that
// would end the XA transaction anyway; SAVEPOINT and RELEASE it would run,
// and END is a syntax error: the early answer keeps the errors honest.
var mysqlTxWords = []string{"BEGIN", "COMMIT", "END", "RELEASE", "ROLLBACK", "SAVEPOINT", "START", "XA"}

// mysqlDDLWords and mysqlCommitWords are the first words of statements that
// MySQL and MariaDB commit implicitly, which the server refuses inside the
// XA transaction with XAER_RMFAIL (the server is the guard: a CREATE hidden
// in a procedure is refused all the same). Refused by their first word, they
// get an answer that says what to do instead, before anything is sent.
// CREATE and DROP TEMPORARY TABLE neither commit nor are refused; ANALYZE
// TABLE commits, but MariaDB's ANALYZE UPDATE (say) is a write: the server
// tells them apart.
var (
	mysqlDDLWords    = []string{"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"}
	mysqlCommitWords = []string{"CHECK", "FLUSH", "GRANT", "INSTALL", "LOCK", "OPTIMIZE", "REPAIR", "RESET", "REVOKE", "UNINSTALL"}
)

// mysqlImplicitCommit says, in the answers, why MySQL cannot run a statement
// in a fenced write.
const mysqlImplicitCommit = "MySQL and MariaDB commit it implicitly, so no transaction can hold it"

// Confine confines a transaction on conn, a connection of
// go-sql-driver/mysql, by making it an XA transaction under a random id.
// While it is active the server refuses, with XAER_RMFAIL, every statement
// that would end it or commit implicitly: COMMIT, ROLLBACK, BEGIN, DDL,
// LOCK TABLES, also inside a procedure or a prepared statement; the random
// id keeps XA END out of the outside SQL's reach too. The session's COMMIT
// is XA END then XA COMMIT … ONE PHASE: never prepared, the transaction
// never outlives its connection. Statements run as server-side prepared
// statements, one each (their parameters are ?); SAVEPOINT and RELEASE,
// which XA allows, are refused by their first word, as is a string of
// several statements.
//
// fn runs while Confine holds conn's driver connection: the session's
// transaction is on a connection of its own over it.
func (d *Driver) Confine(ctx context.Context, conn *sql.Conn, fn func(sqlstore.ConfinedSession) error) error {
	return conn.Raw(func(dc any) error {
		base, ok := dc.(xaBase)
		if !ok {
			return fmt.Errorf("fencegate: confined writes on MySQL need go-sql-driver/mysql, not %T", dc)
		}
		xconn, closeX, err := openXA(ctx, base)
		if err != nil {
			return fmt.Errorf("fencegate: connect: %w", err)
		}
		defer closeX()
		return fn(&session{conn: xconn})
	})
}

// xaBase is what an XA connection needs of the driver connection it wraps.
type xaBase interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

// openXA returns a connection over base, the driver connection of an
// *sql.Conn held for this write, whose transactions are XA transactions;
// close releases it (base stays open: its *sql.Conn is closed afterwards).
func openXA(ctx context.Context, base xaBase) (*sql.Conn, func(), error) {
	db := sql.OpenDB(xaConnector{base})
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return conn, func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never pooled
		_ = conn.Close()
		_ = db.Close()
	}, nil
}

// session confines an XA transaction on conn, an XA connection (openXA).
type session struct{ conn *sql.Conn }

func (s *session) Begin(ctx context.Context) (*sql.Tx, error) { return s.conn.BeginTx(ctx, nil) }
func (s *session) Arm(context.Context, *sql.Tx) error         { return nil }
func (s *session) Disarm(context.Context, *sql.Tx) error      { return nil }

// Answered: a *mysql.MySQLError came from the server.
func (s *session) Answered(err error) bool {
	_, ok := errors.AsType[*gomysql.MySQLError](err)
	return ok
}

func (s *session) Exec(ctx context.Context, query string, args []any) (rows int64, committed bool, err error) {
	err = s.conn.Raw(func(dc any) error {
		rows, err = exec(ctx, dc.(*xaConn).base, query, args)
		return err
	})
	return rows, false, err
}

// CheckStatement refuses, by its first words, a statement that is not
// exactly one, one that ends, restarts or nests the transaction, and one
// that MySQL commits implicitly (DDL: create tables outside the gate).
func (d *Driver) CheckStatement(query string) error { return mysqlCheck(query) }

func mysqlCheck(query string) error {
	words, err := mysqlScan(query)
	if err != nil || len(words) == 0 {
		return err
	}
	first := words[0]
	switch {
	case slices.Contains(mysqlTxWords, first):
		return fmt.Errorf("%w: it runs %s", sqlstore.ErrTransactionControl, first)
	case slices.Contains(mysqlDDLWords, first) && !slices.Contains(words[1:], "TEMPORARY"):
		return fmt.Errorf("%w: %s is DDL, and %s: create and alter tables outside the gate (with the mysql client, say), then write to them through it",
			sqlstore.ErrTransactionControl, first, mysqlImplicitCommit)
	case slices.Contains(mysqlCommitWords, first):
		return fmt.Errorf("%w: it runs %s, and %s: run it outside the gate", sqlstore.ErrTransactionControl, first, mysqlImplicitCommit)
	}
	return nil
}

func exec(ctx context.Context, base xaBase, query string, args []any) (int64, error) {
	if err := mysqlCheck(query); err != nil {
		return 0, err
	}
	values, err := confine.NamedValues(args)
	if err != nil {
		return 0, err
	}
	var res driver.Result
	stmt, err := base.PrepareContext(ctx, query)
	switch {
	case mysqlErrno(err) == myNotPrepared && len(values) == 0:
		res, err = base.ExecContext(ctx, query, nil)
	case err == nil:
		defer stmt.Close()
		if n := stmt.NumInput(); n != len(values) {
			return 0, confine.ArgCount(n, len(values))
		}
		res, err = stmt.(driver.StmtExecContext).ExecContext(ctx, values)
	}
	if err != nil {
		return 0, mysqlFailed(err)
	}
	return res.RowsAffected()
}

func mysqlErrno(err error) uint16 {
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		return me.Number
	}
	return 0
}

// mysqlFailed labels the server's refusals of transaction control.
func mysqlFailed(err error) error {
	switch mysqlErrno(err) {
	case myXAERRmfail:
		return fmt.Errorf("%w: it would end or commit the transaction (DDL, for one: %s; run it outside the gate) (%v)", sqlstore.ErrTransactionControl, mysqlImplicitCommit, err)
	case myXAERNota, myXAERInval, myXAEROutside:
		return fmt.Errorf("%w: %v", sqlstore.ErrTransactionControl, err)
	case myEmptyQuery:
		return confine.ErrNoStatement
	}
	return err
}

// mysqlScan returns the leading words of the MySQL statement q, up to
// four, upper-cased (none when it starts with something else), and an error
// matching sqlstore.ErrInvalidStatement when q holds no statement or more
// than one. It skips comments and quoted text the way MySQL's lexer does; it
// keeps a confined write's answers honest and is not what confines the
// transaction (the XA transaction is).
func mysqlScan(q string) ([]string, error) {
	var words []string
	statements, inStmt, leading := 0, false, false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue
		case c == '#' || strings.HasPrefix(q[i:], "-- ") || strings.HasPrefix(q[i:], "--\t") || strings.HasPrefix(q[i:], "--\n") || q[i:] == "--":
			i = confine.LineCommentEnd(q, i)
			continue
		case strings.HasPrefix(q[i:], "/*"):
			i = confine.BlockCommentEnd(q, i)
			continue
		case c == ';':
			inStmt = false
			i++
			continue
		}
		if !inStmt {
			if statements == 1 {
				return nil, confine.ErrSeveral
			}
			statements, inStmt, leading = statements+1, true, true
		}
		if leading {
			j := i
			for j < len(q) && (q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z') {
				j++
			}
			if j > i && len(words) < 4 {
				words = append(words, strings.ToUpper(q[i:j]))
				i = j
				continue
			}
			leading = false
		}
		switch c {
		case '\'', '"', '`':
			i++
			for i < len(q) && q[i] != c {
				if q[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i++ // the closing quote (a doubled one reopens the string at once)
		default:
			i++
		}
	}
	if statements == 0 {
		return nil, confine.ErrNoStatement
	}
	return words, nil
}

// xaConnector hands a database/sql pool the one driver connection it wraps.
type xaConnector struct{ base xaBase }

func (c xaConnector) Connect(context.Context) (driver.Conn, error) { return &xaConn{base: c.base}, nil }
func (c xaConnector) Driver() driver.Driver                        { return xaDriver{} }

type xaDriver struct{}

func (xaDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fencegate: the XA connection is opened by its connector only")
}

// xaConn is a go-sql-driver/mysql connection whose transactions are XA
// transactions under a random id.
type xaConn struct{ base xaBase }

var (
	_ driver.ConnBeginTx        = (*xaConn)(nil)
	_ driver.ExecerContext      = (*xaConn)(nil)
	_ driver.QueryerContext     = (*xaConn)(nil)
	_ driver.ConnPrepareContext = (*xaConn)(nil)
	_ driver.NamedValueChecker  = (*xaConn)(nil)
)

func (c *xaConn) Prepare(q string) (driver.Stmt, error) { return c.base.Prepare(q) }
func (c *xaConn) Close() error                          { return nil } // the *sql.Conn that owns base closes it
func (c *xaConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *xaConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.base.PrepareContext(ctx, q)
}

func (c *xaConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.base.ExecContext(ctx, q, args)
}

func (c *xaConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.base.QueryContext(ctx, q, args)
}

func (c *xaConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// BeginTx starts an XA transaction. Its id is random base32 text, written
// into the statement because XA statements take no parameters; it never
// comes from the user's SQL.
func (c *xaConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly || opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
		return nil, errors.New("fencegate: a confined write's transaction takes no options")
	}
	tx := &xaTx{c: c, ctx: ctx, xid: "'fencegate-" + rand.Text() + "'"}
	if err := tx.run(ctx, "XA START "+tx.xid); err != nil {
		return nil, err
	}
	return tx, nil
}

// xaTx ends its XA transaction within the context it began under: a
// confined write cancels that before it rolls back, so a rollback never waits on a server
// that stopped answering (the connection is closed then, and the server
// rolls back an XA transaction that was never prepared).
type xaTx struct {
	c   *xaConn
	ctx context.Context
	xid string // quoted
}

func (t *xaTx) run(ctx context.Context, q string) error {
	_, err := t.c.ExecContext(ctx, q, nil)
	return err
}

// Commit ends the XA transaction and commits it in one phase: it is never
// prepared, so it never outlives the connection.
func (t *xaTx) Commit() error {
	if err := t.run(t.ctx, "XA END "+t.xid); err != nil {
		return err
	}
	return t.run(t.ctx, "XA COMMIT "+t.xid+" ONE PHASE")
}

func (t *xaTx) Rollback() error {
	_ = t.run(t.ctx, "XA END "+t.xid) // fails if an error already ended it
	return t.run(t.ctx, "XA ROLLBACK "+t.xid)
}
