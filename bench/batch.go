package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/gate/pgxgate"
)

// Names of the batch scenario's variants (vAutocommit, vPlainTx and
// vBeginTx are scenario 1's).
const (
	vBatchPlain    = "pgxgate.CommitBatch (statements the scanner reads)"
	vBatchGuarded  = "pgxgate.CommitBatch, guard armed (a statement behind a QueryRewriter)"
	vFencedCTE     = "bound: fenced one-statement CTE, autocommit"
	vBatchOldGuard = "before issue 39: every batch under the logged write guard"
)

// oldGuardSQL is the batch guard before issue 39, as fgbench_ functions of
// the run's schema (the migration no longer has them): a logged row of
// fencegate_write_guard keyed by a sha256, found by the release and deleted
// at COMMIT by its deferred trigger through EXECUTE format.
const oldGuardSQL = `
CREATE FUNCTION fgbench_old_fence_batch(p_resource text, p_fence bigint, p_holder text, p_verify boolean, p_key text)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key   text := coalesce(nullif(current_setting('fencegate.batch_key', true), ''), p_key);
    v_xmin  xid;
    v_floor bigint;
BEGIN
    INSERT INTO fencegate_write_guard AS g (key_hash) VALUES (sha256(convert_to(v_key, 'UTF8')))
    ON CONFLICT (key_hash) DO UPDATE SET key_hash = g.key_hash
    RETURNING xmin INTO v_xmin;
    IF v_xmin <> pg_current_xact_id()::xid THEN
        RAISE EXCEPTION 'nested' USING ERRCODE = 'FG005';
    END IF;
    PERFORM set_config('fencegate.batch_key', v_key, true), set_config('fencegate.write_key', '', true);
    SELECT f.floor INTO v_floor FROM fencegate_fence(p_resource, p_fence, p_holder, p_verify, true) f;
    RETURN v_floor;
END
$$;
CREATE FUNCTION fgbench_old_batch_release() RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key text := coalesce(current_setting('fencegate.batch_key', true), '');
BEGIN
    IF v_key = '' OR NOT EXISTS (SELECT 1 FROM fencegate_write_guard WHERE key_hash = sha256(convert_to(v_key, 'UTF8'))) THEN
        RAISE EXCEPTION 'ended' USING ERRCODE = 'FG004';
    END IF;
    PERFORM set_config('fencegate.write_key', v_key, true);
END
$$;`

