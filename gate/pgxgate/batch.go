// Package pgxgate is the gate's fenced writes in one round trip on pgx: a
// pgx pipeline carries the fence together with the writes (CommitBatch) or
// with BEGIN (BeginFenced), so a fenced write costs the round trips of an
// unfenced one. The gate is a *gate.Gate[pgx.Tx], over sqlstore/pgxv5's
// driver:
//
//	d := pgxv5.New(pool)
//	g := gate.New(d, nil)
//	err := pgxgate.CommitBatch(ctx, g, pool, token, b)
//
// The statements are the driver's (pgxv5.FloorRaiseBatch,
// pgxv5.BeginFloorRaise); this package adds what the gate does around
// them (through gate.FenceCheck), as around Gate.Commit: input checks,
// spans and instruments, the rollback and the refusal's log under one
// Options.CleanupTimeout.
package pgxgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// BatchSender sends a pgx batch. *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn
// and pgx.Tx all implement it.
type BatchSender = pgxv5.BatchSender

// CommitBatch is a fenced write in one round trip: it sends token's fence
// statement, the statements queued in b and a COMMIT to Postgres as one
// pipeline with a single Sync, in a transaction of its own (BEGIN first).
//
// The fence statement admits the token exactly as g.Commit does. When it
// refuses, it fails, and Postgres skips every statement after it and rolls
// the transaction back: none of b's statements runs, so none can commit.
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
//	err := pgxgate.CommitBatch(ctx, g, pool, l.Token(), b) // *gate.StaleFenceError if stale
//
// b must not begin, end or prepare the transaction: a statement of it that
// starts with BEGIN, START, COMMIT, END, ROLLBACK, ABORT or PREPARE
// TRANSACTION (any of the statements in one string of several, which the
// simple protocol runs) is refused before anything is sent, with an error
// matching sqlstore.ErrTransactionControl. A batch whose every statement
// the check can vouch for (plain SELECT, INSERT, UPDATE, DELETE, WITH,
// VALUES, TABLE or MERGE text it reads to the end, no pgx.QueryRewriter
// among the arguments) cannot end its transaction, and runs as BEGIN, the
// fence, b and COMMIT. Any other batch, and any batch in conn's
// transaction, the server guards: the fence arms a guard (a deferred
// trigger, fencegate_batch_guard) that turns any COMMIT before the batch's
// own into a rollback of everything; a ROLLBACK takes the guard with it, so
// the batch's end fails and rolls back what ran after it; and a procedure
// or DO block cannot end a transaction block at all. Each fails the batch
// with sqlstore.ErrTransactionControl, nothing of it committed. What the
// check cannot read (a statement queued by a prepared statement's name, or
// rewritten by a pgx.QueryRewriter) has the guard alone, which cannot see a
// ROLLBACK followed by a COMMIT of the batch's: what ran between the two
// would commit, unfenced. A prepared statement named by the text of another
// statement (its name "UPDATE t …", its SQL "COMMIT") would pass for that
// text and run unguarded: name prepared statements by their own SQL or by
// a name that is no statement.
//
// conn may also be a pgx.Tx; then the statements join that transaction, no
// COMMIT is sent, and nothing commits until the caller commits it; any
// error (a refusal, a cancelled ctx, a failed statement) rolls the
// transaction back, as g.Commit does. A pgx savepoint is refused with
// gate.ErrNestedTx, as by g.Commit: by its type before anything is sent
// (gate.IsNestedTx), and by the server when a wrapper hides it. A refusal
// is logged, and the transaction rolled back, under one
// gate.Options.CleanupTimeout, as g.Commit's is. Pipelining needs the
// extended protocol or pgx's simple protocol; it does not survive a pooler
// in statement mode.
//
// A set or path token (fence.Token.Members) is judged by g.Commit in the
// batch's transaction first, member by member, then the batch runs as
// above: a round trip per member more, the same refusals and logs.
//
// The fence statement needs fencegate's Postgres migrations (the gate's:
// fencegate_fence_batch and the batch guard).
func CommitBatch(ctx context.Context, g *gate.Gate[pgx.Tx], conn BatchSender, token fence.Token, b *pgx.Batch) error {
	ctx, c := g.StartCheck(ctx, "commit_batch", token)
	if !pipelined(token) {
		if err := token.Validate(); err != nil {
			tx, _ := conn.(pgx.Tx)
			return c.Done(ctx, sqlstore.FloorRaiseResult{}, err, rollbackOf(tx))
		}
		tx, res, err := commitBatchSet(ctx, g, c, conn, token, b)
		return c.Done(ctx, res, err, rollbackOf(tx))
	}
	tx, res, err := commitBatch(ctx, c, conn, token, b)
	if err == nil && res.Admitted && tx != nil {
		_ = tx.Rollback(ctx) // committed: only returns a pool's connection
	}
	// Whatever failed, tx (when not nil) must not commit, and with a pool
	// rolling back is also what returns its connection (a transaction that
	// never began included); then a refusal is logged.
	return c.Done(ctx, res, err, rollbackOf(tx))
}

// rollbackOf is the rollback of tx for FenceCheck.Done: nil for no
// transaction, and no error for one already over.
func rollbackOf(tx pgx.Tx) func(context.Context) error {
	if tx == nil {
		return nil
	}
	return func(ctx context.Context) error {
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			return err
		}
		return nil
	}
}

// commitBatch checks CommitBatch's input and sends the pipeline. It returns
// the transaction to end: the caller's, or the one the pipeline began.
func commitBatch(ctx context.Context, c *gate.FenceCheck[pgx.Tx], conn BatchSender, token fence.Token, b *pgx.Batch) (pgx.Tx, sqlstore.FloorRaiseResult, error) {
	callerTx, _ := conn.(pgx.Tx)
	if err := token.Validate(); err != nil {
		return callerTx, sqlstore.FloorRaiseResult{}, err
	}
	if gate.IsNestedTx(conn) {
		return callerTx, sqlstore.FloorRaiseResult{}, fmt.Errorf("fencegate: commit batch %s: %w", token, gate.ErrNestedTx)
	}
	tx, res, err := pgxv5.FloorRaiseBatch(ctx, conn, c.Params(token.Resource), b)
	if err != nil {
		return tx, res, fmt.Errorf("fencegate: commit batch %s: %w", token, err)
	}
	return tx, res, nil
}
