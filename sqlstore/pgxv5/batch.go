package pgxv5

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// BatchSender sends a pgx batch. *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn
// and pgx.Tx all implement it.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// FloorRaiseBatch is the driver's half of a fenced write in one round trip
// (pgxgate.CommitBatch is the whole, with the gate's refusal log): it sends
// the fence statement of p, the statements queued in b and a COMMIT to
// Postgres as one pipeline with a single Sync, in a transaction of its own
// (BEGIN first), or, when conn is a pgx.Tx, in that transaction with no
// COMMIT.
//
// The fence statement judges p as Executor.FloorRaise does. When it refuses,
// Postgres skips every statement after it and rolls back: res.Admitted is
// false, res says why, and err is nil. Any other failure, of the fence or of
// one of b's statements, rolls back everything and is returned: a statement
// of b that would end or prepare the transaction fails with
// sqlstore.ErrTransactionControl (before anything is sent when its text
// says so, by the write guard, fencegate_batch_guard, otherwise), one
// run in a savepoint with sqlstore.ErrNestedTx.
//
// The write guard costs the server a row written and deleted (unlogged)
// and a trigger at COMMIT, so it is armed only where it is needed: in conn's
// transaction (a savepoint is refused there), and in a transaction of its
// own when a statement of b is one the scanner cannot vouch for before
// pgx sends it (pg.Vouches: a statement other than SELECT, INSERT,
// UPDATE, DELETE, WITH, VALUES, TABLE or MERGE, text the scan is unsure
// of, a prepared statement's name, or a pgx.QueryRewriter among its
// arguments), and whenever the batch goes by the simple protocol
// (QueryExecModeSimpleProtocol, or a BatchSender whose mode it cannot read),
// where the server splits one string by its own lexer. A batch it vouches
// for cannot end its transaction, so it runs as BeginFloorRaise's fence, b
// and COMMIT.
//
// tx is the transaction the caller must still end: whenever res is not an
// admission or err is not nil, roll it back (it cannot commit; rolling back
// returns a pool's connection); after an admission in a transaction of its
// own it is already committed (roll it back all the same: with a pool that
// returns the connection), and in conn's transaction it is nil (the
// caller's to commit). It needs the gate's migration.
func FloorRaiseBatch(ctx context.Context, conn BatchSender, p sqlstore.FloorRaiseParams, b *pgx.Batch) (tx pgx.Tx, res sqlstore.FloorRaiseResult, err error) {
	callerTx, inTx := conn.(pgx.Tx)
	guarded := inTx || !extendedProtocol(conn)
	if b != nil {
		for _, qq := range b.QueuedQueries {
			if w := pg.TxControl(qq.SQL); w != "" {
				return callerTx, res, fmt.Errorf("%w: a statement of the batch runs %s", sqlstore.ErrTransactionControl, w)
			}
			guarded = guarded || !vouched(qq)
		}
	}
	full := &pgx.Batch{}
	if !inTx {
		full.BeginTx(pgx.TxOptions{})
	}
	if guarded {
		full.Queue(pg.BatchFenceSQL, p.Resource, p.Fence, p.Holder, p.VerifyIssued)
	} else {
		full.Queue(pg.PipelineFenceSQL(p.VerifyIssued), p.Resource, p.Fence, p.Holder)
	}
	if b != nil {
		full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	}
	if guarded {
		full.Queue(pg.BatchReleaseSQL)
	}
	if !inTx {
		full.Queue("COMMIT")
	}
	br := conn.SendBatch(ctx, full)
	tx = callerTx
	if !inTx {
		tx = br.Tx()
	}
	if err := br.Close(); err != nil {
		if r, refused := refusal(err); refused {
			return tx, r, nil
		}
		if nested, guarded := pg.AsBatchGuard(err); guarded {
			if nested {
				return tx, res, fmt.Errorf("%w: %w", sqlstore.ErrNestedTx, err)
			}
			return tx, res, fmt.Errorf("%w: %w", sqlstore.ErrTransactionControl, err)
		}
		return tx, res, classify.Classify(err)
	}
	if inTx {
		return nil, admitted(), nil // the caller's to commit
	}
	return tx, admitted(), nil
}

