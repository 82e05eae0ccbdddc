package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// The path locks of fencegate_path_lock. Inside a transaction a path's row is
// only ever locked by a locking read of a row that exists: an insert that
// meets a duplicate takes a next-key lock, and those made overlapping
// claims deadlock (two first grants below one directory, say). A missing
// row is created first, on a connection of its own (autocommit): rows are
// never deleted, so it exists from then on, and the locking read locks the
// record alone, at any isolation level.
const (
	pathLockExists    = `SELECT 1 FROM fencegate_path_lock WHERE resource = ?`
	pathLockCreate    = `INSERT IGNORE INTO fencegate_path_lock (resource) VALUES (?)`
	pathLockShared    = `SELECT 1 FROM fencegate_path_lock WHERE resource = ? LOCK IN SHARE MODE`
	pathLockExclusive = `SELECT 1 FROM fencegate_path_lock WHERE resource = ? FOR UPDATE`
	floorGetLocked    = `SELECT ` + floorCols + ` FROM fencegate_floor WHERE resource = ? LOCK IN SHARE MODE`
	// Arguments: the directory, the first name above everything below it.
	// VARBINARY compares bytes, so the range is exactly the names below.
	leaseLiveBelow = `
SELECT ` + leaseCols + `, ` + epoch + now + `) FROM fencegate_lease
 WHERE resource > ? AND resource < ? AND NOT released AND expires_at > ` + now + `
 ORDER BY resource LIMIT 1`
)

func (e *executor) PathLock(ctx context.Context, resource string, exclusive bool) error {
	var one int
	err := e.c.QueryRowContext(ctx, pathLockExists, resource).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		// Seen from this transaction's snapshot only; the insert, on the
		// pool, makes sure.
		_, err = e.d.db.ExecContext(ctx, pathLockCreate, resource)
	}
	if err != nil {
		return fail("lock path: create its row", err)
	}
	query := pathLockShared
	if exclusive {
		query = pathLockExclusive
	}
	if err := e.c.QueryRowContext(ctx, query, resource).Scan(&one); err != nil {
		return fail("lock path", err)
	}
	return nil
}

func (e *executor) LeaseLiveBelow(ctx context.Context, dir string) (sqlstore.LeaseRow, error) {
	r, err := e.leaseRow(ctx, leaseLiveBelow, new(int64), dir, sqlexec.DirUpperBound(dir))
	if err != nil {
		return sqlstore.LeaseRow{}, fail("read leases below", err)
	}
	return r, nil
}

func (e *executor) FloorGetLocked(ctx context.Context, resource string) (sqlstore.Floor, error) {
	f, err := sqlexec.ScanFloor(e.c.QueryRowContext(ctx, floorGetLocked, resource))
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.Floor{}, fmt.Errorf("read floor: %w", sqlstore.ErrNotFound)
	}
	if err != nil {
		return sqlstore.Floor{}, fail("read floor", err)
	}
	return f, nil
}
