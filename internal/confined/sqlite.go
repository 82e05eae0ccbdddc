package confined

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"

	"modernc.org/sqlite"
)

// sqliteSession confines a transaction on modernc.org/sqlite.
type sqliteSession struct {
	conn *sql.Conn

	mu         sync.Mutex
	denied     error // why the authorizer last refused an action
	dml        bool  // the statement compiled inserts, updates or deletes
	rolledBack bool  // the rollback hook fired while the user's SQL ran
}

// sqliteAuthorize refuses transaction statements and savepoints, and ATTACH,
// DETACH and PRAGMA (synchronous=OFF would weaken the admission's commit).
func sqliteAuthorize(action sqlite.AuthorizerActionCode, arg1 string) error {
	switch action {
	case sqlite.AuthTransaction:
		return fmt.Errorf("%w: it runs %s", ErrTransactionControl, arg1)
	case sqlite.AuthSavepoint:
		what := map[string]string{"BEGIN": "SAVEPOINT", "RELEASE": "RELEASE", "ROLLBACK": "ROLLBACK TO"}[arg1]
		return fmt.Errorf("%w: it runs %s", ErrTransactionControl, cmp.Or(what, "a savepoint statement"))
	case sqlite.AuthAttach:
		return fmt.Errorf("%w: ATTACH", ErrNotAllowed)
	case sqlite.AuthDetach:
		return fmt.Errorf("%w: DETACH", ErrNotAllowed)
	case sqlite.AuthPragma:
		return fmt.Errorf("%w: PRAGMA %s", ErrNotAllowed, arg1)
	}
	return nil
}

func (s *sqliteSession) arm(ctx context.Context, tx *sql.Tx) error {
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
			if err := sqliteAuthorize(action, arg1); err != nil {
				s.mu.Lock()
				s.denied = err
				s.mu.Unlock()
				return sqlite.AuthorizerDeny
			}
			return sqlite.AuthorizerOK
		})
	})
}

func (s *sqliteSession) exec(ctx context.Context, dc any, st Statement) (int64, bool, error) {
	n, err := sqliteParams(st.SQL)
	if err != nil {
		return 0, false, err
	}
	if n != len(st.Args) {
		return 0, false, fmt.Errorf("%w: it takes %d argument%s, got %d", ErrInvalidStatement, n, plural(n), len(st.Args))
	}
	args, err := namedValues(st.Args)
	if err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	s.dml = false
	s.mu.Unlock()
	res, err := dc.(driver.ExecerContext).ExecContext(ctx, st.SQL, args)
	s.mu.Lock()
	denied, rolledBack, dml := s.denied, s.rolledBack, s.dml
	s.denied = nil
	s.mu.Unlock()
	if err != nil {
		if denied != nil {
			return 0, false, denied
		}
		return 0, false, err
	}
	if rolledBack { // unreachable without an error, but never run on outside the transaction
		return 0, false, fmt.Errorf("%w: the transaction was rolled back", ErrTransactionControl)
	}
	if !dml {
		return 0, false, nil // SQLite's count is the last INSERT, UPDATE or DELETE's
	}
	rows, err := res.RowsAffected()
	return rows, false, err
}

func (s *sqliteSession) disarm(ctx context.Context, tx *sql.Tx) error {
	s.mu.Lock()
	rolledBack := s.rolledBack
	s.mu.Unlock()
	if rolledBack {
		return fmt.Errorf("%w: the transaction was rolled back", ErrTransactionControl)
	}
	return s.conn.Raw(func(dc any) error {
		dc.(sqlite.HookRegisterer).RegisterCommitHook(nil)
		dc.(sqlite.HookRegisterer).RegisterRollbackHook(nil)
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(nil)
	})
}