// vouched reports whether pgx will send qq's text as it is (no
// pgx.QueryRewriter among its arguments) and that text surely
// neither begins, ends, nests nor prepares a transaction (pg.Vouches).
func vouched(qq *pgx.QueuedQuery) bool {
	for _, a := range qq.Arguments {
		if _, rewrites := a.(pgx.QueryRewriter); rewrites {
			return false
		}
	}
	return pg.Vouches(qq.SQL)
}

// extendedProtocol reports whether conn sends a batch by the extended
// protocol, where Postgres refuses a statement text of more than one
// command, so that the server backs the scanner's reading of each text.
// Under the simple protocol pgx joins the batch into one string, which
// Postgres splits by its own lexer: a text the scanner misread could hide a
// COMMIT there, so such a batch keeps the write guard, as does one sent by a
// BatchSender of unknown mode.
func extendedProtocol(conn BatchSender) bool {
	var mode pgx.QueryExecMode
	switch c := conn.(type) {
	case *pgxpool.Pool:
		mode = c.Config().ConnConfig.DefaultQueryExecMode
	case *pgxpool.Conn:
		mode = c.Conn().Config().DefaultQueryExecMode
	case *pgx.Conn:
		mode = c.Config().DefaultQueryExecMode
	default:
		return false
	}
	return mode != pgx.QueryExecModeSimpleProtocol
}

// BeginFloorRaise is the driver's half of a fenced begin in one round trip
// (pgxgate.BeginFenced is the whole): BEGIN and the fence statement of p go
// to Postgres together (pgx.Batch.BeginTx), judged as Executor.FloorRaise
// judges p, with the floor row locked until the transaction ends. db is a
// pool or a connection, not a transaction.
//
// On an admission it returns the open transaction. Otherwise (res.Admitted
// false, with why, and a nil err; or an err) tx, when not nil, is what the
// caller must roll back: it cannot commit, and rolling back returns a
// pool's connection. It needs the gate's migration.
func BeginFloorRaise(ctx context.Context, db BatchSender, p sqlstore.FloorRaiseParams, opts pgx.TxOptions) (tx pgx.Tx, res sqlstore.FloorRaiseResult, err error) {
	b := &pgx.Batch{}
	b.BeginTx(opts)
	b.Queue(pg.PipelineFenceSQL(p.VerifyIssued), p.Resource, p.Fence, p.Holder)
	br := db.SendBatch(ctx, b)
	tx = br.Tx()
	if err := br.Close(); err != nil {
		if r, refused := refusal(err); refused {
			return tx, r, nil
		}
		return tx, res, classify.Classify(err)
	}
	return tx, admitted(), nil
}

// admitted is the result of a fence statement that did not refuse: the
// pipeline does not read the floor back, so Floor and FloorHolder are unset.
func admitted() sqlstore.FloorRaiseResult {
	return sqlstore.FloorRaiseResult{Admitted: true, Issued: true}
}

// refusal reads a pipelined fence statement's refusal as the result
// Executor.FloorRaise would have returned.
func refusal(err error) (sqlstore.FloorRaiseResult, bool) {
	ref, refused := pg.AsPipelineRefusal(err)
	if !refused {
		return sqlstore.FloorRaiseResult{}, false
	}
	return sqlstore.FloorRaiseResult{Issued: !ref.NotIssued, Floor: ref.Floor, FloorHolder: ref.FloorHolder}, true
}

// QueueHandOver queues in b the hand-over of the live lease (p.Resource,
// p.Holder, p.Fence) to the resource's first live waiter
// (sqlstore.Executor.LeaseHandOver, fencegate_hand_over), whose answer is
// written to *res when the batch's results are read. Queue it last in a
// fenced batch (handover.CommitBatch does), so that it commits with
// the batch's writes or not at all.
func QueueHandOver(b *pgx.Batch, p sqlstore.LeaseHandOverParams, res *sqlstore.LeaseHandOverResult) {
	b.Queue(pg.HandOverSQL, p.Resource, p.Holder, p.Fence).QueryRow(func(row pgx.Row) (err error) {
		*res, err = sqlexec.ScanHandOver(row, p.Resource)
		return err
	})
}
