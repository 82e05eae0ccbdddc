package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	"modernc.org/sqlite"

	"github.com/fencegate/fencegate/sqlstore"
)

// checkSettings reads back the settings conn runs with (settingsQuery). It
// refuses, with an error matching sqlstore.ErrUnsafeSettings, those under
// which fencegate's guarantee does not hold, and returns as durability
// warnings those that weaken it within what SQLite promises.
func checkSettings(ctx context.Context, conn driver.QueryerContext) ([]string, error) {
	rows, err := conn.QueryContext(ctx, settingsQuery, nil)
	if err != nil {
		return nil, fmt.Errorf("fencegate: read sqlite settings: %w", err)
	}
	defer rows.Close()
	v := make([]driver.Value, 3)
	if err := rows.Next(v); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("no row")
		}
		return nil, fmt.Errorf("fencegate: read sqlite settings: %w", err)
	}
	journal, _ := v[0].(string)
	sync, _ := v[1].(int64)
	locking, _ := v[2].(string)
	return judgeSettings(strings.ToLower(journal), sync, strings.ToLower(locking))
}

// judgeSettings is checkSettings' verdict on the values it read: the
// journal mode and locking mode in lower case, synchronous as SQLite's
// number (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA).
func judgeSettings(journal string, sync int64, locking string) ([]string, error) {
	var why string
	switch {
	case journal == "off" || journal == "memory":
		why = fmt.Sprintf("journal_mode=%s: a transaction rolled back or cut short by a crash "+
			"can leave its pages in the file, corrupting it or keeping a refused write", journal)
	case sync <= 0:
		why = "synchronous=OFF: a commit acknowledged just before an OS crash or power loss " +
			"can be lost, or the file corrupted, and a fence issued again"
	case locking == "exclusive":
		why = "locking_mode=EXCLUSIVE: the first connection to write keeps the file locked " +
			"until it closes, so every other connection, pooled or in another process, fails busy"
	}
	if why != "" {
		return nil, fmt.Errorf("%w: sqlite %s", sqlstore.ErrUnsafeSettings, why)
	}
	if sync == 1 {
		return []string{"synchronous=NORMAL: a commit acknowledged just before an OS crash or power loss " +
			"can be lost and its fence issued again (synchronous=FULL, fencegate's default, waits for the disk)"}, nil
	}
	return nil, nil
}

// NewConnector returns a connector for sql.OpenDB to the SQLite database
// dsn names, with the settings of DSN, that checks every connection as it
// opens: one whose journal mode, synchronous level or locking mode break
// fencegate's guarantee (journal_mode OFF or MEMORY, synchronous=OFF,
// locking_mode=EXCLUSIVE, whichever DSN parameter or pragma set them) is
// closed, and its error matches sqlstore.ErrUnsafeSettings. Open uses it;
// use it for a *sql.DB handed to New. Malformed input returns an error
// matching sqlstore.ErrInvalidDSN.
func NewConnector(dsn string) (driver.Connector, error) {
	sqliteDSN, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	c, err := sqlite.NewConnector(sqliteDSN)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", sqlstore.ErrInvalidDSN, dsn, err)
	}
	return checkedConnector{c}, nil
}

// checkedConnector is a modernc connector whose connections pass
// checkSettings. It hands out modernc's connections themselves, so
// database/sql finds every optional interface they implement.
type checkedConnector struct{ driver.Connector }

func (c checkedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("fencegate: sqlite connection %T cannot be queried", conn)
	}
	if _, err := checkSettings(ctx, q); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

var _ sqlstore.DurabilityReporter = (*Driver)(nil)

// DurabilityWarnings reports the settings under which SQLite can lose a
// commit it acknowledged (see sqlstore.Store.DurabilityWarnings), read back from
// one of the pool's connections: synchronous=NORMAL. Settings that break
// the guarantee outright (a *sql.DB handed to New that was not opened
// through NewConnector can have them) are an error matching
// sqlstore.ErrUnsafeSettings.
func (d *Driver) DurabilityWarnings(ctx context.Context) ([]string, error) {
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("fencegate: read durability settings: %w", d.ClassifyError(err))
	}
	defer conn.Close()
	var warnings []string
	err = conn.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("fencegate: sqlite connection %T cannot be queried", dc)
		}
		warnings, err = checkSettings(ctx, q)
		return err
	})
	if err != nil {
		return nil, d.ClassifyError(err)
	}
	return warnings, nil
}
