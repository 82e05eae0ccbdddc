package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// The MariaDB column's statements: the same write as on Postgres, and
// MySQL's advisory lock, which waits at most getLockWait seconds (its unit).
const (
	updateItemMySQL = `UPDATE bench_item SET n = n + 1 WHERE id = ?`
	getLock         = `SELECT GET_LOCK(?, ?)`
	releaseLock     = `SELECT RELEASE_LOCK(?)`
	getLockWait     = 60
	releaseTimeout  = 5 * time.Second
)

// MySQL is a migrated MySQL or MariaDB database of its own, dropped by
// Close, with the workload table bench_item(id, n) holding rows 1..Keys and
// Token(k) admitted for every key.
type MySQL struct {
	BaseURL  string // the server, as given
	URL      string // naming Database
	Database string
	D        *mysql.Driver
	Gate     *gate.Gate[*sql.Tx]
}

// NewMySQL creates database fgbench_<random> on the server at baseURL (a
// mysql:// URL; its database, if any, is ignored), migrates it and fills
// the workload table, on a pool of at most maxConns connections.
func NewMySQL(ctx context.Context, baseURL string, maxConns int) (*MySQL, error) {
	m := &MySQL{BaseURL: baseURL, Database: "fgbench_" + randomHex(5)}
	var err error
	if m.URL, err = withDatabase(baseURL, m.Database); err != nil {
		return nil, err
	}
	if err := m.admin(ctx, "CREATE DATABASE "+m.Database); err != nil {
		return nil, err
	}
	if m.D, err = mysql.Open(ctx, m.URL); err != nil {
		m.Close(ctx)
		return nil, err
	}
	m.D.DB().SetMaxOpenConns(maxConns)
	m.D.DB().SetMaxIdleConns(maxConns)
	m.Gate = gate.New(m.D, nil)
	if err := m.D.Migrate(ctx); err != nil {
		m.Close(ctx)
		return nil, err
	}
	values, args := make([]string, Keys), make([]any, Keys)
	for k := range Keys {
		values[k], args[k] = "(?, 0)", k+1
	}
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`CREATE TABLE bench_item (id int PRIMARY KEY, n bigint NOT NULL) ENGINE=InnoDB`, nil},
		{`INSERT INTO bench_item (id, n) VALUES ` + strings.Join(values, ", "), args},
	} {
		if _, err := m.D.DB().ExecContext(ctx, stmt.sql, stmt.args...); err != nil {
			m.Close(ctx)
			return nil, err
		}
	}
	for k := 1; k <= Keys; k++ {
		if err := m.Gate.Admit(ctx, Token(k)); err != nil {
			m.Close(ctx)
			return nil, err
		}
	}
	return m, nil
}

// Close closes the pool and drops the database.
func (m *MySQL) Close(ctx context.Context) {
	if m.D != nil {
		m.D.Close()
	}
	_ = m.admin(ctx, "DROP DATABASE IF EXISTS "+m.Database)
}

// admin runs one statement on the server's mysql database, on a connection
// of its own. The name is ours (fgbench_ and hex), never the caller's.
func (m *MySQL) admin(ctx context.Context, stmt string) error {
	u, err := withDatabase(m.BaseURL, "mysql")
	if err != nil {
		return err
	}
	d, err := mysql.Open(ctx, u)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.DB().ExecContext(ctx, stmt)
	return err
}

// withDatabase is base naming database db.
func withDatabase(base, db string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", errors.New("bench: a MySQL URL that does not parse") // url's error quotes it, password included
	}
	u.Path = "/" + db
	return u.String(), nil
}

// redacted is rawURL without its password, for messages.
func redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// LockName is the GET_LOCK name of what: GET_LOCK's names are the
// server's, not a database's, so they carry the database's name.
func (m *MySQL) LockName(what string) string { return lockName(m.URL, what) }

func lockName(dsn, what string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return what
	}
	return strings.TrimPrefix(u.Path, "/") + "/" + what
}

// PlainTx is the unfenced baseline: BEGIN, UPDATE, COMMIT.
func (m *MySQL) PlainTx(ctx context.Context, key int) error {
	return sqlTx(ctx, m.D.DB(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, updateItemMySQL, key)
		return err
	})
}

// FencedTx is BEGIN, gate.Commit, UPDATE, COMMIT: one round trip more.
func (m *MySQL) FencedTx(ctx context.Context, key int) error {
	tok := Token(key)
	return sqlTx(ctx, m.D.DB(), func(tx *sql.Tx) error {
		if err := m.Gate.Commit(ctx, tx, tok); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, updateItemMySQL, key)
		return err
	})
}

// RoundTrip is SELECT 1: the price of one round trip.
func (m *MySQL) RoundTrip(ctx context.Context, _ int) error {
	_, err := m.D.DB().ExecContext(ctx, `SELECT 1`)
	return err
}

// GetLock is GET_LOCK, the UPDATE (autocommit) and RELEASE_LOCK on one
// connection: MySQL's advisory lock as users reach for it, 3 round trips
// like Postgres's session advisory lock.
func (m *MySQL) GetLock(ctx context.Context, key int) error {
	conn, err := m.D.DB().Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	name := m.LockName(Token(key).Resource)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, getLock, name, getLockWait).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("GET_LOCK(%q) returned %v", name, got)
	}
	_, err = conn.ExecContext(ctx, updateItemMySQL, key)
	// Release even when ctx has ended, or the pooled session keeps the lock;
	// bounded, for a server that stopped answering.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, rerr := conn.ExecContext(rctx, releaseLock, name); rerr != nil {
		// A session whose release failed must not go back to the pool
		// holding the lock: drop it, which ends the lock with the session.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if err == nil {
			err = rerr
		}
	}
	return err
}
