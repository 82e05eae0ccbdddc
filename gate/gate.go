package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Floor is a resource's floor: the highest fence the gate has admitted.
type Floor = sqlstore.Floor

// Rejection is one record of the rejection log.
type Rejection = sqlstore.Rejection

// Options configure a Gate. A nil *Options means all defaults.
type Options struct {
	// VerifyIssued makes Commit refuse a fence that the lease coordinator in
	// the same database never issued to that holder for that resource, so a
	// forged or mistyped fence cannot raise a floor. Set it when fences come
	// from lease.Coordinator on this database; leave it off when they come
	// from elsewhere (etcd revisions, Consul's LockIndex). Defaults to false.
	VerifyIssued bool

	// Logger receives a warning for every refusal. Defaults to discarding;
	// the rejection log in the database is always written.
	Logger *slog.Logger

	// MaxAttempts bounds how often Do runs a transaction that failed with a
	// retryable error (serialization failure, deadlock, lock timeout, SQLite
	// busy). Defaults to 5.
	MaxAttempts int

	// RetryBackoff is the base of Do's jittered exponential backoff between
	// attempts. Defaults to 5ms.
	RetryBackoff time.Duration
}

// Gate admits writes whose fence is at least the resource's floor, inside
// the writer's own transaction of type TTx (pgx.Tx with sqlstore.PgxDriver,
// *sql.Tx with sqlstore.SQLDriver). It is safe for concurrent use.
type Gate[TTx any] struct {
	driver sqlstore.Driver[TTx]
	opts   Options
	logger *slog.Logger
}

// New returns a gate over driver. The transaction type follows from the
// driver, so passing another kind of transaction to Commit does not compile.
func New[TTx any](driver sqlstore.Driver[TTx], opts *Options) *Gate[TTx] {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), 5)
	o.RetryBackoff = cmp.Or(max(o.RetryBackoff, 0), 5*time.Millisecond)
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate[TTx]{driver: driver, opts: o, logger: logger}
}

// Commit admits token inside tx, before the caller's writes: it raises the
// resource's floor to the token's fence (creating it if needed) and holds
// the floor row locked until tx ends, so no higher fence can commit in
// between and nothing below the new floor can commit after. On Postgres that
// is one statement: a fence that already is the floor only locks the row, any
// other takes the GREATEST upsert. SQLite, whose transaction holds the write
// lock from BEGIN, reads first and upserts only when the floor must change.
//
// A fence equal to the floor is admitted: a renewed lease keeps its fence, so
// its in-flight writes stay valid. A lower fence is refused with a
// *StaleFenceError; Commit then rolls tx back itself, so none of the writes
// in tx can commit even if the error is ignored, and records the refusal in
// the rejection log, which survives that rollback.
//
// Any other error leaves tx to the caller, who must roll it back.
func (g *Gate[TTx]) Commit(ctx context.Context, tx TTx, token Token) error {
	if err := token.Validate(); err != nil {
		return err
	}
	ex := g.driver.UnwrapExecutor(tx)
	res, err := ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{
		Resource: token.Resource, Holder: token.Holder, Fence: token.Fence, VerifyIssued: g.opts.VerifyIssued,
	})
	if err != nil {
		return fmt.Errorf("fencegate: commit %s: %w", token, err)
	}
	if res.Admitted {
		return nil
	}
	if !res.Issued {
		// Nothing was written; tell a fence below the floor (stale) from one
		// that never existed.
		res.Floor, res.FloorHolder = 0, ""
		f, err := ex.FloorGet(ctx, token.Resource)
		if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
			_ = g.driver.Rollback(ctx, tx)
			return fmt.Errorf("fencegate: commit %s: %w", token, err)
		}
		res.Floor, res.FloorHolder = f.Floor, f.Holder
	}
	// Roll back first: it releases the floor row (and SQLite's write lock),
	// so logging on another connection cannot wait on the caller's own tx.
	if err := g.driver.Rollback(ctx, tx); err != nil {
		g.logger.WarnContext(ctx, "fencegate: rollback of refused transaction failed", "error", err)
	}
	return g.refuse(ctx, token, res.Floor, res.FloorHolder, !res.Issued && token.Fence >= res.Floor)
}

// refuse logs a refusal and returns it as a *StaleFenceError. When the log
// cannot be written the error says so too, and still matches ErrStaleFence.
func (g *Gate[TTx]) refuse(ctx context.Context, token Token, floor int64, floorHolder string, notIssued bool) error {
	rej, logErr := g.driver.Executor().RejectionInsert(context.WithoutCancel(ctx), sqlstore.Rejection{
		Resource: token.Resource, Fence: token.Fence, Holder: token.Holder,
		Floor: floor, FloorHolder: floorHolder, NotIssued: notIssued,
	})
	stale := &StaleFenceError{
		Resource: token.Resource, Holder: token.Holder, Fence: token.Fence,
		Floor: floor, FloorHolder: floorHolder, NotIssued: notIssued, Seq: rej.Seq, At: rej.At,
	}
	g.logger.WarnContext(ctx, "fencegate: refused fence",
		"resource", token.Resource, "holder", token.Holder, "fence", token.Fence,
		"floor", floor, "floor_holder", floorHolder, "not_issued", notIssued, "rejection_seq", rej.Seq)
	if logErr != nil {
		return errors.Join(stale, fmt.Errorf("fencegate: the refusal could not be logged: %w", logErr))
	}
	return stale
}

