package workload

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"

	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// The workload's own tables, next to fencegate's in a migrated database.
//
// fg_events holds the fenced writes (kind 'write', one row per committed
// write, inserted in the write's transaction) and the floor raises (kind
// 'raise', inserted by a trigger on fencegate_floor whenever a floor is
// created or rises). Both draw their id from one counter. On SQLite there is
// one writer at a time, so id order is commit order. On Postgres both draw
// it while holding the resource's floor row, so id order is commit order
// only if that lock, the thing under test, works: the checker takes commit
// order from logical decoding there instead (package observe).
//
// fg_lease_log (SQLite, MariaDB) holds every version of a fencegate_lease row,
// written by a trigger, in commit order: the leases' lives in database time.
// On Postgres the decoded changes carry the same.
//
// With the co-located coordinator, floors rise only when a lease is granted
// (Acquire raises the floor to the new fence in the granting transaction),
// so the 'raise' rows are the durable record of every committed grant, with
// the holder it went to. On the resources whose fences come from outside
// (fg_external_fence, admitted with gate.Admit) they record every admission.

var postgresSchema = []string{
	`CREATE SEQUENCE fg_order CACHE 1`,
	`CREATE TABLE fg_events (
	    id       bigint PRIMARY KEY,
	    kind     text   NOT NULL CHECK (kind IN ('write', 'raise')),
	    resource text   NOT NULL,
	    fence    bigint NOT NULL,
	    holder   text   NOT NULL,
	    agent    text   NOT NULL DEFAULT '',
	    op_id    text   UNIQUE,
	    at       timestamptz NOT NULL DEFAULT clock_timestamp()
	)`,
	// The schema is spelled out in the body: the function runs in the
	// workers' sessions, whatever their search_path.
	`CREATE FUNCTION fg_log_raise() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    IF TG_OP = 'INSERT' OR NEW.floor > OLD.floor THEN
	        INSERT INTO %[1]s.fg_events (id, kind, resource, fence, holder)
	        VALUES (nextval('%[1]s.fg_order'), 'raise', NEW.resource, NEW.floor, NEW.holder);
	    END IF;
	    RETURN NULL;
	END $$`,
	`CREATE TRIGGER fg_log_raise AFTER INSERT OR UPDATE ON fencegate_floor
	    FOR EACH ROW EXECUTE FUNCTION fg_log_raise()`,
	`CREATE SEQUENCE fg_external_fence CACHE 1`,
	fileWritesTable("text", "bigint"),
}

