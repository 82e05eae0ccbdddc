package gate

import (
	"context"
	"errors"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// FenceCheck is one fence check run in another way than Commit's: a
// driver's own statement that raises the floor, such as gate/pgxgate's
// pipelines (pgxv5.FloorRaiseBatch, pgxv5.BeginFloorRaise). It gives such a
// check what Commit does around its own, in one place: the span and the
// instruments (the package doc's Observability), the check's parameters
// under the gate's Options, and, when the token is not admitted, the
// rollback and the refusal's log under one Options.CleanupTimeout whatever
// ctx does, and the *StaleFenceError.
//
// Start one with Gate.StartCheck, pass Params to the statement, and end it
// with Done, once. A FenceCheck is for one goroutine; its zero value is not
// usable.
type FenceCheck[TTx any] struct {
	g        *Gate[TTx]
	ctx      context.Context // StartCheck's, with the span
	token    fence.Token
	resource string // the resource of the last Params, which Done refuses
	obs      check
	done     bool
}

// StartCheck opens the span and starts the clock of a fence check of token
// run in another way than Commit's, and returns ctx with the span and the
// check. op names the check in the span's name and the operation
// attribute: pgxgate.CommitBatch passes "commit_batch", pgxgate.BeginFenced
// "begin_fenced"; another name counts as "other".
func (g *Gate[TTx]) StartCheck(ctx context.Context, op string, token fence.Token) (context.Context, *FenceCheck[TTx]) {
	ctx, o := g.obs.start(ctx, op, token)
	return ctx, &FenceCheck[TTx]{g: g, ctx: ctx, token: token, resource: token.Resource, obs: o}
}

// Params is the driver's parameters for the check of resource (the
// token's, or one member of a set token's) under the gate's Options
// (VerifyIssued). A refusal Done logs names the resource of the last
// Params.
func (c *FenceCheck[TTx]) Params(resource string) sqlstore.FloorRaiseParams {
	c.resource = resource
	return sqlstore.FloorRaiseParams{Resource: resource, Holder: c.token.Holder, Fence: c.token.Fence, VerifyIssued: c.g.opts.VerifyIssued}
}

// Done ends the check with the statement's result and error, and returns
// what the caller returns:
//
//   - err nil and res.Admitted: nil, the check counted as admitted. A path
//     that admitted the token by other means (Gate.Commit, for a set)
//     passes sqlstore.FloorRaiseResult{Admitted: true}.
//   - otherwise rollback (when not nil) ends the caller's transaction so
//     that it cannot commit, under a bound of Options.CleanupTimeout that
//     ctx's cancellation does not cut short; a rollback that fails is
//     logged as a warning (rollback should return nil for a transaction
//     already over). Then err, when not nil, is returned as it is (a
//     refusal of transaction control, sqlstore.ErrTransactionControl, is
//     also logged as a warning); when err is nil the token was refused: the
//     refusal is written to the rejection log and logged, under the same
//     bound, and returned as a *StaleFenceError. When res.Issued is false
//     (Options.VerifyIssued found no such lease) the floor is read to tell
//     a stale fence from one never issued.
//
// Done ends the span and counts the outcome. Only the first call does
// anything; a later one returns err.
func (c *FenceCheck[TTx]) Done(ctx context.Context, res sqlstore.FloorRaiseResult, err error, rollback func(context.Context) error) error {
	if c.done {
		return err
	}
	c.done = true
	if err == nil && res.Admitted {
		c.obs.end(c.ctx, &err)
		return nil
	}
	cctx, cancel := c.g.cleanup(ctx)
	defer cancel()
	if rollback != nil {
		if rbErr := rollback(cctx); rbErr != nil {
			c.g.logger.WarnContext(ctx, "fencegate: rollback failed; the transaction cannot commit", "error", rbErr)
		}
	}
	switch {
	case errors.Is(err, sqlstore.ErrTransactionControl):
		c.g.logger.WarnContext(ctx, "fencegate: refused a fenced batch that would end its transaction; nothing of it committed", "token", c.token.String(), "error", err)
	case err == nil:
		err = c.g.refuse(cctx, fence.Token{Resource: c.resource, Holder: c.token.Holder, Fence: c.token.Fence}, res)
	}
	c.obs.end(c.ctx, &err)
	return err
}
