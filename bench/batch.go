package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/gate/pgxgate"
)

// Names of the batch scenario's variants (vAutocommit, vPlainTx and
// vBeginTx are scenario 1's).
const (
	vBatchPlain   = "pgxgate.CommitBatch (statements the scanner reads)"
	vBatchGuarded = "pgxgate.CommitBatch, guard armed (a statement behind a QueryRewriter)"
	vFencedCTE    = "bound: fenced one-statement CTE, autocommit"
)

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
	r.f("One writer updates its own row. *fenced one-statement CTE* is the bound of a fenced write in one round trip: the strict fence (`fencegate_fence`) and the UPDATE in one autocommit statement. CommitBatch sends BEGIN, the fence, the UPDATE and COMMIT in one pipeline; when the Go-side scanner reads every statement of the batch it arms no server guard, and when it cannot (here: the UPDATE queued behind a pgx.QueryRewriter) the fence arms the write guard, checked at COMMIT. %d interleaved rounds of %s, every path in the same rounds.\n\n", cfg.Rounds, cfg.Duration)
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
		g.add(t.Net, vPlainTx, t.PgPlainTx)
		g.add(t.Net, vBeginTx, t.PgBeginFencedTx)
	}
	g.run(ctx, cfg, 1, Distinct, "batch")
	for _, n := range cfg.nets() {
		r.f("### %s\n\n", n.Name)
		res := g.rows(n.Name, vAutocommit, vFencedCTE, vBatchPlain, vBatchGuarded, vPlainTx, vBeginTx)
		r.table(res, 0)
		r.set(Ratio(res[2], res[0]), "batch", n.Name, "batch/auto")
		r.set(Ratio(res[1], res[0]), "batch", n.Name, "bound/auto")
	}
	return nil
}
