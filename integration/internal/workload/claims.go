package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// Claims is the part of a Config that claims several resources under one
// fence (lease.Client.BeginAcquireSet) and overlapping paths
// (fence.PathResource), and writes under them to fg_file_writes, one row per
// write, numbered per file or member in commit order. It is embedded in
// Config; its zero value runs none.
type Claims struct {
	// SetResources are plain resources: a set cycle claims two or three of
	// them at once and writes to one member at a time (gate.Commit).
	SetResources []string `json:"setResources"`
	// Paths are paths relative to the tree's root, a trailing "/" naming a
	// directory ("d/", "d/a", "d/b", "e/x"): a path cycle claims one or two
	// of them that do not contain each other and writes files they cover
	// (gate.CommitFile). The files written are the Paths without a
	// trailing "/".
	Paths []string `json:"paths"`
	// ClaimProb is the chance that a cycle is a claim cycle.
	ClaimProb float64 `json:"claimProb"`
}

// claimCycle runs one claim cycle when the dice say so, and reports
// whether it did.
func (e *env[TTx]) claimCycle(ctx context.Context, a *agent) bool {
	c := e.cfg.Claims
	if len(c.SetResources) == 0 && len(c.Paths) == 0 {
		return false // no dice drawn: the rest of the workload is unchanged
	}
	if a.rng.Float64() >= c.ClaimProb {
		return false
	}
	members, targets, err := e.pickClaim(a)
	if err != nil {
		panic(fmt.Sprintf("workload: %v", err)) // a bad Config
	}
	if len(targets) == 0 {
		return false // a directory with no file of Paths below it
	}
	sleep(ctx, e.claim(ctx, a, members, targets))
	return true
}

// pickClaim draws a claim: two or three SetResources, or one or two Paths
// of which neither contains the other, with the targets it may write.
func (e *env[TTx]) pickClaim(a *agent) (members, targets []string, err error) {
	c := e.cfg.Claims
	if len(c.Paths) == 0 || (len(c.SetResources) >= 2 && a.rng.IntN(2) == 0) {
		n := min(len(c.SetResources), 2+a.rng.IntN(2))
		for _, i := range a.rng.Perm(len(c.SetResources))[:n] {
			members = append(members, c.SetResources[i])
		}
		return members, members, nil
	}
	var all, files []string
	for _, p := range c.Paths {
		r, err := fence.PathResource(p)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, r)
		if !fence.IsDir(r) {
			files = append(files, r)
		}
	}
	for _, i := range a.rng.Perm(len(all))[:min(len(all), 1+a.rng.IntN(2))] {
		if !slices.ContainsFunc(members, func(m string) bool { return fence.Overlaps(m, all[i]) }) {
			members = append(members, all[i])
		}
	}
	for _, f := range files {
		if slices.ContainsFunc(members, func(m string) bool { return m == f || fence.Overlaps(m, f) }) {
			targets = append(targets, f)
		}
	}
	return members, targets, nil
}