// Do runs fn in a new transaction guarded by token: it begins, calls Commit,
// runs fn, and commits. If any step fails with an error the dialect marks
// retryable (sqlstore.IsRetryable), the whole transaction runs again, up to
// Options.MaxAttempts times; fn must therefore be safe to run more than once.
// A refused token is never retried. fn's own errors roll back and are
// returned as they are; the token's floor is then raised anyway, in a
// transaction of its own, so a failure half-way still fences out older
// holders (the raise costs a transaction only on that failure path).
func (g *Gate[TTx]) Do(ctx context.Context, token Token, fn func(ctx context.Context, tx TTx) error) error {
	if err := token.Validate(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := g.doOnce(ctx, token, fn)
		if err == nil || !sqlstore.IsRetryable(err) || attempt >= g.opts.MaxAttempts {
			return err
		}
		backoff := g.opts.RetryBackoff << min(attempt-1, 6)
		backoff = backoff/2 + rand.N(backoff/2+1) // jitter: a stampede of retries would collide again
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return errors.Join(err, ctx.Err())
		case <-timer.C:
		}
	}
}

func (g *Gate[TTx]) doOnce(ctx context.Context, token Token, fn func(ctx context.Context, tx TTx) error) error {
	tx, err := g.driver.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fencegate: begin: %w", err)
	}
	defer func() { _ = g.driver.Rollback(context.WithoutCancel(ctx), tx) }()
	if err := g.Commit(ctx, tx, token); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = g.driver.Rollback(context.WithoutCancel(ctx), tx)
		if !sqlstore.IsRetryable(err) {
			// Best effort, and never logged as a refusal: the write failed
			// either way, and a lower result means a newer fence got there.
			_, _ = g.raise(context.WithoutCancel(ctx), token)
		}
		return err
	}
	if err := g.driver.Commit(ctx, tx); err != nil {
		return fmt.Errorf("fencegate: commit: %w", err)
	}
	return nil
}

// Admit raises the resource's floor to token's fence in a transaction of its
// own, without a write: a coordinator outside this database calls it when it
// reassigns a resource, so the previous holder is refused even before the
// new one writes. (lease.Coordinator does the same inside its acquiring
// transaction.) A fence below the floor is refused and logged like Commit's.
func (g *Gate[TTx]) Admit(ctx context.Context, token Token) error {
	if err := token.Validate(); err != nil {
		return err
	}
	res, err := g.raise(ctx, token)
	if err != nil {
		return fmt.Errorf("fencegate: admit %s: %w", token, err)
	}
	if !res.Admitted {
		return g.refuse(ctx, token, res.Floor, res.FloorHolder, false)
	}
	return nil
}

// raise raises the floor to token's fence in a transaction of its own.
func (g *Gate[TTx]) raise(ctx context.Context, token Token) (res sqlstore.FloorRaiseResult, err error) {
	err = g.driver.InTx(ctx, func(ex sqlstore.Executor) error {
		res, err = ex.FloorRaise(ctx, sqlstore.FloorRaiseParams{Resource: token.Resource, Holder: token.Holder, Fence: token.Fence})
		return err
	})
	return res, err
}

// Floor reads a resource's floor. It returns an error matching
// sqlstore.ErrNotFound if no fence was ever admitted for it.
//
// Advisory only: the floor can rise the moment after it is read. Never
// branch a write on it; put the write behind Commit.
func (g *Gate[TTx]) Floor(ctx context.Context, resource string) (Floor, error) {
	if err := ValidateResource(resource); err != nil {
		return Floor{}, err
	}
	return g.driver.Executor().FloorGet(ctx, resource)
}

// Floors reads every floor, ordered by resource. Advisory only, like Floor.
func (g *Gate[TTx]) Floors(ctx context.Context) ([]Floor, error) {
	return g.driver.Executor().FloorList(ctx)
}

// WouldAdmit reports whether token's fence is at least the current floor.
//
// Advisory only, and unsafe to branch a write on: the answer can be wrong by
// the time the write lands, which is the very race fencing exists to close.
// It is for dashboards and early exits; the write must still go through
// Commit.
func (g *Gate[TTx]) WouldAdmit(ctx context.Context, token Token) (bool, error) {
	if err := token.Validate(); err != nil {
		return false, err
	}
	f, err := g.Floor(ctx, token.Resource)
	if errors.Is(err, sqlstore.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return token.Fence >= f.Floor, nil
}

// RejectionQuery selects records of the rejection log.
type RejectionQuery struct {
	// Resource restricts the records to one resource. Defaults to all.
	Resource string
	// AfterSeq returns only records with a higher sequence number, for
	// paging or tailing. Defaults to 0 (from the start).
	AfterSeq int64
	// Limit bounds how many records come back. Defaults to 100.
	Limit int
	// Newest returns the newest records first. Defaults to oldest first.
	Newest bool
}

// Rejections reads the rejection log: every refused token with both holders,
// both fences, and its sequence number.
func (g *Gate[TTx]) Rejections(ctx context.Context, q RejectionQuery) ([]Rejection, error) {
	if q.Resource != "" {
		if err := ValidateResource(q.Resource); err != nil {
			return nil, err
		}
	}
	return g.driver.Executor().RejectionList(ctx, sqlstore.RejectionListParams{
		Resource: q.Resource, AfterSeq: q.AfterSeq, Limit: q.Limit, Newest: q.Newest,
	})
}
