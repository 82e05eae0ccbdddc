package sqlstoretest

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseConfinement states what every sqlstore.Confiner's session does
// with outside SQL that would end its transaction: it refuses it with
// ErrTransactionControl, and runs a plain statement. (What else each
// database refuses is its driver's tests'.)
func exerciseConfinement[TTx any](run runner[TTx]) {
	run("Confiner/TransactionControl", func(t *testing.T, d sqlstore.Driver[TTx]) {
		c, ok := any(d).(sqlstore.Confiner)
		db, hasDB := any(d).(interface{ DB() *sql.DB })
		if !ok || !hasDB {
			t.Skip("the driver confines no transaction (its database/sql drivers do)")
		}
		conn, err := db.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Never back to the pool once confined: ErrBadConn makes
		// database/sql discard it.
		defer func() {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			_ = conn.Close()
		}()
		err = c.Confine(ctx, conn, func(s sqlstore.ConfinedSession) error {
			tx, err := s.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if err := s.Arm(ctx, tx); err != nil {
				return err
			}
			if _, _, err := s.Exec(ctx, "SELECT 1", nil); err != nil {
				t.Errorf("a plain statement: %v", err)
			}
			if _, committed, err := s.Exec(ctx, "COMMIT", nil); !errors.Is(err, sqlstore.ErrTransactionControl) || committed {
				t.Errorf("COMMIT in a confined transaction = committed %v, %v; want ErrTransactionControl", committed, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
