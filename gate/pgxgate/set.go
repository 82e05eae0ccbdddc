package pgxgate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// pipelined reports whether token takes the one-round-trip paths: one plain
// resource. A set or path token is judged by g.Commit, member by member in
// the path rule's order (gate's doc, Paths), which one pipelined statement
// does not do; it costs a round trip per member.
func pipelined(token fence.Token) bool { return !token.IsSet() && !fence.IsPath(token.Resource) }

// beginSet is BeginFenced for a set or path token: BEGIN (in its own round
// trip), then g.Commit, which admits every member or rolls back and logs.
// On an error the transaction it returns, when not nil, is still to be
// rolled back.
func beginSet(ctx context.Context, g *gate.Gate[pgx.Tx], db BatchSender, token fence.Token, opts pgx.TxOptions) (pgx.Tx, error) {
	b := &pgx.Batch{}
	b.BeginTx(opts)
	br := db.SendBatch(ctx, b)
	tx := br.Tx()
	if err := br.Close(); err != nil {
		return tx, fmt.Errorf("fencegate: begin fenced %s: %w", token, err)
	}
	if err := g.Commit(ctx, tx, token); err != nil {
		return nil, err // tx is rolled back
	}
	return tx, nil
}

// commitBatchSet is CommitBatch for a set or path token: g.Commit judges
// every member in the transaction (conn's, or one begun here), then the
// batch runs in it behind the fence statement of the first member (which
// arms the guard against transaction control and refuses it as
// CommitBatch does), and the transaction begun here commits. It returns
// what c.Done takes: the transaction still to roll back (nil when there is
// none, or when g.Commit rolled it back), and the fence statement's result
// and error.
func commitBatchSet(ctx context.Context, g *gate.Gate[pgx.Tx], c *gate.FenceCheck[pgx.Tx], conn BatchSender, token fence.Token, b *pgx.Batch) (pgx.Tx, sqlstore.FloorRaiseResult, error) {
	tx, inTx := conn.(pgx.Tx)
	if gate.IsNestedTx(conn) {
		return tx, sqlstore.FloorRaiseResult{}, fmt.Errorf("fencegate: commit batch %s: %w", token, gate.ErrNestedTx)
	}
	if !inTx {
		var err error
		if tx, err = beginSet(ctx, g, conn, token, pgx.TxOptions{}); err != nil {
			return tx, sqlstore.FloorRaiseResult{}, err
		}
	} else if err := g.Commit(ctx, tx, token); err != nil {
		return nil, sqlstore.FloorRaiseResult{}, err // tx is rolled back
	}
	// The member was admitted by g.Commit a moment ago, in this very
	// transaction, with its floor row held: a refusal now cannot happen,
	// but were it to, c.Done logs it for this member.
	_, res, err := pgxv5.FloorRaiseBatch(ctx, tx, c.Params(token.Members()[0]), b)
	if err == nil && res.Admitted && !inTx {
		err = tx.Commit(ctx)
	}
	if err == nil && res.Admitted {
		return nil, res, nil
	}
	if err != nil {
		err = fmt.Errorf("fencegate: commit batch %s: %w", token, err)
	}
	return tx, res, err
}
