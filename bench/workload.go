package bench

import (
	"context"
	"database/sql"
	"fmt"

	"cirello.io/pglock"
	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/gate/pgxgate"
)

// Op is one guarded write of row key, start to finish.
type Op func(ctx context.Context, key int) error

// The caller's write, the same in every variant.
const (
	updateItem       = `UPDATE bench_item SET n = n + 1 WHERE id = $1`
	updateItemSQLite = `UPDATE bench_item SET n = n + 1 WHERE id = ?1`
	// Advisory lock ids: a class of our own in the high bits, the key below.
	advisoryBase     = int64(0x6662) << 32
	advisoryXactLock = `SELECT pg_advisory_xact_lock($1)`
	advisoryLock     = `SELECT pg_advisory_lock($1)`
	advisoryUnlock   = `SELECT pg_advisory_unlock($1)`
	// prototypeUpsert is the gate statement before the hot-key fix (the
	// GREATEST upsert of SQL-NOTES.md): it writes a new row version on every
	// call, equal fences included.
	prototypeUpsert = `
INSERT INTO fencegate_floor AS f (resource, floor, holder) VALUES ($1, $2, $3)
ON CONFLICT (resource) DO UPDATE
   SET floor = GREATEST(f.floor, EXCLUDED.floor),
       holder = CASE WHEN EXCLUDED.floor >= f.floor THEN EXCLUDED.holder ELSE f.holder END
RETURNING f.floor, f.floor = $2 AS admitted`
)

// PgPlainTx is the unfenced baseline: BEGIN, UPDATE, COMMIT (3 round trips).
func (p *PG) PgPlainTx(ctx context.Context, key int) error {
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, updateItem, key)
		return err
	})
}

// PgPlainAutocommit is the UPDATE alone, in one round trip.
func (p *PG) PgPlainAutocommit(ctx context.Context, key int) error {
	_, err := p.Pool.Exec(ctx, updateItem, key)
	return err
}

// PgRoundTrip is SELECT 1: the price of one round trip.
func (p *PG) PgRoundTrip(ctx context.Context, _ int) error {
	_, err := p.Pool.Exec(ctx, `SELECT 1`)
	return err
}

// PgFencedTx is BEGIN, gate.Commit, UPDATE, COMMIT (4 round trips).
func (p *PG) PgFencedTx(ctx context.Context, key int) error {
	tok := Token(key)
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		if err := p.GatePgx.Commit(ctx, tx, tok); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, updateItem, key)
		return err
	})
}

// PgBeginFencedTx is pgxgate.BeginFenced (BEGIN and the fence in one round
// trip), UPDATE, COMMIT: the round trips of PgPlainTx.
func (p *PG) PgBeginFencedTx(ctx context.Context, key int) error {
	tx, err := pgxgate.BeginFenced(ctx, p.GatePgx, p.Pool, Token(key), pgx.TxOptions{})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, updateItem, key); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// PgRowLockTx is the least a fence that locks its floor row can cost:
