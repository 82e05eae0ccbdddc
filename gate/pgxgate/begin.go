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

// ErrBeginInTx is matched (errors.Is) by BeginFenced's error when it is
// given a transaction to begin on: a fenced transaction begins on a pool or
// a connection. Inside a transaction of your own, use gate.Commit or
// CommitBatch. The transaction given is left as it was.
var ErrBeginInTx = errors.New("fencegate: begin fenced: already in a transaction; use gate.Commit or pgxgate.CommitBatch in it")

// BeginFenced begins a transaction that token has already been admitted
// into, in one round trip: BEGIN and token's fence statement go to Postgres
// together (pgx.Batch.BeginTx), so a fenced transaction costs the round
// trips of an unfenced one. db is a *pgxpool.Pool, a *pgxpool.Conn or a
// *pgx.Conn; with a pool, the transaction holds one of its connections until
// it ends, as pool.Begin's does.
//
// The fence is judged at begin, exactly as g.Commit judges it: the
// resource's floor is raised to the token's fence (created if needed), and
// the floor row stays locked until the transaction ends, so no higher fence
// can commit in between and nothing below the new floor can commit after.
// The returned pgx.Tx is then an ordinary one: write in it, and its Commit
// commits the writes and the floor raise together; its Rollback undoes both.
// A later, higher fence waits on the floor row until then. It is the same
// as calling g.Commit first thing in a transaction of pool.Begin's, one
// round trip sooner.
//
// A stale token is refused: BeginFenced rolls the transaction back, logs
// the refusal (the rejection log and Options.Logger; the rollback and the
// log together under one Options.CleanupTimeout whatever ctx does, as
// g.Commit does) and returns a
// *gate.StaleFenceError and no transaction. Any other failure (invalid
// input, a cancelled ctx, a broken connection, opts the server rejects)
// also rolls back, returns the connection, and returns the error with no
// transaction: nothing can commit under a fence that was not admitted.
// Options.VerifyIssued applies as in g.Commit.
//
// The transaction is the caller's, as pool.Begin's is, and BeginFenced
// puts no guard in it: a COMMIT sent in it commits it early, which keeps
// the guarantee for what ran before (it ran, and commits, while the fence
// held the floor row), but whatever runs after that runs outside it,
// unfenced, and nothing inside the transaction can stop it; a ROLLBACK
// likewise. (A guard would need a statement of its own before every Commit,
// which fails in a transaction already aborted.) So send no transaction
// control in it. To pipeline statements in it, use CommitBatch(ctx, g, tx,
// token, b): it refuses transaction control, and its guard turns a COMMIT it
// cannot read into a rollback of the whole transaction.
//
// opts are pgx's (isolation level, access mode, BeginQuery, CommitQuery);
// the gate is designed for READ COMMITTED, and under REPEATABLE READ or
// SERIALIZABLE a race with another writer of the resource fails with a
// retryable serialization error. Every pgx exec mode runs the two
// statements in one round trip, except describe_exec, which describes them
// first (as it does every statement). The fence needs fencegate's Postgres
// migrations (fencegate_fence).
//
// A set or path token (fence.Token.Members) is judged by g.Commit right
// after BEGIN, a round trip of its own, then one per member.
//
//	tx, err := pgxgate.BeginFenced(ctx, g, pool, l.Token(), pgx.TxOptions{}) // *gate.StaleFenceError if stale
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback(ctx)
//	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id); err != nil {
//		return err
//	}
//	return tx.Commit(ctx)
func BeginFenced(ctx context.Context, g *gate.Gate[pgx.Tx], db BatchSender, token fence.Token, opts pgx.TxOptions) (pgx.Tx, error) {
	ctx, c := g.StartCheck(ctx, "begin_fenced", token)
	if err := token.Validate(); err != nil {
		return nil, c.Done(ctx, sqlstore.FloorRaiseResult{}, err, nil)
	}
	if _, inTx := db.(pgx.Tx); inTx {
		return nil, c.Done(ctx, sqlstore.FloorRaiseResult{}, fmt.Errorf("%w (%s)", ErrBeginInTx, token), nil)
	}
	if !pipelined(token) {
		tx, err := beginSet(ctx, g, db, token, opts)
		if err != nil {
			return nil, c.Done(ctx, sqlstore.FloorRaiseResult{}, err, rollbackOf(tx))
		}
		return tx, c.Done(ctx, sqlstore.FloorRaiseResult{Admitted: true}, nil, nil)
	}
	tx, res, err := pgxv5.BeginFloorRaise(ctx, db, c.Params(token.Resource), opts)
	if err == nil && res.Admitted {
		return tx, c.Done(ctx, res, nil, nil)
	}
	if err != nil {
		err = fmt.Errorf("fencegate: begin fenced %s: %w", token, err)
	}
	return nil, c.Done(ctx, res, err, rollbackOf(tx))
}
