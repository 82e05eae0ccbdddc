package pgsql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/confine"
)

var _ sqlstore.Confiner = (*Driver)(nil)

// SQLSTATEs a confined session reads.
const (
	pgWriteGuardCode = "FG003" // the write guard's trigger: the outside SQL committed
	pgUndefinedTable = "42P01" // fencegate_write_guard is missing
	pgSyntaxError    = "42601" // also Parse's refusal of several statements
)

// pgTxTags are the command tags of statements that end, restart or nest a
// transaction. BEGIN inside a transaction only warns, and SAVEPOINT, RELEASE
// and ROLLBACK TO leave it open: all are refused after the fact, and the
// whole transaction rolls back.
var pgTxTags = []string{"BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "END", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE TRANSACTION"}

// Confine confines a transaction on conn, a connection of pgx's stdlib.
// Every statement goes through the extended protocol on its own (Parse
// refuses a string of several statements), the server's transaction status
// and command tag are checked after each one, and a deferred constraint
// trigger (fencegate_write_guard) turns any COMMIT that the session did not arm
// into a rollback. DO blocks and procedures cannot COMMIT inside a
// transaction block at all. COPY … FROM STDIN is refused before it runs:
// its input would never come. A database without the write guard fails
// Arm with an error matching sqlstore.ErrNotMigrated.
func (d *Driver) Confine(ctx context.Context, conn *sql.Conn, fn func(sqlstore.ConfinedSession) error) error {
	err := confine.CheckConn(conn, "on Postgres need pgx's stdlib", func(dc any) bool {
		_, ok := dc.(*stdlib.Conn)
		return ok
	})
	if err != nil {
		return err
	}
	return fn(&session{conn: conn})
}

// session confines a transaction on Postgres through pgx's stdlib.
type session struct {
	conn *sql.Conn
	key  string // the write key of this transaction, see fencegate_write_guard
}

func (s *session) Begin(ctx context.Context) (*sql.Tx, error) { return s.conn.BeginTx(ctx, nil) }

func (s *session) Arm(ctx context.Context, tx *sql.Tx) error {
	s.key = rand.Text()
	_, err := tx.ExecContext(ctx, `INSERT INTO fencegate_write_guard (key_hash) VALUES (sha256(convert_to($1, 'UTF8')))`, s.key)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgUndefinedTable {
		return fmt.Errorf("%w: %w", sqlstore.ErrNotMigrated, err) // the write guard is missing
	}
	return err
}

func (s *session) Exec(ctx context.Context, query string, args []any) (rows int64, committed bool, err error) {
	err = s.conn.Raw(func(dc any) error {
		rows, committed, err = s.exec(ctx, dc.(*stdlib.Conn), query, args)
		return err
	})
	return rows, committed, err
}

// exec runs query with the extended protocol, which takes exactly one
// statement, binding its arguments in the formats their described
// parameter types ask for, and reads the transaction status afterwards.
func (s *session) exec(ctx context.Context, sc *stdlib.Conn, query string, args []any) (int64, bool, error) {
	c := sc.Conn()
	pc := c.PgConn()
	if copyFromStdin(query) {
		return 0, false, fmt.Errorf("%w: COPY FROM STDIN (a fenced write has no input to copy)", sqlstore.ErrNotAllowed)
	}
	sd, err := pc.Prepare(ctx, "", query, nil)
	if err != nil {
		return 0, false, failed(err)
	}
	if len(sd.ParamOIDs) != len(args) {
		return 0, false, confine.ArgCount(len(sd.ParamOIDs), len(args))
	}
	values := make([][]byte, len(args))
	formats := make([]int16, len(args))
	m := c.TypeMap()
	for i, arg := range args {
		formats[i] = m.FormatCodeForOID(sd.ParamOIDs[i])
		if _, ok := arg.(string); ok {
			formats[i] = pgtype.TextFormatCode // as pgx does: the server parses text for any type
		}
		if values[i], err = m.Encode(sd.ParamOIDs[i], formats[i], arg, nil); err != nil {
			return 0, false, fmt.Errorf("%w: argument %d: %v", sqlstore.ErrInvalidStatement, i+1, err)
		}
	}
	rr := pc.ExecPrepared(ctx, "", values, formats, nil)
	for rr.NextRow() { // rows are not returned; read them as they come
	}
	tag, err := rr.Close()
	if err != nil {
		return 0, false, failed(err)
	}
	name := strings.ToUpper(tag.String())
	for _, t := range pgTxTags {
		if name == t || strings.HasPrefix(name, t+" ") {
			committed := pc.TxStatus() == 'I' && (t == "COMMIT" || t == "END")
			return 0, committed, fmt.Errorf("%w: it ran %s", sqlstore.ErrTransactionControl, t)
		}
	}
	if status := pc.TxStatus(); status != 'T' {
		return 0, false, fmt.Errorf("%w: after it the transaction status was %q", sqlstore.ErrTransactionControl, status)
	}
	if name == "" {
		return 0, false, confine.ErrNoStatement
	}
	for _, t := range []string{"INSERT", "UPDATE", "DELETE", "MERGE"} {
		if strings.HasPrefix(name, t+" ") {
			return tag.RowsAffected(), false, nil
		}
	}
	return 0, false, nil // a SELECT's tag counts the rows it returned
}

// failed labels the guard trigger's refusal of a COMMIT, and Parse's of a
// string of several statements.
func failed(err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	switch {
	case ok && pgErr.Code == pgWriteGuardCode:
		return fmt.Errorf("%w: it would have committed it (or fired its guard early), which rolled it back", sqlstore.ErrTransactionControl)
	case ok && pgErr.Code == pgSyntaxError && strings.Contains(pgErr.Message, "multiple commands"):
		return confine.ErrSeveral
	}
	return err
}

// Disarm sets the write key, so the guard lets this transaction's COMMIT
// through, and undoes a SET synchronous_commit of the outside SQL, so the
// admission commits as durably as the server is configured to.
func (s *session) Disarm(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT set_config('fencegate.write_key', $1, true), set_config('synchronous_commit', reset_val, true) FROM pg_settings WHERE name = 'synchronous_commit'`, s.key)
	return err
}

// Answered: an error with a SQLSTATE came from the server.
func (s *session) Answered(err error) bool {
	_, ok := errors.AsType[interface {
		error
		SQLState() string
	}](err)
	return ok
}

// copyFromStdin reports whether q looks like COPY … FROM STDIN, whose
// input pgconn would wait for forever. (A false positive only refuses.)
func copyFromStdin(q string) bool {
	for {
		q = strings.TrimLeft(q, " \t\r\n\f")
		switch {
		case strings.HasPrefix(q, "--"):
			_, q, _ = strings.Cut(q, "\n")
		case strings.HasPrefix(q, "/*"):
			_, q, _ = strings.Cut(q, "*/") // a nested comment only makes the check stricter
		default:
			u := strings.ToUpper(q)
			return strings.HasPrefix(u, "COPY") && strings.Contains(u, "STDIN")
		}
	}
}