// BeginFenced's transaction with the fence replaced by a bare locking read
// of the floor row (no function, no check, no refusal), pipelined with BEGIN
// in the same batch. It admits anything, so it is a bound to read the fence
// against, not a fence.
func (p *PG) PgRowLockTx(ctx context.Context, key int) error {
	tok := Token(key)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT floor FROM fencegate_floor WHERE resource = $1 FOR NO KEY UPDATE`, tok.Resource)
	br := p.Pool.SendBatch(ctx, b)
	tx := br.Tx()
	if err := br.Close(); err != nil {
		if tx != nil {
			_ = tx.Rollback(ctx)
		}
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, updateItem, key); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// PgFencedBatch is pgxgate.CommitBatch with the UPDATE: one round trip.
func (p *PG) PgFencedBatch(ctx context.Context, key int) error {
	b := &pgx.Batch{}
	b.Queue(updateItem, key)
	return pgxgate.CommitBatch(ctx, p.GatePgx, p.Pool, Token(key), b)
}

// PgPrototypeTx is PgFencedTx with the gate statement before the hot-key fix.
func (p *PG) PgPrototypeTx(ctx context.Context, key int) error {
	tok := Token(key)
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		var floor int64
		var admitted bool
		if err := tx.QueryRow(ctx, prototypeUpsert, tok.Resource, tok.Fence, tok.Holder).Scan(&floor, &admitted); err != nil {
			return err
		}
		if !admitted {
			return fmt.Errorf("refused at floor %d", floor)
		}
		_, err := tx.Exec(ctx, updateItem, key)
		return err
	})
}

// PgAdvisoryXactTx is BEGIN, pg_advisory_xact_lock, UPDATE, COMMIT.
func (p *PG) PgAdvisoryXactTx(ctx context.Context, key int) error {
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, advisoryXactLock, advisoryBase+int64(key)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, updateItem, key)
		return err
	})
}

// PgAdvisoryXactBatch pipelines pg_advisory_xact_lock and the UPDATE as one
// implicit transaction: one round trip, like PgFencedBatch.
func (p *PG) PgAdvisoryXactBatch(ctx context.Context, key int) error {
	b := &pgx.Batch{}
	b.Queue(advisoryXactLock, advisoryBase+int64(key))
	b.Queue(updateItem, key)
	return p.Pool.SendBatch(ctx, b).Close()
}

// PgAdvisorySession is pg_advisory_lock, UPDATE, pg_advisory_unlock on one
// session (3 round trips).
func (p *PG) PgAdvisorySession(ctx context.Context, key int) error {
	conn, err := p.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	id := advisoryBase + int64(key)
	if _, err := conn.Exec(ctx, advisoryLock, id); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, updateItem, key)
	if _, uerr := conn.Exec(context.WithoutCancel(ctx), advisoryUnlock, id); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// SQLPlainTx is the unfenced baseline over database/sql (pgx stdlib).
func (p *PG) SQLPlainTx(ctx context.Context, key int) error {
	return sqlTx(ctx, p.DB, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, updateItem, key)
		return err
	})
}

// SQLFencedTx is the fenced write over database/sql.
func (p *PG) SQLFencedTx(ctx context.Context, key int) error {
	tok := Token(key)
	return sqlTx(ctx, p.DB, func(tx *sql.Tx) error {
		if err := p.GateSQL.Commit(ctx, tx, tok); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, updateItem, key)
		return err
	})
}

// PlainTx is the unfenced baseline on SQLite (BEGIN IMMEDIATE).
func (s *SQLite) PlainTx(ctx context.Context, key int) error {
	return sqlTx(ctx, s.D.DB(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, updateItemSQLite, key)
		return err
	})
}

// FencedTx is the fenced write on SQLite.
func (s *SQLite) FencedTx(ctx context.Context, key int) error {
	tok := Token(key)
	return sqlTx(ctx, s.D.DB(), func(tx *sql.Tx) error {
		if err := s.Gate.Commit(ctx, tx, tok); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, updateItemSQLite, key)
		return err
	})
}

func sqlTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// PglockWrite is a pglock user's guarded write: AcquireContext (nextval and
// an upsert, and with the heartbeat on a first heartbeat beside them), the
// UPDATE, and Close (a DELETE, after stopping the heartbeat).
func (p *PG) PglockWrite(heartbeat bool) Op {
	c, name := p.pglockClient(heartbeat), p.pglockName(heartbeat, "item")
	return func(ctx context.Context, key int) error {
		l, err := c.AcquireContext(ctx, name(key))
		if err != nil {
			return err
		}
		_, err = p.Pool.Exec(ctx, updateItem, key)
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

// PglockAcquireRelease is pglock's AcquireContext and Close with nothing
// between: what a lease costs to take and give back.
func (p *PG) PglockAcquireRelease(heartbeat bool) Op {
	c, name := p.pglockClient(heartbeat), p.pglockName(heartbeat, "lease")
	return func(ctx context.Context, key int) error {
		l, err := c.AcquireContext(ctx, name(key))
		if err != nil {
			return err
		}
		return l.Close()
	}
}

// The bare SQL lease: a grant in one durable autocommit upsert that takes
// the next fence, a release in one autocommit UPDATE that does not wait for
// its WAL to reach disk (as fencegate's own release). No floor raise, no
// request record, no idempotent retry: the least a fenced lease with a
// durable grant can do in two round trips.
const (
	bareLeaseAcquire = `
INSERT INTO bench_lease AS l (resource, holder, fence, expires_at, released)
VALUES ($1, 'bench-holder', nextval('bench_lease_seq'), clock_timestamp() + interval '30 seconds', false)
ON CONFLICT (resource) DO UPDATE SET holder = excluded.holder, fence = excluded.fence,
  expires_at = excluded.expires_at, released = false
 WHERE l.released OR l.expires_at <= clock_timestamp()
RETURNING fence`
	bareLeaseRelease = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE bench_lease SET released = true FROM async WHERE resource = $1 AND fence = $2 AND NOT released`
)

