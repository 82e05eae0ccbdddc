package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Dialect is what a database/sql dialect supplies to DB.
type Dialect struct {
	Name           sqlstore.Dialect
	Queries        *Queries
	Migrations     func() sqlstore.Migrations
	Classify       Classifier
	ClockPrecision time.Duration
	// CacheStatements keeps every statement prepared (a driver that parses
	// each statement anew, such as modernc.org/sqlite, spends a tenth of a
	// fenced transaction on the parse). Postgres's pgx stdlib caches them
	// itself.
	CacheStatements bool
}

// Driver is a database/sql driver of one dialect: it implements
// sqlstore.Driver[*sql.Tx] but for the capabilities a dialect says itself
// (SupportsListener, ListenLeases, DurabilityWarnings). Driver packages
// keep one and declare each of its methods on their own Driver, so that
// their documentation shows them.
type Driver struct {
	db         *sql.DB
	dialect    Dialect
	autocommit *Queries     // dialect.Queries.Autocommit(), for Executor
	onClose    func() error // closes what the driver's Open opened; nil after New
	stmts      *stmtCache
}

// NewDriver returns a driver over db, which speaks dialect. onClose, when set,
// runs at Close after the statements are closed (a driver's Open closes
// what it opened there); with nil, db stays the caller's to close.
func NewDriver(db *sql.DB, dialect Dialect, onClose func() error) *Driver {
	d := &Driver{db: db, dialect: dialect, autocommit: dialect.Queries.Autocommit(), onClose: onClose}
	if dialect.CacheStatements {
		d.stmts = newStmtCache(db)
	}
	return d
}

// DB returns the *sql.DB the driver runs on.
func (d *Driver) DB() *sql.DB { return d.db }

// Dialect reports which SQL dialect the database speaks.
func (d *Driver) Dialect() sqlstore.Dialect { return d.dialect.Name }

// ClockPrecision reports the tick of the database's clock.
func (d *Driver) ClockPrecision() time.Duration { return d.dialect.ClockPrecision }

// ClassifyError marks err for sqlstore.IsRetryable and sqlstore.IsConnLost.
func (d *Driver) ClassifyError(err error) error { return d.dialect.Classify.Classify(err) }

// Migrations returns the dialect's embedded goose migrations.
func (d *Driver) Migrations() sqlstore.Migrations { return d.dialect.Migrations() }

// Begin starts a read-write transaction.
func (d *Driver) Begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	return tx, d.ClassifyError(err)
}

// Commit commits tx.
func (d *Driver) Commit(_ context.Context, tx *sql.Tx) error { return d.ClassifyError(tx.Commit()) }

// Rollback rolls tx back; a transaction that already ended is not an error.
// database/sql's Rollback takes no context, so Rollback waits for it at most
// until ctx ends, then returns ctx's error and leaves the rollback running.
// Either way tx can no longer commit when Rollback returns: a later
// tx.Commit fails with sql.ErrTxDone.
func (d *Driver) Rollback(ctx context.Context, tx *sql.Tx) error {
	return Rollback(ctx, tx, nil, d.ClassifyError)
}

// UnwrapExecutor runs fencegate statements inside tx.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) sqlstore.Executor {
	return New(sqlQuerier{c: tx, tx: tx, stmts: d.stmts}, d.dialect.Queries, d.dialect.Classify, nil)
}

// Executor runs fencegate statements on the pool, each on its own.
func (d *Driver) Executor() sqlstore.Executor {
	return New(sqlQuerier{c: d.db, stmts: d.stmts}, d.autocommit, d.dialect.Classify, d.InTx)
}

// OnConn takes a connection from the pool, then runs fn with an Executor on
// it, each statement on its own, and gives the connection back
// (sqlstore.Store.OnConn). A driver that caches prepared statements (SQLite)
// runs fn on Executor instead: its statements are prepared per pool, and
// its wait is for the database's write lock, not for a connection.
func (d *Driver) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	if d.stmts != nil {
		return fn(d.Executor())
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", d.ClassifyError(err))
	}
	defer conn.Close()
	return fn(New(sqlQuerier{c: conn}, d.autocommit, d.dialect.Classify, d.InTx))
}

// MaxConns returns the *sql.DB's MaxOpenConnections, 0 for no limit.
func (d *Driver) MaxConns() int { return d.db.Stats().MaxOpenConnections }

// InTx runs fn in a new transaction, committing if fn returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(d.UnwrapExecutor(tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := d.Commit(ctx, tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Migrate applies every pending fencegate migration (sqlstore.MigrateUp).
func (d *Driver) Migrate(ctx context.Context) error {
	return sqlstore.MigrateUp(ctx, d.db, d.dialect.Migrations())
}