// PgFencedBatchOldGuard is CommitBatch's pipeline before issue 39 (BEGIN,
// the fence arming the logged guard, the UPDATE, the release, COMMIT),
// sent as pgxv5.FloorRaiseBatch sent it, without the gate around it.
func (p *PG) PgFencedBatchOldGuard(ctx context.Context, key int) error {
	tok := Token(key)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT fgbench_old_fence_batch($1, $2, $3, $4, $5)`, tok.Resource, tok.Fence, tok.Holder, false, rand.Text())
	b.Queue(updateItem, key)
	b.Queue(`SELECT fgbench_old_batch_release()`)
	b.Queue(`COMMIT`)
	br := p.Pool.SendBatch(ctx, b)
	tx := br.Tx()
	err := br.Close()
	if tx != nil {
		_ = tx.Rollback(ctx)
	}
	return err
}

// fencedCTE is the batch scenario's bound: the strict fence and the UPDATE
// in one autocommit statement. It is the least a fenced write in one round
// trip can cost (one statement, one durable commit, the fence's own work),
// but it is not a form to use: the user's statement would have to be
// rewritten around the fence.
const fencedCTE = `WITH f AS (SELECT floor FROM fencegate_fence($2, $3, $4, false, true))
UPDATE bench_item SET n = n + 1 FROM f WHERE id = $1`

// PgFencedCTE is the fenced one-statement CTE of row key.
func (p *PG) PgFencedCTE(ctx context.Context, key int) error {
	tok := Token(key)
	tag, err := p.Pool.Exec(ctx, fencedCTE, key, tok.Resource, tok.Fence, tok.Holder)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("fenced CTE updated %d rows", tag.RowsAffected())
	}
	return err
}

// sameQuery is a pgx.QueryRewriter that leaves the query as it is: a
// statement queued with it is one CommitBatch's scanner cannot read before
// pgx sends it, so the batch runs under the server's write guard.
type sameQuery struct{}

func (sameQuery) RewriteQuery(_ context.Context, _ *pgx.Conn, sql string, args []any) (string, []any, error) {
	return sql, args, nil
}

// PgFencedBatchGuarded is PgFencedBatch with its UPDATE queued behind a
// QueryRewriter, so that the write guard is armed.
func (p *PG) PgFencedBatchGuarded(ctx context.Context, key int) error {
	b := &pgx.Batch{}
	b.Queue(updateItem, sameQuery{}, key)
	return pgxgate.CommitBatch(ctx, p.GatePgx, p.Pool, Token(key), b)
}

// Batch is the batch scenario (-only batch): pgxgate.CommitBatch, with and
// without its write guard armed, against the autocommit UPDATE and the
// fenced one-statement CTE (the bound), and BeginFenced against the
// unfenced transaction, on every path in the same interleaved rounds, one
// writer, pgx's default exec mode.
func Batch(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	r.f("## batch. pgxgate.CommitBatch against an autocommit UPDATE and its bound\n\n")
	r.f("One writer updates its own row. *fenced one-statement CTE* is the bound of a fenced write in one round trip: the strict fence (`fencegate_fence`) and the UPDATE in one autocommit statement. CommitBatch sends BEGIN, the fence, the UPDATE and COMMIT in one pipeline; when the Go-side scanner reads every statement of the batch it arms no server guard, and when it cannot (here: the UPDATE queued behind a pgx.QueryRewriter) the fence arms the write guard, checked at COMMIT. *before issue 39* is the pipeline every batch sent before: the guard a logged row of fencegate_write_guard, keyed by a sha256, deleted at COMMIT through EXECUTE (the functions recreated in the run's schema). %d interleaved rounds of %s, every path in the same rounds.\n\n", cfg.Rounds, cfg.Duration)
	if _, err := pg.Pool.Exec(ctx, oldGuardSQL); err != nil {
		return err
	}
	pgs, err := onNets(ctx, cfg, pg, 2, ExecModes[0])
	if err != nil {
		return err
	}
	defer closeAll(ctx, pgs)
	var g grid
	for _, t := range pgs {
		g.add(t.Net, vAutocommit, t.PgPlainAutocommit)
		g.add(t.Net, vFencedCTE, t.PgFencedCTE)
		g.add(t.Net, vBatchPlain, t.PgFencedBatch)
		g.add(t.Net, vBatchGuarded, t.PgFencedBatchGuarded)
		g.add(t.Net, vBatchOldGuard, t.PgFencedBatchOldGuard)
		g.add(t.Net, vPlainTx, t.PgPlainTx)
		g.add(t.Net, vBeginTx, t.PgBeginFencedTx)
	}
	// Op by op: every iteration runs each variant once, in a fresh random
	// order, so that a neighbour's burst on a loaded machine hits every
	// variant alike; a variant's throughput is 1 ÷ its mean latency.
	iters := max(int(cfg.Duration*time.Duration(cfg.Rounds)/(3*time.Millisecond)), 200)
	for _, t := range pgs {
		vs := []Variant{
			{Name: vAutocommit, Op: t.PgPlainAutocommit}, {Name: vFencedCTE, Op: t.PgFencedCTE}, {Name: vBatchPlain, Op: t.PgFencedBatch},
			{Name: vBatchGuarded, Op: t.PgFencedBatchGuarded}, {Name: vBatchOldGuard, Op: t.PgFencedBatchOldGuard},
			{Name: vPlainTx, Op: t.PgPlainTx}, {Name: vBeginTx, Op: t.PgBeginFencedTx},
		}
		prog(cfg, fmt.Sprintf("batch: %d iterations op by op [%s]", iters, t.Net))
		mean, p50, err := opByOp(ctx, vs, iters)
		if err != nil {
			return err
		}
		r.f("### %s, op by op (%d iterations, each variant once per iteration in a random order)\n\n", t.Net, iters)
		r.f("| variant | mean | p50 | throughput ÷ %s | ÷ %s |\n|---|---:|---:|---:|---:|\n", vAutocommit, vPlainTx)
		for i, v := range vs {
			r.f("| %s | %s | %s | %.2fx | %.2fx |\n", v.Name, fmtDur(mean[i]), fmtDur(p50[i]), float64(mean[0])/float64(mean[i]), float64(mean[5])/float64(mean[i]))
		}
		r.f("\n")
	}
	g.run(ctx, cfg, 1, Distinct, "batch")
	for _, n := range cfg.nets() {
		r.f("### %s\n\n", n.Name)
		res := g.rows(n.Name, vAutocommit, vFencedCTE, vBatchPlain, vBatchGuarded, vBatchOldGuard, vPlainTx, vBeginTx)
		r.table(res, 0)
		r.set(Ratio(res[2], res[0]), "batch", n.Name, "batch/auto")
		r.set(Ratio(res[1], res[0]), "batch", n.Name, "bound/auto")
	}
	return nil
}

// opByOp runs every variant once per iteration, in a random order each
// time, one writer on key 1, and returns each variant's mean and median
// latency.
func opByOp(ctx context.Context, vs []Variant, iters int) (mean, p50 []time.Duration, err error) {
	lat := make([][]time.Duration, len(vs))
	for i, v := range vs { // warm up: statements prepared
		if err := v.Op(ctx, 1); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		lat[i] = make([]time.Duration, 0, iters)
	}
	order := make([]int, len(vs))
	for i := range order {
		order[i] = i
	}
	for range iters {
		mrand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, i := range order {
			start := time.Now()
			if err := vs[i].Op(ctx, 1); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", vs[i].Name, err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	for _, l := range lat {
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		mean = append(mean, sum/time.Duration(len(l)))
		slices.Sort(l)
		p50 = append(p50, l[len(l)/2])
	}
	return mean, p50, nil
}
