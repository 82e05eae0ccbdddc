package confined

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
)

// pgWriteGuardCode is the SQLSTATE migration 00004's trigger raises when the
// user's SQL commits.
const pgWriteGuardCode = "FG003"

// pgUndefinedTable is the SQLSTATE of a missing fencegate_write_guard.
const pgUndefinedTable = "42P01"

// pgSyntaxError is the SQLSTATE of Parse's refusal of several statements.
const pgSyntaxError = "42601"

// pgTxTags are the command tags of statements that end, restart or nest a
// transaction. BEGIN inside a transaction only warns, and SAVEPOINT, RELEASE
// and ROLLBACK TO leave it open: all are refused after the fact, and the
// whole transaction rolls back.
var pgTxTags = []string{"BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "END", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE TRANSACTION"}

// pgSession confines a transaction on Postgres through pgx's stdlib.
type pgSession struct {
	key string // the write key of this transaction, see migration 00004
}

func (s *pgSession) arm(ctx context.Context, tx *sql.Tx) error {
	s.key = rand.Text()
	_, err := tx.ExecContext(ctx, `INSERT INTO fencegate_write_guard (key_hash) VALUES (sha256(convert_to($1, 'UTF8')))`, s.key)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgUndefinedTable {
		return fmt.Errorf("%w: %w", sqlstore.ErrNotMigrated, err) // migration 00004 is missing
	}
	return err
}

// exec runs st with the extended protocol, which takes exactly one
// statement, binding its arguments in the formats their described
// parameter types ask for, and reads the transaction status afterwards.
func (s *pgSession) exec(ctx context.Context, dc any, st Statement) (int64, bool, error) {
	c := dc.(*stdlib.Conn).Conn()
	pc := c.PgConn()
	if pgCopyFromStdin(st.SQL) {
		return 0, false, fmt.Errorf("%w: COPY FROM STDIN (a fenced write has no input to copy)", ErrNotAllowed)
	}
	sd, err := pc.Prepare(ctx, "", st.SQL, nil)
	if err != nil {
		return 0, false, s.failed(pc, err)
	}
	if len(sd.ParamOIDs) != len(st.Args) {
		return 0, false, fmt.Errorf("%w: it takes %d argument%s, got %d", ErrInvalidStatement, len(sd.ParamOIDs), plural(len(sd.ParamOIDs)), len(st.Args))
	}
	values := make([][]byte, len(st.Args))
	formats := make([]int16, len(st.Args))
	m := c.TypeMap()
	for i, arg := range st.Args {
		formats[i] = m.FormatCodeForOID(sd.ParamOIDs[i])
		if _, ok := arg.(string); ok {
			formats[i] = pgtype.TextFormatCode // as pgx does: the server parses text for any type
		}
		if values[i], err = m.Encode(sd.ParamOIDs[i], formats[i], arg, nil); err != nil {
			return 0, false, fmt.Errorf("%w: argument %d: %v", ErrInvalidStatement, i+1, err)
		}
	}
	rr := pc.ExecPrepared(ctx, "", values, formats, nil)
	for rr.NextRow() { // rows are not returned; read them as they come
	}
	tag, err := rr.Close()
	if err != nil {
		return 0, false, s.failed(pc, err)
	}
	name := strings.ToUpper(tag.String())
	for _, t := range pgTxTags {
		if name == t || strings.HasPrefix(name, t+" ") {
			committed := pc.TxStatus() == 'I' && (t == "COMMIT" || t == "END")
			return 0, committed, fmt.Errorf("%w: it ran %s", ErrTransactionControl, t)
		}
	}
	if status := pc.TxStatus(); status != 'T' {
		return 0, false, fmt.Errorf("%w: after it the transaction status was %q", ErrTransactionControl, status)
	}
	if name == "" {
		return 0, false, fmt.Errorf("%w: no statement, only comments", ErrInvalidStatement)
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
func (s *pgSession) failed(pc *pgconn.PgConn, err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	switch {
	case ok && pgErr.Code == pgWriteGuardCode:
		return fmt.Errorf("%w: it would have committed it (or fired its guard early), which rolled it back", ErrTransactionControl)
	case ok && pgErr.Code == pgSyntaxError && strings.Contains(pgErr.Message, "multiple commands"):
		return fmt.Errorf("%w: more than one statement (pass each as its own)", ErrInvalidStatement)
	}
	return err
}

// disarm sets the write key, so the guard lets this transaction's COMMIT
// through, and undoes a SET synchronous_commit of the user's SQL, so the
// admission commits as durably as the server is configured to.
func (s *pgSession) disarm(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT set_config('fencegate.write_key', $1, true), set_config('synchronous_commit', reset_val, true) FROM pg_settings WHERE name = 'synchronous_commit'`, s.key)
	return err
}

// pgCopyFromStdin reports whether q looks like COPY … FROM STDIN, whose
// input pgconn would wait for forever. (A false positive only refuses.)
func pgCopyFromStdin(q string) bool {
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

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
