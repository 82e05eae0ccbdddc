package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// simple reports whether token takes Commit's one-statement path: one plain
// resource, no file. Sets and paths take checkSet's.
func simple(token fence.Token, file string) bool {
	return !token.IsSet() && !fence.IsPath(token.Resource) && file == ""
}

// refusal is one resource of a set check that refused the token.
type refusal struct {
	resource string
	res      sqlstore.FloorRaiseResult
}

// checkSet is Commit's fence check for a set or path token, and for a file
// write (file, a path resource the token covers; "" for none), inside the
// transaction ex runs in. It runs in two sorted passes, so that two
// transactions never wait on each other in a cycle:
//
//  1. every directory above a member or the file, and not itself one: its
//     path lock, shared, then its floor, which must not be above the
//     fence (a claim of that directory with a higher fence was granted);
//  2. every member, and the file: the floor raised to the fence and held
//     (FloorRaise, under VerifyIssued for members only: the file has no
//     lease of its own).
//
// Every resource is judged, so that each stale one is logged; the refusals
// come back in sorted order. ex's transaction must not commit when there
// is one.
func (g *Gate[TTx]) checkSet(ctx context.Context, ex sqlstore.Executor, token fence.Token, file string) ([]refusal, error) {
	members := token.Members()
	raise := members
	if file != "" && !slices.Contains(members, file) {
		raise = append(slices.Clone(members), file)
		slices.Sort(raise)
	}
	var dirs []string
	for _, r := range raise {
		dirs = append(dirs, fence.Ancestors(r)...)
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	dirs = slices.DeleteFunc(dirs, func(d string) bool { return slices.Contains(raise, d) })

	var refused []refusal
	for _, d := range dirs {
		if err := ex.PathLock(ctx, d, false); err != nil {
			return nil, fmt.Errorf("lock directory %s: %w", d, err)
		}
		f, err := ex.FloorGetLocked(ctx, d)
		if errors.Is(err, sqlstore.ErrNotFound) {
			continue // never claimed nor admitted
		}
		if err != nil {
			return nil, err
		}
		if f.Floor > token.Fence {
			refused = append(refused, refusal{d, sqlstore.FloorRaiseResult{Issued: true, Floor: f.Floor, FloorHolder: f.Holder}})
		}
	}
	for _, r := range raise {
		res, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{
			Resource: r, Holder: token.Holder, Fence: token.Fence,
			// Every member is verified, the file too when it is one: only
			// a file below a directory member has no lease of its own.
			VerifyIssued: g.opts.VerifyIssued && slices.Contains(members, r),
		})
		if err != nil {
			return nil, err
		}
		if !res.Admitted {
			refused = append(refused, refusal{r, res})
		}
	}
	slices.SortFunc(refused, func(a, b refusal) int { return cmpString(a.resource, b.resource) })
	return refused, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// admitSet is Admit's raise for a set or path token in the transaction ex
// runs in: each path member's lock taken exclusively (a writer below it
// reads its floor under the shared lock), then every member's floor
// raised, both in sorted order.
func (g *Gate[TTx]) admitSet(ctx context.Context, ex sqlstore.Executor, token fence.Token) ([]refusal, error) {
	members := token.Members()
	for _, m := range members {
		if fence.IsPath(m) {
			if err := ex.PathLock(ctx, m, true); err != nil {
				return nil, fmt.Errorf("lock %s: %w", m, err)
			}
		}
	}
	var refused []refusal
	for _, m := range members {
		res, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{
			Resource: m, Holder: token.Holder, Fence: token.Fence, VerifyIssued: g.opts.VerifyIssued,
		})
		if err != nil {
			return nil, err
		}
		if !res.Admitted {
			refused = append(refused, refusal{m, res})
		}
	}
	return refused, nil
}

// refuseSet logs each refusal of a set check as Commit logs its own (one
// rejection record each, with both holders) and returns them joined: the
// first *StaleFenceError is the one errors.As finds. ctx is a cleanup
// context.
func (g *Gate[TTx]) refuseSet(ctx context.Context, token fence.Token, refused []refusal) error {
	errs := make([]error, 0, len(refused))
	for _, r := range refused {
		errs = append(errs, g.refuse(ctx, fence.Token{Resource: r.resource, Holder: token.Holder, Fence: token.Fence}, r.res))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// CommitFile is Commit for a write to one file: file is the path resource
// of the file (fence.PathResource, no trailing "/"), which token must cover (a
// member is the file, or a directory above it; else an error matching
// ErrNotCovered, naming what the token claims). Inside tx, before the
// caller's writes, it does what Commit does for the token and also, under
// the path rule (package doc, Paths), refuses the write when a claim of the
// file or of a directory between it and the token's member was granted with
// a higher fence, or a write to the file under a higher fence committed;
// and it raises the file's own floor to the fence, so that no lower fence
// writes the file after this write commits.
//
// Errors are Commit's, and like Commit's each one leaves tx rolled back.
func (g *Gate[TTx]) CommitFile(ctx context.Context, tx TTx, token fence.Token, file string) (err error) {
	ctx, check := g.obs.start(ctx, "commit", token)
	defer check.end(ctx, &err)
	fail := func(err error) error {
		cctx, cancel := g.cleanup(ctx)
		defer cancel()
		g.rollback(cctx, tx)
		return err
	}
	if err := token.Validate(); err != nil {
		return fail(err)
	}
	if err := fence.ValidateResource(file); err != nil {
		return fail(err)
	}
	if !fence.IsPath(file) || fence.IsDir(file) {
		return fail(&fence.InvalidInputError{Field: "file", Reason: fmt.Sprintf("%q is not the path resource of a file (PathResource, no trailing /)", file)})
	}
	if !token.Covers(file) {
		return fail(fmt.Errorf("%w: %s is not %s nor below it", ErrNotCovered, file, token.Name()))
	}
	return g.commit(ctx, tx, token, file)
}

// commit is Commit and CommitFile after their input was checked: tx is
// rolled back on any error and every refusal is logged.
func (g *Gate[TTx]) commit(ctx context.Context, tx TTx, token fence.Token, file string) error {
	if IsNestedTx(tx) {
		cctx, cancel := g.cleanup(ctx)
		defer cancel()
		g.rollback(cctx, tx)
		return fmt.Errorf("fencegate: commit %s: %w", token, ErrNestedTx)
	}
	refused, err := g.checkSet(ctx, g.driver.UnwrapExecutor(tx), token, file)
	if err == nil && len(refused) == 0 {
		return nil
	}
	cctx, cancel := g.cleanup(ctx)
	defer cancel()
	g.rollback(cctx, tx)
	if err != nil {
		return fmt.Errorf("fencegate: commit %s: %w", token, err)
	}
	return g.refuseSet(cctx, token, refused)
}