// On MariaDB every fg_events row takes its id from a counter row (fg_order),
// bumped by a trigger in the inserting transaction: the counter's row lock
// is held from the draw to the commit, so a transaction that draws later
// commits later, and id order is commit order for every resource at once,
// whether or not the floor row's lock works. There is no logical decoding to
// check it against. fg_lease_log holds every version of a fencegate_lease
// row, written by triggers, its id drawn from the same counter: in commit
// order, as on SQLite, the leases' lives in database time.
var mysqlSchema = []string{
	`CREATE TABLE fg_order (id TINYINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE = InnoDB`,
	`INSERT INTO fg_order VALUES (1, 0)`,
	`CREATE TABLE fg_events (
	    id       BIGINT         NOT NULL DEFAULT 0 PRIMARY KEY,
	    kind     VARCHAR(8)     NOT NULL CHECK (kind IN ('write', 'raise')),
	    resource VARBINARY(256) NOT NULL,
	    fence    BIGINT         NOT NULL,
	    holder   VARBINARY(256) NOT NULL,
	    agent    VARCHAR(64)    NOT NULL DEFAULT '',
	    op_id    VARCHAR(128)   UNIQUE,
	    at       DATETIME(6)    NOT NULL DEFAULT UTC_TIMESTAMP(6)
	) ENGINE = InnoDB`,
	// The transaction's own update is what a plain SELECT sees of the row,
	// whatever its isolation level.
	`CREATE TRIGGER fg_events_id BEFORE INSERT ON fg_events FOR EACH ROW BEGIN
	    UPDATE fg_order SET v = v + 1 WHERE id = 1;
	    SET NEW.id = (SELECT v FROM fg_order WHERE id = 1);
	END`,
	// The grants, from fencegate_lease: a trigger on fencegate_floor would
	// break the driver (MariaDB 10.11 sends 0 as the insert id of a
	// statement on a table with any trigger, and the floor upsert reads its
	// floor from there: it fails closed with "unexpected outcome"). The
	// granting transaction raises the floor to the lease's fence, so a new
	// generation of a lease row is a floor raise; admissions (gate.Admit)
	// raise floors with no lease and go unrecorded, so a MariaDB history
	// runs none.
	`CREATE TRIGGER fg_log_grant_insert AFTER INSERT ON fencegate_lease FOR EACH ROW
	    INSERT INTO fg_events (kind, resource, fence, holder) VALUES ('raise', NEW.resource, NEW.fence, NEW.holder)`,
	`CREATE TRIGGER fg_log_grant_update AFTER UPDATE ON fencegate_lease FOR EACH ROW
	    INSERT INTO fg_events (kind, resource, fence, holder)
	    SELECT 'raise', NEW.resource, NEW.fence, NEW.holder FROM DUAL WHERE NEW.fence <> OLD.fence`,
	`CREATE TABLE fg_external_fence (id BIGINT AUTO_INCREMENT PRIMARY KEY) ENGINE = InnoDB`,
	fileWritesTable("VARCHAR(256)", "BIGINT") + ` ENGINE = InnoDB`,
	// Times in microseconds since the epoch, as on SQLite: the lease's
	// DATETIME(6) columns hold UTC, whatever the session's time_zone.
	`CREATE TABLE fg_lease_log (
	    id         BIGINT         NOT NULL DEFAULT 0 PRIMARY KEY,
	    resource   VARBINARY(256) NOT NULL,
	    holder     VARBINARY(256) NOT NULL,
	    fence      BIGINT         NOT NULL,
	    granted_at BIGINT         NOT NULL,
	    expires_at BIGINT         NOT NULL,
	    released   BOOLEAN        NOT NULL
	) ENGINE = InnoDB`,
	`CREATE TRIGGER fg_lease_log_id BEFORE INSERT ON fg_lease_log FOR EACH ROW BEGIN
	    UPDATE fg_order SET v = v + 1 WHERE id = 1;
	    SET NEW.id = (SELECT v FROM fg_order WHERE id = 1);
	END`,
	`CREATE TRIGGER fg_lease_log_insert AFTER INSERT ON fencegate_lease FOR EACH ROW
	    INSERT INTO fg_lease_log (resource, holder, fence, granted_at, expires_at, released)
	    VALUES (NEW.resource, NEW.holder, NEW.fence,
	        TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', NEW.granted_at),
	        TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', NEW.expires_at), NEW.released)`,
	`CREATE TRIGGER fg_lease_log_update AFTER UPDATE ON fencegate_lease FOR EACH ROW
	    INSERT INTO fg_lease_log (resource, holder, fence, granted_at, expires_at, released)
	    VALUES (NEW.resource, NEW.holder, NEW.fence,
	        TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', NEW.granted_at),
	        TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', NEW.expires_at), NEW.released)`,
}

var sqliteSchema = []string{
	`CREATE TABLE fg_events (
	    id       INTEGER PRIMARY KEY AUTOINCREMENT,
	    kind     TEXT    NOT NULL CHECK (kind IN ('write', 'raise')),
	    resource TEXT    NOT NULL,
	    fence    INTEGER NOT NULL,
	    holder   TEXT    NOT NULL,
	    agent    TEXT    NOT NULL DEFAULT '',
	    op_id    TEXT    UNIQUE
	)`,
	`CREATE TRIGGER fg_log_raise_insert AFTER INSERT ON fencegate_floor BEGIN
	    INSERT INTO fg_events (kind, resource, fence, holder) VALUES ('raise', NEW.resource, NEW.floor, NEW.holder);
	END`,
	`CREATE TRIGGER fg_log_raise_update AFTER UPDATE OF floor ON fencegate_floor WHEN NEW.floor > OLD.floor BEGIN
	    INSERT INTO fg_events (kind, resource, fence, holder) VALUES ('raise', NEW.resource, NEW.floor, NEW.holder);
	END`,
	`CREATE TABLE fg_external_fence (id INTEGER PRIMARY KEY AUTOINCREMENT)`,
	fileWritesTable("TEXT", "INTEGER"),
	// Every version of a lease row, in id order, which on SQLite is commit
	// order: the lease's life in database time, for the checker.
	`CREATE TABLE fg_lease_log (
	    id         INTEGER PRIMARY KEY AUTOINCREMENT,
	    resource   TEXT    NOT NULL,
	    holder     TEXT    NOT NULL,
	    fence      INTEGER NOT NULL,
	    granted_at INTEGER NOT NULL,
	    expires_at INTEGER NOT NULL,
	    released   INTEGER NOT NULL
	)`,
	`CREATE TRIGGER fg_lease_log_insert AFTER INSERT ON fencegate_lease BEGIN
	    INSERT INTO fg_lease_log (resource, holder, fence, granted_at, expires_at, released)
	    VALUES (NEW.resource, NEW.holder, NEW.fence, NEW.granted_at, NEW.expires_at, NEW.released);
	END`,
	`CREATE TRIGGER fg_lease_log_update AFTER UPDATE ON fencegate_lease BEGIN
	    INSERT INTO fg_lease_log (resource, holder, fence, granted_at, expires_at, released)
	    VALUES (NEW.resource, NEW.holder, NEW.fence, NEW.granted_at, NEW.expires_at, NEW.released);
	END`,
}