// claim acquires members as one claim (a lost reply retried with the same
// request), writes one to three times under its token to targets it
// covers (stalling past its term now and then: the stale holder, whom the
// gate must refuse once an overlapping claim was granted), and releases
// it. It returns how long to wait before the next cycle.
func (e *env[TTx]) claim(ctx context.Context, a *agent, members, targets []string) time.Duration {
	backoff := time.Duration(5+a.rng.IntN(50)) * time.Millisecond
	req, err := a.client.BeginAcquireSet(members)
	if err != nil {
		panic(fmt.Sprintf("workload: claim %v: %v", members, err))
	}
	sorted := req.Resources
	if len(sorted) == 0 {
		sorted = []string{req.Resource}
	}
	inv := e.invoke(a, history.Record{Type: history.Claim, Members: sorted, Request: req.RequestID})
	attempts := 0
	for {
		attempts++
		octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
		out, err2 := e.coord.Acquire(octx, req)
		cancel()
		err = err2
		if err == nil || Classify(err) != history.Unknown || attempts == 3 || ctx.Err() != nil {
			if err == nil && !out.OK {
				e.ret(inv, history.Record{Outcome: history.Denied, HeldBy: out.HeldBy, HeldFence: out.Fence, Attempts: attempts}, nil)
				return backoff
			}
			if err != nil {
				break
			}
			l, err := a.client.CompleteAcquire(req, out.Grant)
			if err != nil {
				e.ret(inv, history.Record{Outcome: history.Unknown, Attempts: attempts}, err)
				return backoff
			}
			tok := l.Token()
			e.ret(inv, history.Record{Outcome: history.OK, Granted: tok.Fence, Covered: tok.Members(), TTL: int64(out.Grant.TTL),
				Until: believedUntil(l, a.clock), Expires: expiresAt(out.Grant), Attempts: attempts}, nil)
			e.announce("granted", inv.Op)
			e.claimWrites(ctx, a, l, targets)
			rel := e.invoke(a, history.Record{Type: history.ClaimRelease, Members: sorted, Fence: tok.Fence})
			rctx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
			released, err := e.coord.Release(rctx, tok)
			cancel()
			r := history.Record{Outcome: Classify(err)}
			if err == nil && !released {
				r.Outcome = history.Noop
			}
			e.ret(rel, r, err)
			return time.Duration(a.rng.IntN(20)) * time.Millisecond
		}
		sleep(ctx, time.Duration(20+a.rng.IntN(60))*time.Millisecond)
	}
	e.ret(inv, history.Record{Outcome: Classify(err), Attempts: attempts}, err)
	return backoff
}

// claimWrites writes one to three times under l's token, each to a target
// drawn from targets: a file through gate.CommitFile, a plain member
// through gate.Commit.
func (e *env[TTx]) claimWrites(ctx context.Context, a *agent, l *lease.Lease, targets []string) {
	tok := l.Token()
	for range 1 + a.rng.IntN(3) {
		// The holder's own check: advisory, the only guard in the control.
		if l.Expired() {
			return
		}
		if a.rng.Float64() < e.cfg.StallProb {
			f := e.cfg.StallMin + a.rng.Float64()*(e.cfg.StallMax-e.cfg.StallMin)
			sleep(ctx, time.Duration(f*float64(e.cfg.TTL)))
		}
		if e.claimWrite(ctx, a, tok, targets[a.rng.IntN(len(targets))]) == history.Refused {
			return
		}
	}
}

func (e *env[TTx]) claimWrite(ctx context.Context, a *agent, tok fence.Token, target string) history.Outcome {
	inv := e.invoke(a, history.Record{Type: history.ClaimWrite, Members: tok.Members(), Fence: tok.Fence, Target: target})
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	defer cancel()
	args := []any{target, tok.Fence, inv.Op}
	if e.driver.Dialect() == mysql.Dialect {
		args = append(args, target) // no numbered placeholders
	}
	committing := false
	tx, err := e.driver.Begin(octx)
	if err == nil {
		switch {
		case e.cfg.Bypass: // the control: only the holder's own check guarded it
		case fence.IsPath(target):
			err = e.gate.CommitFile(octx, tx, tok, target)
		default:
			err = e.gate.Commit(octx, tx, tok)
		}
		if err == nil {
			err = e.exec(octx, tx, insertFileWrite[e.driver.Dialect()], args...)
		}
		if err == nil {
			committing = true
			e.announce("commit", inv.Op)
			err = e.driver.Commit(octx, tx)
		}
		if err != nil && !committing {
			// Commit and CommitFile roll tx back themselves on an error;
			// a second rollback is a no-op.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(octx), e.cfg.OpTimeout)
			_ = e.driver.Rollback(rctx, tx)
			cancel()
		}
	}
	r := history.Record{Outcome: history.OK}
	var stale *gate.StaleFenceError
	switch {
	case err == nil:
	case errors.As(err, &stale):
		refused(&r, stale)
	case !committing:
		r.Outcome = history.Fail
	default:
		r.Outcome = classifyCommit(err)
	}
	e.ret(inv, r, err)
	return r.Outcome
}
