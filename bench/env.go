package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// Keys is how many rows the workload table holds: one per writer at most.
const Keys = 64

// Holder and Fence are the token every benchmark write presents: the steady
// state of a lease, whose every write but the first carries the floor's own
// fence.
const (
	Holder = "bench"
	Fence  = 1
)

// Token returns the token guarding row key.
func Token(key int) gate.Token {
	return gate.Token{Resource: fmt.Sprintf("item/%d", key), Holder: Holder, Fence: Fence}
}

// PG is one migrated Postgres schema of its own, dropped by Close, with the
// workload table bench_item(id, n) holding rows 1..Keys.
type PG struct {
	BaseURL string
	URL     string // with search_path set to Schema
	Schema  string
	Pool    *pgxpool.Pool
	DB      *sql.DB // database/sql over Pool
	Pgx     *sqlstore.PgxDriver
	SQL     *sqlstore.SQLDriver
	GatePgx *gate.Gate[pgx.Tx]
	GateSQL *gate.Gate[*sql.Tx]
}

// NewPG creates schema fgbench_<random> on the server at baseURL, migrates
// it, creates the workload table and admits Token(k) for every key.
func NewPG(ctx context.Context, baseURL string, maxConns int32) (*PG, error) {
	schema := "fgbench_" + randomHex(5)
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", baseURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	p := &PG{BaseURL: baseURL, URL: u.String(), Schema: schema}
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	if p.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	p.DB = stdlib.OpenDBFromPool(p.Pool)
	p.DB.SetMaxIdleConns(int(maxConns))
	p.Pgx = sqlstore.NewPgx(p.Pool)
	p.SQL = sqlstore.NewSQL(p.DB, sqlstore.Postgres)
	p.GatePgx = gate.New(p.Pgx, nil)
	p.GateSQL = gate.New(p.SQL, nil)
	if err := p.Pgx.Migrate(ctx); err != nil {
		p.Close(ctx)
		return nil, err
	}
	if _, err := p.Pool.Exec(ctx, createItems+`;
INSERT INTO bench_item (id, n) SELECT g, 0 FROM generate_series(1, 64) g`); err != nil {
		p.Close(ctx)
		return nil, err
	}
	for k := 1; k <= Keys; k++ {
		if err := p.GatePgx.Admit(ctx, Token(k)); err != nil {
			p.Close(ctx)
			return nil, err
		}
	}
	return p, nil
}

const createItems = `CREATE TABLE bench_item (id int PRIMARY KEY, n bigint NOT NULL)`

// Close drops the schema and closes the pool.
func (p *PG) Close(ctx context.Context) {
	if p.DB != nil {
		p.DB.Close()
	}
	if p.Pool != nil {
		p.Pool.Close()
	}
	if conn, err := pgx.Connect(ctx, p.BaseURL); err == nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+p.Schema+" CASCADE")
		conn.Close(ctx)
	}
}

// SQLite is a migrated SQLite file in its own directory, removed by Close.
type SQLite struct {
	Dir  string
	D    *sqlstore.SQLDriver
	Gate *gate.Gate[*sql.Tx]
}

// NewSQLite creates a SQLite database with the workload table in a temp dir.
func NewSQLite(ctx context.Context) (*SQLite, error) {
	dir, err := os.MkdirTemp("", "fgbench-sqlite-")
	if err != nil {
		return nil, err
	}
	d, err := sqlstore.Open(ctx, filepath.Join(dir, "bench.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &SQLite{Dir: dir, D: d, Gate: gate.New(d, nil)}
	if err := d.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := d.DB().ExecContext(ctx, createItems+`;
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 64) INSERT INTO bench_item SELECT i, 0 FROM g`); err != nil {
		s.Close()
		return nil, err
	}
	for k := 1; k <= Keys; k++ {
		if err := s.Gate.Admit(ctx, Token(k)); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes the database and removes its directory.
func (s *SQLite) Close() {
	s.D.Close()
	os.RemoveAll(s.Dir)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type gateTok = gate.Token

func gateToken(resource, holder string, fence int64) gate.Token {
	return gate.Token{Resource: resource, Holder: holder, Fence: fence}
}