// ExternalFenceBase is added to the outside fence source's numbers, so that
// its fences never equal the coordinator's (fences are checked unique per
// source).
const ExternalFenceBase = 1_000_000_000

// drawExternal draws the next fence of the outside fence source: the
// workload's own counter, standing in for etcd revisions or Consul's
// LockIndex. Its argument is ExternalFenceBase.
var drawExternal = map[sqlstore.Dialect]string{
	pgsql.Dialect:  `SELECT $1::bigint + nextval('fg_external_fence')`,
	sqlite.Dialect: `INSERT INTO fg_external_fence DEFAULT VALUES RETURNING ?1 + id`,
	// MariaDB 10.5+ (not MySQL): INSERT … RETURNING. An auto-committed
	// AUTO_INCREMENT value is durable with innodb_flush_log_at_trx_commit=1.
	mysql.Dialect: `INSERT INTO fg_external_fence () VALUES () RETURNING ? + id`,
}

// insertWrite is the fenced write: one row of fg_events, in the write's
// transaction, after gate.Commit.
var insertWrite = map[sqlstore.Dialect]string{
	pgsql.Dialect: `INSERT INTO fg_events (id, kind, resource, fence, holder, agent, op_id)
	    VALUES (nextval('fg_order'), 'write', $1, $2, $3, $4, $5)`,
	sqlite.Dialect: `INSERT INTO fg_events (kind, resource, fence, holder, agent, op_id)
	    VALUES ('write', ?1, ?2, ?3, ?4, ?5)`,
	mysql.Dialect: `INSERT INTO fg_events (kind, resource, fence, holder, agent, op_id)
	    VALUES ('write', ?, ?, ?, ?, ?)`,
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Setup creates the workload's tables in a migrated database. schema is the
// Postgres schema the tables go in (the one on the workers' search_path);
// it is ignored for SQLite and MySQL.
func Setup(ctx context.Context, db *sql.DB, dialect sqlstore.Dialect, schema string) error {
	stmts := sqliteSchema
	if dialect == mysql.Dialect {
		stmts = mysqlSchema
	}
	if dialect == pgsql.Dialect {
		if !identifier.MatchString(schema) {
			return fmt.Errorf("workload: schema %q is not a plain identifier", schema)
		}
		stmts = make([]string, len(postgresSchema))
		for i, s := range postgresSchema {
			stmts[i] = s
			if i == 2 {
				stmts[i] = fmt.Sprintf(s, schema)
			}
		}
		if _, err := db.ExecContext(ctx, `SET search_path TO `+schema); err != nil {
			return err
		}
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("workload: setup: %w\n%s", err, s)
		}
	}
	return nil
}

// Event is one row of fg_events.
type Event struct {
	ID       int64
	Kind     string // "write" or "raise"
	Resource string
	Fence    int64
	Holder   string
	Agent    string
	OpID     string // writes only
}