// BareLeaseAcquireRelease is scenario 3's bound: the bare SQL lease taken
// and released on key's resource.
func (p *PG) BareLeaseAcquireRelease(ctx context.Context, key int) error {
	resource := fmt.Sprintf("bare/%s/%d", p.Net, key)
	var fence int64
	if err := p.Pool.QueryRow(ctx, bareLeaseAcquire, resource).Scan(&fence); err != nil {
		return fmt.Errorf("bare lease %s: %w", resource, err) // pgx.ErrNoRows: held
	}
	tag, err := p.Pool.Exec(ctx, bareLeaseRelease, resource, fence)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("bare lease %s: release of fence %d found no live lease", resource, fence)
	}
	return err
}

// pglockName names the locks of one pglock variant on one path: a lock row
// another variant left behind (see Contention) must not make this one wait.
func (p *PG) pglockName(heartbeat bool, kind string) func(key int) string {
	return func(key int) string { return fmt.Sprintf("%s/%s/%t/%d", kind, p.Net, heartbeat, key) }
}

func (p *PG) pglockClient(heartbeat bool) *pglock.Client {
	if heartbeat {
		return p.PglockHB
	}
	return p.Pglock
}

// floorCTE is the gate's floor statement before it became a
// function (fencegate_fence): both paths in one CTE, parsed and planned on
// every call outside the statement-caching exec modes.
const floorCTE = `
WITH held AS MATERIALIZED (
  SELECT floor, holder FROM fencegate_floor
   WHERE resource = $1 AND floor = $2 AND holder = $3
     FOR NO KEY UPDATE
), raised AS (
  INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
  SELECT $1, $2, $3, clock_timestamp() WHERE NOT EXISTS (SELECT FROM held)
  ON CONFLICT (resource) DO UPDATE SET
    floor      = GREATEST(f.floor, excluded.floor),
    holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
    updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
  RETURNING floor, holder
)
SELECT floor, holder FROM held UNION ALL SELECT floor, holder FROM raised`

// PgFloorCTETx is PgFencedTx with the floor CTE of before fencegate_fence
// in place of gate.Commit's call of fencegate_fence.
func (p *PG) PgFloorCTETx(ctx context.Context, key int) error {
	tok := Token(key)
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		var floor int64
		var holder string
		if err := tx.QueryRow(ctx, floorCTE, tok.Resource, tok.Fence, tok.Holder).Scan(&floor, &holder); err != nil {
			return err
		}
		if floor != tok.Fence {
			return fmt.Errorf("refused at floor %d", floor)
		}
		_, err := tx.Exec(ctx, updateItem, key)
		return err
	})
}
