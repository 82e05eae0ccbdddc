package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Names of the wal scenario's variants.
const (
	vWALGate   = "fencegate acquire+release"
	vWALBare   = "bound: bare SQL lease (durable grant, async release)"
	vWALPglock = "pglock Acquire+Close, heartbeat off"
)

// walCycles is how many acquire+release cycles each variant of the wal
// scenario runs between its two WAL positions.
const walCycles = 400

// walOfSchema sums the WAL records between two positions that belong to
// the schema's relations: every record whose block references name one of
// the schema's relation files, and every record of a transaction that wrote
// such a record (its commit). Other sessions of the server write WAL
// meanwhile; their records touch no relation of this schema. Columns:
// resource manager, record type, records, bytes, bytes of full-page images.
const walOfSchema = `
WITH r AS (SELECT * FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
rel AS (SELECT pg_relation_filenode(c.oid)::text AS fn FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $3 AND pg_relation_filenode(c.oid) IS NOT NULL),
mine AS (SELECT r.* FROM r WHERE EXISTS (SELECT 1 FROM rel WHERE r.block_ref ~ ('rel [0-9]+/[0-9]+/' || rel.fn || ' '))),
xs AS (SELECT DISTINCT xid FROM mine WHERE xid <> 0)
SELECT resource_manager, record_type, count(*), sum(record_length), sum(fpi_length)
  FROM r WHERE r.start_lsn IN (SELECT start_lsn FROM mine) OR r.xid IN (SELECT xid FROM xs)
 GROUP BY 1, 2 ORDER BY 4 DESC`

// WAL is the scenario "wal" (only when named): the WAL one lease
// acquire+release cycle writes, per pg_walinspect, for fencegate, the bare
// SQL lease and pglock, one worker each, cycles spread over 16 keys. It
// needs pg_walinspect (Postgres 15+; CREATE EXTENSION as a superuser) and
// says so when it cannot have it.
func WAL(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, Config{PostgresURL: cfg.PostgresURL}, 4)
	if err != nil {
		return err
	}
	defer done()
	pg := pgs[0]
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // a connection left open ends with the process
	}()
	r.f("## WAL per lease cycle\n\n")
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		r.f("Skipped: pg_walinspect is not available (%v).\n\n", err)
		return nil
	}
	e, err := newLeaseEnv(pg, 30*time.Second)
	if err != nil {
		return err
	}
	ops := []struct {
		name string
		op   Op
	}{
		{vWALGate, func(ctx context.Context, key int) error {
			l, err := e.acquire(ctx, fmt.Sprintf("wal/%d", key))
			if err != nil {
				return err
			}
			return e.release(ctx, l)
		}},
		{vWALBare, pg.BareLeaseAcquireRelease},
		{vWALPglock, pg.PglockAcquireRelease(false)},
	}
	r.f("One worker, %d acquire+release cycles per variant over 16 keys (each key's row exists before: a warm-up cycle per key), WAL between the positions before and after read with pg_walinspect and kept to the records that touch the schema's relations and the transactions that wrote them (their commits). Full-page images depend on when the last checkpoint ran and are shown apart.\n\n", walCycles)
	r.f("| variant | bytes/cycle | records/cycle | of which FPI bytes/cycle | records (type: count/cycle, bytes/cycle) |\n|---|---:|---:|---:|---|\n")
	for _, v := range ops {
		for k := 1; k <= 16; k++ {
			if err := v.op(ctx, k); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
		var start, end string
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&start); err != nil {
			return err
		}
		for i := range walCycles {
			if err := v.op(ctx, i%16+1); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&end); err != nil {
			return err
		}
		// The releases commit without waiting for their WAL, which
		// pg_walinspect reads only once flushed: a durable commit after the
		// end position flushes everything before it.
		if _, err := pg.Pool.Exec(ctx, "UPDATE bench_item SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, walOfSchema, start, end, pg.Schema)
		if err != nil {
			return err
		}
		var recs, bytes, fpi int64
		var parts []string
		for rows.Next() {
			var rm, typ string
			var n, b, f int64
			if err := rows.Scan(&rm, &typ, &n, &b, &f); err != nil {
				rows.Close()
				return err
			}
			recs, bytes, fpi = recs+n, bytes+b, fpi+f
			parts = append(parts, fmt.Sprintf("%s/%s %.2f, %.0f B", rm, typ, float64(n)/walCycles, float64(b-f)/walCycles))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		r.f("| %s | %.0f | %.2f | %.0f | %s |\n", v.name, float64(bytes)/walCycles, float64(recs)/walCycles, float64(fpi)/walCycles, strings.Join(parts, "; "))
	}
	r.f("\n")
	return nil
}