// ReadEvents reads fg_events in id order.
func ReadEvents(ctx context.Context, db *sql.DB) ([]Event, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, kind, resource, fence, holder, agent, COALESCE(op_id, '') FROM fg_events ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.Kind, &e.Resource, &e.Fence, &e.Holder, &e.Agent, &e.OpID); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ReadLeaseLog reads SQLite's log of lease versions (fg_lease_log) in id
// order, which is commit order there.
func ReadLeaseLog(ctx context.Context, db *sql.DB) ([]observe.Mark, error) {
	rows, err := db.QueryContext(ctx, `SELECT resource, holder, fence, granted_at, expires_at, released FROM fg_lease_log ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []observe.Mark{}
	for rows.Next() {
		m := observe.Mark{Kind: observe.Lease}
		var granted, expires int64
		if err := rows.Scan(&m.Resource, &m.Holder, &m.Fence, &granted, &expires, &m.Released); err != nil {
			return nil, err
		}
		m.GrantedAt, m.ExpiresAt = time.UnixMicro(granted), time.UnixMicro(expires)
		out = append(out, m)
	}
	return out, rows.Err()
}

// ReadRejections reads the whole rejection log in sequence order.
func ReadRejections(ctx context.Context, db *sql.DB, dialect sqlstore.Dialect) ([]sqlstore.Rejection, error) {
	var out []sqlstore.Rejection
	var d interface {
		sqlstore.Store
		Close() error
	} = pgsql.New(db)
	switch dialect {
	case sqlite.Dialect:
		d = sqlite.New(db)
	case mysql.Dialect:
		d = mysql.New(db)
	}
	defer d.Close() // stops its statement cache; db stays open
	ex := d.Executor()
	var after int64
	for {
		page, err := ex.RejectionList(ctx, &sqlstore.RejectionListParams{AfterSeq: after, Limit: 10000})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 10000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// AdvanceFences is the runbook's step between promoting an asynchronous
// standby and letting clients in: lease.Coordinator.AdvanceFences (what
// `fencegate fence advance` runs) with margin, on the Postgres database at
// dsn. The workload's outside fence source is moved by as much: it stands
// in for etcd or Consul, which do not fail over with the database, so it
// must not go back with it. It returns the lowest fence the next grant can
// carry.
func AdvanceFences(ctx context.Context, dsn string, margin int64) (int64, error) {
	d, err := pgsql.Open(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	next, err := lease.NewCoordinator(d, nil).AdvanceFences(ctx, margin)
	if err != nil {
		return 0, err
	}
	if _, err := d.DB().ExecContext(ctx, `SELECT setval('fg_external_fence', nextval('fg_external_fence') + $1)`, margin); err != nil {
		return 0, fmt.Errorf("advance the outside fence source: %w", err)
	}
	return next, nil
}

// fileWritesTable is fg_file_writes: the writes under claims (Claims), one
// row per write, numbered per file (or member) in commit order. A write
// takes the next number as MAX(seq)+1 of its file's rows: a transaction
// that cannot see an uncommitted row of its file takes the same number and
// fails on the primary key once that row commits, so a row numbered s
// commits only after the row numbered s-1 did, on every dialect, whatever
// the gate's own locks do.
func fileWritesTable(text, integer string) string {
	return fmt.Sprintf(`CREATE TABLE fg_file_writes (
	    target %[1]s NOT NULL,
	    seq    %[2]s NOT NULL,
	    fence  %[2]s NOT NULL,
	    op_id  %[1]s NOT NULL UNIQUE,
	    PRIMARY KEY (target, seq)
	)`, text, integer)
}

// insertFileWrite is the write under a claim: the next row of its target.
var insertFileWrite = map[sqlstore.Dialect]string{
	pgsql.Dialect: `INSERT INTO fg_file_writes (target, seq, fence, op_id)
	    SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM fg_file_writes WHERE target = $1`,
	sqlite.Dialect: `INSERT INTO fg_file_writes (target, seq, fence, op_id)
	    SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3 FROM fg_file_writes WHERE target = ?1`,
	mysql.Dialect: `INSERT INTO fg_file_writes (target, seq, fence, op_id)
	    SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? FROM fg_file_writes WHERE target = ?`,
}

// FileWrite is one row of fg_file_writes.
type FileWrite struct {
	Target string
	Seq    int64
	Fence  int64
	OpID   string
}

// ReadFileWrites reads fg_file_writes, per target in commit order.
func ReadFileWrites(ctx context.Context, db *sql.DB) ([]FileWrite, error) {
	rows, err := db.QueryContext(ctx, `SELECT target, seq, fence, op_id FROM fg_file_writes ORDER BY target, seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FileWrite
	for rows.Next() {
		var w FileWrite
		if err := rows.Scan(&w.Target, &w.Seq, &w.Fence, &w.OpID); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