// Close releases the driver's prepared statements and closes what the
// driver's Open opened. A driver made with New leaves the caller's *sql.DB
// open; call Close before closing that *sql.DB.
func (d *Driver) Close() error {
	d.stmts.close() // first: it waits for background prepares to return their connections
	if d.onClose == nil {
		return nil
	}
	return d.onClose()
}

// sqlConn is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlQuerier runs statements on c; with a statement cache, through
// prepared statements (bound to tx when c is a transaction).
type sqlQuerier struct {
	c     sqlConn
	tx    *sql.Tx
	stmts *stmtCache
}

// conn returns what to run query on: a cached prepared statement when the
// driver keeps them, else the connection or transaction itself.
func (q sqlQuerier) conn(ctx context.Context, query string) (sqlStmt, bool) {
	stmt := q.stmts.get(query)
	if stmt == nil {
		return nil, false
	}
	if q.tx != nil {
		return q.tx.StmtContext(ctx, stmt), true // closed with the transaction
	}
	return stmt, true
}

func (q sqlQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if stmt, ok := q.conn(ctx, query); ok {
		res, err = stmt.ExecContext(ctx, args...)
	}
	if res == nil && (err == nil || isForeignStmt(err)) {
		res, err = q.c.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) QueryRow(ctx context.Context, query string, args ...any) Scanner {
	if stmt, ok := q.conn(ctx, query); ok {
		return stmtRow{stmt.QueryRowContext(ctx, args...), func() Scanner { return q.c.QueryRowContext(ctx, query, args...) }}
	}
	return q.c.QueryRowContext(ctx, query, args...)
}

func (q sqlQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	var rs *sql.Rows
	var err error
	if stmt, ok := q.conn(ctx, query); ok {
		rs, err = stmt.QueryContext(ctx, args...)
	}
	if rs == nil && (err == nil || isForeignStmt(err)) {
		rs, err = q.c.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

// sqlRows adapts *sql.Rows, whose Close returns an error that Err repeats.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// foreignStmt is database/sql's error for a statement prepared on one *sql.DB
// and bound to a transaction of another (Tx.StmtContext): a caller may begin
// its transaction on its own *sql.DB over the same SQLite file. It is
// returned before anything runs, so the text can run instead. database/sql
// makes it with errors.New, so only its text identifies it.
const foreignStmt = "sql: Tx.Stmt: statement from different database used"

func isForeignStmt(err error) bool { return err != nil && err.Error() == foreignStmt }

// stmtRow is a row from a cached statement that falls back to the query
// text when the statement belongs to another *sql.DB than the transaction.
type stmtRow struct {
	row  *sql.Row
	text func() Scanner
}

func (r stmtRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if isForeignStmt(err) {
		return r.text().Scan(dest...)
	}
	return err
}

// sqlStmt is what *sql.Stmt offers, for sqlQuerier.conn's result.
type sqlStmt interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}

// stmtCache prepares each of the driver's statements once on the *sql.DB;
// database/sql then keeps it prepared on every connection that runs it, and
// Tx.StmtContext binds it to a transaction's own connection. A nil
// *stmtCache caches nothing.
type stmtCache struct {
	db     *sql.DB
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // background prepares

	mu        sync.RWMutex
	stmts     map[string]*sql.Stmt
	preparing map[string]bool
	closed    bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &stmtCache{db: db, ctx: ctx, cancel: cancel, stmts: map[string]*sql.Stmt{}, preparing: map[string]bool{}}
}

// get returns the prepared statement for query, or nil the first time.
// Preparing takes a connection from the pool, and the caller may hold the
// pool's last one in its transaction, so a miss prepares in the background
// and the caller runs the text this once.
func (c *stmtCache) get(query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	stmt := c.stmts[query]
	c.mu.RUnlock()
	if stmt != nil {
		return stmt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmts[query] == nil && !c.preparing[query] && !c.closed {
		c.preparing[query] = true
		c.wg.Add(1)
		go c.prepare(query)
	}
	return c.stmts[query]
}

func (c *stmtCache) prepare(query string) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	stmt, err := c.db.PrepareContext(ctx, query)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.preparing, query)
	switch {
	case err != nil:
		// Not migrated yet, or the pool was busy: the next miss tries again.
	case c.closed:
		_ = stmt.Close()
	default:
		c.stmts[query] = stmt
	}
}

// close stops background prepares, waits for them (so that no connection
// is still out when the *sql.DB closes), and closes every statement.
func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, stmt := range c.stmts {
		_ = stmt.Close()
	}
	clear(c.stmts)
}

// WaitPrepared waits for d's background statement prepares, so that a test
// knows the statement cache is warm.
func WaitPrepared(d *Driver) {
	if d.stmts != nil {
		d.stmts.wg.Wait()
	}
}
