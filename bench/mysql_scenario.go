package bench

import (
	"context"
	"fmt"
)

// Names of the MariaDB column's variants.
const (
	vMyPlainTx   = "unfenced BEGIN/UPDATE/COMMIT"
	vMyFencedTx  = "fenced tx (gate.Commit)"
	vMyRoundTrip = "one round trip (SELECT 1)"
	vMyGate      = "fencegate tx"
	vMyGetLock   = "GET_LOCK/UPDATE/RELEASE_LOCK"
)

// mysqlWriters are the contention levels of the MariaDB column, on one key.
var mysqlWriters = []int{1, 16}

// MariaDB is the MariaDB (or MySQL) column: the gate against the identical
// unfenced transaction, fencegate against GET_LOCK on one key, and the
// wedged holder. It runs on loopback in a database of its own; without a
// server at cfg.MySQLURL it says so in the report and returns nil.
func MariaDB(ctx context.Context, cfg Config, r *Report) error {
	r.f("## MariaDB\n\n")
	if cfg.MySQLURL == "" {
		return skipMariaDB(cfg, r, "no server URL (-mysql, FENCEGATE_BENCH_MYSQL_URL or FENCEGATE_TEST_MYSQL_URL)")
	}
	maxW := 1
	for _, w := range mysqlWriters {
		maxW = max(maxW, w)
	}
	// Only a server that does not answer skips the column; any later
	// failure fails it.
	if err := (&MySQL{BaseURL: cfg.MySQLURL}).admin(ctx, "SELECT 1"); err != nil {
		return skipMariaDB(cfg, r, fmt.Sprintf("no server answers at %s: %v", redacted(cfg.MySQLURL), err))
	}
	m, err := NewMySQL(ctx, cfg.MySQLURL, maxW+4)
	if err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))
	var version, isolation string
	if err := m.D.DB().QueryRowContext(ctx, `SELECT VERSION(), @@SESSION.tx_isolation`).Scan(&version, &isolation); err != nil {
		if err = m.D.DB().QueryRowContext(ctx, `SELECT VERSION(), @@SESSION.transaction_isolation`).Scan(&version, &isolation); err != nil {
			return err
		}
	}
	r.f("%s (same machine, TCP loopback only: the delaying proxy is not used here), InnoDB, isolation %s, through go-sql-driver/mysql and fencegate's sqlstore/mysql driver; a database of its own, dropped after the run. ", version, isolation)
	r.f("%d interleaved rounds of %s per variant; ratios are medians of per-round ratios.\n\n", cfg.Rounds, cfg.Duration)

	r.f("### Gate overhead, 1 writer, distinct keys\n\n")
	r.f("Each op updates its writer's row (`UPDATE bench_item SET n = n + 1 WHERE id = ?`) in a `*sql.Tx`; the fenced one first runs gate.Commit with the floor's own fence (the floor upsert, one round trip).\n\n")
	res := Interleave(ctx, []Variant{
		{Name: vMyPlainTx, Op: m.PlainTx},
		{Name: vMyFencedTx, Op: m.FencedTx},
		{Name: vMyRoundTrip, Op: m.RoundTrip},
	}, 1, Distinct, cfg.Duration, cfg.Rounds, prefix(cfg, "mariadb/overhead"))
	r.table(res, 0)
	r.f("The fence's statement on MariaDB is an `INSERT … ON DUPLICATE KEY UPDATE` that takes the floor record's exclusive lock and changes nothing when the fence is the floor's; its cost is that round trip, the lock, and the statement's work in the commit.\n\n")
	r.set(Ratio(res[1], res[0]), "mariadb", "commit")

	r.f("### Guarded write on one key: fencegate vs GET_LOCK\n\n")
	r.f("Every worker writes row 1 under one resource. fencegate workers present the resource's current fence in BEGIN, gate.Commit, UPDATE, COMMIT; GET_LOCK workers take `GET_LOCK('<database>/item/1', %d)` on a pooled connection, run the UPDATE (autocommit) and `RELEASE_LOCK` on the same connection, as users of MySQL's advisory lock do.\n\n", getLockWait)
	r.f("| writers | variant | median ops/s | p50 | p99 | ÷ GET_LOCK (per-round median, range) | errors |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, w := range mysqlWriters {
		res := Interleave(ctx, []Variant{
			{Name: vMyGate, Op: m.FencedTx},
			{Name: vMyGetLock, Op: m.GetLock},
		}, w, OneKey, cfg.Duration, cfg.Rounds, prefix(cfg, fmt.Sprintf("mariadb/one key/%dw", w)))
		for i, x := range res {
			ratio := "1"
			if i == 0 {
				lo, hi := RatioSpread(x, res[1])
				ratio = fmt.Sprintf("%.2fx (%.2f–%.2f)", Ratio(x, res[1]), lo, hi)
			}
			r.f("| %d | %s | %.0f | %s | %s | %s | %d |\n", w, x.Name, x.MedianThroughput(), fmtDur(x.Latency(0.5)), fmtDur(x.Latency(0.99)), ratio, x.Errors())
		}
		r.set(Ratio(res[0], res[1]), "mariadb", w, "get_lock")
	}
	r.f("\nThe guarantees differ as on Postgres: GET_LOCK is mutual exclusion among cooperating sessions, held as long as the session lives; the gate refuses a stale holder's late write (below).\n\n")
	return wedgedMariaDB(ctx, cfg, m, r)
}

func skipMariaDB(cfg Config, r *Report, why string) error {
	prog(cfg, "MariaDB column skipped: "+why)
	r.f("Skipped in this run: %s.\n\n", why)
	r.Failed = append(r.Failed, "MariaDB skipped: "+why)
	return nil
}
