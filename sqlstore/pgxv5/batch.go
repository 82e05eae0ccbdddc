package pgxv5

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
)

// BatchSender sends a pgx batch. *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn
// and pgx.Tx all implement it.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// CommitBatch is a fenced write in one round trip: it sends token's fence
// statement followed by the statements queued in b to Postgres as one
// pipeline with a single Sync, so they run as one implicit transaction,
// with no BEGIN and no COMMIT of their own.
//
// The fence statement admits the token exactly as g.Commit does. When it
// refuses, it fails, and Postgres skips every statement after it and rolls
// the pipeline back: none of b's statements runs, so none can commit.
// CommitBatch then logs the refusal and returns a *gate.StaleFenceError. Any
// other failure, of the fence or of one of b's statements, also rolls back
// everything, the floor raise included, and is returned wrapped.
//
// Results come back through b's callbacks (QueuedQuery.Exec, QueryRow,
// Query), which run after the server has already committed: an error a
// callback returns is reported but cannot undo the write.
//
//	b := &pgx.Batch{}
//	b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id)
//	err := pgxv5.CommitBatch(ctx, g, pool, l.Token(), b) // *gate.StaleFenceError if stale
//
// With a pool or a connection, b must not contain BEGIN, COMMIT or other
// transaction control. conn may also be a pgx.Tx; then the statements join
// that transaction and nothing commits until the caller commits it, and any
// error (a refusal, a cancelled ctx, a failed statement) rolls the
// transaction back, as g.Commit does. A pgx savepoint is refused with
// gate.ErrNestedTx, as by g.Commit. A refusal is logged under
// gate.Options.CleanupTimeout, as g.Commit's is. Pipelining needs the
// extended protocol or pgx's simple protocol, both of which run a pipeline
// as one transaction; it does not survive a pooler in statement mode.
//
// The fence statement needs fencegate's Postgres migrations 00002 and 00007.
func CommitBatch(ctx context.Context, g *gate.Gate[pgx.Tx], conn BatchSender, token gate.Token, b *pgx.Batch) (err error) {
	ctx, end := g.Observe(ctx, "commit_batch", token)
	defer func() { end(err) }()
	err = commitBatch(ctx, g, conn, token, b)
	if err == nil {
		return nil
	}
	opts := g.Options()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.CleanupTimeout)
	defer cancel()
	if tx, ok := conn.(pgx.Tx); ok { // whatever failed, tx must not commit
		if rbErr := tx.Rollback(cctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			opts.Logger.WarnContext(ctx, "fencegate: rollback failed; the transaction cannot commit", "error", rbErr)
		}
	}
	ref, refused := pg.AsPipelineRefusal(err)
	if !refused {
		return err
	}
	return g.Refuse(cctx, token, sqlstore.FloorRaiseResult{Issued: !ref.NotIssued, Floor: ref.Floor, FloorHolder: ref.FloorHolder})
}

// commitBatch checks CommitBatch's input and sends the pipeline.
func commitBatch(ctx context.Context, g *gate.Gate[pgx.Tx], conn BatchSender, token gate.Token, b *pgx.Batch) error {
	if err := token.Validate(); err != nil {
		return err
	}
	if gate.IsNestedTx(conn) {
		return fmt.Errorf("fencegate: commit batch %s: %w", token, gate.ErrNestedTx)
	}
	full := &pgx.Batch{}
	full.Queue(pg.PipelineFenceSQL(g.Options().VerifyIssued), token.Resource, token.Fence, token.Holder)
	if b != nil {
		full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	}
	if err := conn.SendBatch(ctx, full).Close(); err != nil {
		if _, refused := pg.AsPipelineRefusal(err); refused {
			return err
		}
		return fmt.Errorf("fencegate: commit batch %s: %w", token, classify.Classify(err))
	}
	return nil
}
