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
	"time"

	"cirello.io/pglock"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
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
func Token(key int) fence.Token {
	return fence.Token{Resource: fmt.Sprintf("item/%d", key), Holder: Holder, Fence: Fence}
}

// PG is one migrated Postgres schema of its own, dropped by Close, with the
// workload table bench_item(id, n) holding rows 1..Keys. Attach opens more
// pools on the same schema, over another path or in another exec mode.
type PG struct {
	BaseURL string
	URL     string // with search_path set to Schema
	Schema  string
	Net     string            // the path to the server: "loopback" or through a DelayProxy
	Mode    pgx.QueryExecMode // pgx's DefaultQueryExecMode on Pool
	Pool    *pgxpool.Pool
	DB      *sql.DB // database/sql over Pool
	Pgx     *pgxv5.Driver
	SQL     *pgsql.Driver
	GatePgx *gate.Gate[pgx.Tx]
	GateSQL *gate.Gate[*sql.Tx]
	// Pglock and PglockHB are cirello.io/pglock clients on the table
	// bench_pglock, without and with pglock's heartbeat, over a database/sql
	// handle on Pool that keeps no idle connections (stdlib's default for a
	// pool: DB's idle connections would starve Pool's direct users).
	Pglock, PglockHB *pglock.Client
	pglockDB         *sql.DB
	owner            bool // Close drops the schema
}

// Net is one path from the benchmark to the Postgres server.
type Net struct {
	Name string // "loopback", or the round trip a DelayProxy adds
	URL  string // the server's URL along this path
}

// ExecModes are pgx's query exec modes, in the order the reports list them:
// the default first, then the modes a transaction pooler such as PgBouncer
// needs (exec, simple protocol).
var ExecModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// NewPG creates schema fgbench_<random> on the server at baseURL, migrates
// it, creates the workload table and pglock's table, and admits Token(k)
// for every key.
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
	p, err := open(ctx, Net{Name: "loopback", URL: baseURL}, schema, maxConns, pgx.QueryExecModeCacheStatement)
	if err != nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		return nil, err
	}
	p.owner = true
	if err := p.Pgx.Migrate(ctx); err != nil {
		p.Close(ctx)
		return nil, err
	}
	if _, err := p.Pool.Exec(ctx, createItems+`;
INSERT INTO bench_item (id, n) SELECT g, 0 FROM generate_series(1, 64) g;
`+createBareLease); err != nil {
		p.Close(ctx)
		return nil, err
	}
	if err := p.Pglock.TryCreateTable(); err != nil {
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

// Attach opens another pool on p's schema along n, in exec mode mode. Its
// Close leaves the schema to p.
func (p *PG) Attach(ctx context.Context, n Net, maxConns int32, mode pgx.QueryExecMode) (*PG, error) {
	return open(ctx, n, p.Schema, maxConns, mode)
}

// Pglock's lease and heartbeat in every scenario: a waiter sleeps a whole
// lease before it tries again, so the lease is short; the heartbeat, when
// on, is pglock's default proportion (5 s of 20 s).
const (
	pglockTable     = "bench_pglock"
	pglockLease     = time.Second
	pglockHeartbeat = pglockLease / 4
)

func newPglock(db *sql.DB, lease, heartbeat time.Duration, owner string) (*pglock.Client, error) {
	// pglock.New insists on lib/pq; UnsafeNew takes pgx's stdlib driver.
	return pglock.UnsafeNew(db, pglock.WithCustomTable(pglockTable), pglock.WithLeaseDuration(lease),
		pglock.WithHeartbeatFrequency(heartbeat), pglock.WithOwner(owner))
}

func open(ctx context.Context, n Net, schema string, maxConns int32, mode pgx.QueryExecMode) (*PG, error) {
	u, err := url.Parse(n.URL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	p := &PG{BaseURL: n.URL, URL: u.String(), Schema: schema, Net: n.Name, Mode: mode}
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.DefaultQueryExecMode = mode
	if p.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	p.DB = stdlib.OpenDBFromPool(p.Pool)
	p.DB.SetMaxIdleConns(int(maxConns))
	p.Pgx = pgxv5.New(p.Pool)
	p.SQL = pgsql.New(p.DB)
	p.GatePgx = gate.New(p.Pgx, nil)
	p.GateSQL = gate.New(p.SQL, nil)
	p.pglockDB = stdlib.OpenDBFromPool(p.Pool)
	if p.Pglock, err = newPglock(p.pglockDB, pglockLease, 0, "bench"); err == nil {
		p.PglockHB, err = newPglock(p.pglockDB, pglockLease, pglockHeartbeat, "bench")
	}
	if err != nil {
		p.Close(ctx)
		return nil, err
	}
	return p, nil
}

const createItems = `CREATE TABLE bench_item (id int PRIMARY KEY, n bigint NOT NULL)`

// createBareLease is the table and sequence of scenario 3's bound, the bare
// SQL lease (PG.BareLeaseAcquireRelease).
const createBareLease = `CREATE SEQUENCE bench_lease_seq;
CREATE TABLE bench_lease (resource text PRIMARY KEY, holder text NOT NULL, fence bigint NOT NULL,
  expires_at timestamptz NOT NULL, released boolean NOT NULL)`

// Close closes the pool and, unless p came from Attach, drops the schema.
func (p *PG) Close(ctx context.Context) {
	for _, db := range []*sql.DB{p.DB, p.pglockDB} {
		if db != nil {
			db.Close()
		}
	}
	if p.Pool != nil {
		p.Pool.Close()
	}
	if !p.owner {
		return
	}
	if conn, err := pgx.Connect(ctx, p.BaseURL); err == nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+p.Schema+" CASCADE")
		conn.Close(ctx)
	}
}

// SQLite is a migrated SQLite file in its own directory, removed by Close.
type SQLite struct {
	Dir  string
	D    *sqlite.Driver
	Gate *gate.Gate[*sql.Tx]
}

// NewSQLite creates a SQLite database with the workload table in a temp dir.
func NewSQLite(ctx context.Context) (*SQLite, error) {
	dir, err := os.MkdirTemp("", "fgbench-sqlite-")
	if err != nil {
		return nil, err
	}
	d, err := sqlite.Open(ctx, filepath.Join(dir, "bench.db"))
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

func gateToken(resource, holder string, n int64) fence.Token {
	return fence.Token{Resource: resource, Holder: holder, Fence: n}
}
