package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"modernc.org/sqlite"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/confine"
)

var _ sqlstore.Confiner = (*Driver)(nil)

// Confine confines a transaction on conn, a connection of
// modernc.org/sqlite. An authorizer on the connection refuses to compile
// transaction statements, savepoints, ATTACH, DETACH and PRAGMA; a commit
// hook vetoes any commit while the outside SQL runs, and a rollback hook
// notices a transaction that an error (or INSERT OR ROLLBACK) ended.
// SQLite's driver runs every statement of a multi-statement string and
// ignores extra arguments, so Exec also counts statements and parameters;
// that count is for honest errors, the authorizer is what confines.
func (d *Driver) Confine(ctx context.Context, conn *sql.Conn, fn func(sqlstore.ConfinedSession) error) error {
	err := confine.CheckConn(conn, "on SQLite need modernc.org/sqlite", func(dc any) bool {
		_, auth := dc.(sqlite.AuthorizerRegisterer)
		_, hook := dc.(sqlite.HookRegisterer)
		return auth && hook
	})
	if err != nil {
		return err
	}
	return fn(&session{conn: conn})
}

// session confines a transaction on modernc.org/sqlite.
type session struct {
	conn *sql.Conn

	mu         sync.Mutex
	denied     error // why the authorizer last refused an action
	dml        bool  // the statement compiled inserts, updates or deletes
	rolledBack bool  // the rollback hook fired while the outside SQL ran
}

// authorize refuses transaction statements and savepoints, and ATTACH,
// DETACH and PRAGMA (synchronous=OFF would weaken the admission's commit).
func authorize(action sqlite.AuthorizerActionCode, arg1 string) error {
	switch action {
	case sqlite.AuthTransaction:
		return fmt.Errorf("%w: it runs %s", sqlstore.ErrTransactionControl, arg1)
	case sqlite.AuthSavepoint:
		what := map[string]string{"BEGIN": "SAVEPOINT", "RELEASE": "RELEASE", "ROLLBACK": "ROLLBACK TO"}[arg1]
		return fmt.Errorf("%w: it runs %s", sqlstore.ErrTransactionControl, cmp.Or(what, "a savepoint statement"))
	case sqlite.AuthAttach:
		return fmt.Errorf("%w: ATTACH", sqlstore.ErrNotAllowed)
	case sqlite.AuthDetach:
		return fmt.Errorf("%w: DETACH", sqlstore.ErrNotAllowed)
	case sqlite.AuthPragma:
		return fmt.Errorf("%w: PRAGMA %s", sqlstore.ErrNotAllowed, arg1)
	}
	return nil
}

func (s *session) Begin(ctx context.Context) (*sql.Tx, error) { return s.conn.BeginTx(ctx, nil) }

func (s *session) Arm(ctx context.Context, tx *sql.Tx) error {
	return s.conn.Raw(func(dc any) error {
		dc.(sqlite.HookRegisterer).RegisterCommitHook(func() int32 { return 1 }) // non-zero: the COMMIT becomes a ROLLBACK
		dc.(sqlite.HookRegisterer).RegisterRollbackHook(func() {
			s.mu.Lock()
			s.rolledBack = true
			s.mu.Unlock()
		})
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, arg1, _, _, triggerOrView string) sqlite.AuthorizerReturnCode {
			if triggerOrView == "" && (action == sqlite.AuthInsert || action == sqlite.AuthUpdate || action == sqlite.AuthDelete) {
				s.mu.Lock()
				s.dml = true
				s.mu.Unlock()
			}
			if err := authorize(action, arg1); err != nil {
				s.mu.Lock()
				s.denied = err
				s.mu.Unlock()
				return sqlite.AuthorizerDeny
			}
			return sqlite.AuthorizerOK
		})
	})
}

func (s *session) Exec(ctx context.Context, query string, args []any) (rows int64, committed bool, err error) {
	err = s.conn.Raw(func(dc any) error {
		rows, err = s.exec(ctx, dc.(driver.ExecerContext), query, args)
		return err
	})
	return rows, false, err
}

func (s *session) exec(ctx context.Context, dc driver.ExecerContext, query string, args []any) (int64, error) {
	n, err := sqliteParams(query)
	if err != nil {
		return 0, err
	}
	if n != len(args) {
		return 0, confine.ArgCount(n, len(args))
	}
	values, err := confine.NamedValues(args)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.dml = false
	s.mu.Unlock()
	res, err := dc.ExecContext(ctx, query, values)
	s.mu.Lock()
	denied, rolledBack, dml := s.denied, s.rolledBack, s.dml
	s.denied = nil
	s.mu.Unlock()
	if err != nil {
		if denied != nil {
			return 0, denied
		}
		return 0, err
	}
	if rolledBack { // unreachable without an error, but never run on outside the transaction
		return 0, fmt.Errorf("%w: the transaction was rolled back", sqlstore.ErrTransactionControl)
	}
	if !dml {
		return 0, nil // SQLite's count is the last INSERT, UPDATE or DELETE's
	}
	return res.RowsAffected()
}

func (s *session) Disarm(ctx context.Context, tx *sql.Tx) error {
	s.mu.Lock()
	rolledBack := s.rolledBack
	s.mu.Unlock()
	if rolledBack {
		return fmt.Errorf("%w: the transaction was rolled back", sqlstore.ErrTransactionControl)
	}
	return s.conn.Raw(func(dc any) error {
		dc.(sqlite.HookRegisterer).RegisterCommitHook(nil)
		dc.(sqlite.HookRegisterer).RegisterRollbackHook(nil)
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(nil)
	})
}

// Answered: a *sqlite.Error came from the database.
func (s *session) Answered(err error) bool {
	_, ok := errors.AsType[*sqlite.Error](err)
	return ok
}
