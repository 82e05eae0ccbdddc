package fencegatecli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
)

func claimCommand() *command {
	cmd := &command{
		name:     "claim",
		synopsis: "claim a lock and print its token",
		usage:    "claim (--lock NAME | --path FILE... [--root DIR]) [--ttl 30s] [--holder ID] [--wait D]",
		help: `Claim a lock for --ttl and print its token on stdout, such as
"fg1:7:deploy-slot:build-7" (fg1:<fence>:<lock>:<holder>, lock and holder
query-escaped). Pass the token to 'fencegate gate' for fenced writes, and to
renew and release. Its fence is above every fence issued before.

If someone else holds the lock, exit 3 and say on stderr who holds it and
when it is free at the latest; with --wait, wait up to that long for it, in
line: waiters are granted in the order they started waiting, from any
process, and a release hands the lock to the next at once (on SQLite, a
waiter in another process notices within a second). A lock that another
transaction is using right now (the previous holder's write in flight, a
concurrent claim: "busy") is held too: exit 3, nothing granted, and --wait
waits it out. A holder killed without releasing holds the lock until its
ttl ends. --ttl is at least 100ms.

--path claims files instead of a lock name: relative to --root (default the
working directory), a trailing / claiming a directory and everything below
it; repeated, all of them or none, under one fence. Two claims conflict
when a path of one equals, contains or is contained in a path of the other
(src/ and src/a.go; not src/a.go and src/b.go). Each path is cleaned and
resolved first: symbolic links inside the root to their targets, links
leading out refused, case folded on a case-insensitive root; see
docs/PATHS.md.`,
		db: true,
	}
	fs := cmd.flagSet()
	lock := fs.String("lock", "", "the lock (resource) to claim (or --path)")
	pf := addPathFlags(fs)
	ttl := durationFlag(fs, "ttl", ops.DefaultTTL, "`duration` of the lease, unless renewed")
	holderFlag := fs.String("holder", "", "who claims it (default $"+envHolder+", else host-pid)")
	wait := durationFlag(fs, "wait", 0, "if the lock is held, keep trying for this `duration` before exiting 3")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		resources, name, err := pf.resources(*lock)
		if err != nil {
			return err
		}
		if err := checkTTL(*ttl); err != nil {
			return err
		}
		if *wait < 0 {
			return usagef("--wait must not be negative, got %v", *wait)
		}
		holder := c.holder(*holderFlag)
		client, err := lease.NewClient(&lease.ClientOptions{Holder: holder, TTL: *ttl})
		if err != nil {
			return usagef("%s", err)
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}

		l, err := ops.ClaimSet(ctx, b, client, resources, *wait)
		if held, ok := errors.AsType[*lease.HeldError](err); ok {
			return heldBy(held)
		}
		if errors.Is(err, lease.ErrBusy) {
			return busy(name, err)
		}
		if err != nil {
			return err
		}
		g := l.Grant()
		fmt.Fprintln(c.stdout, l.Token())
		c.logf(cmd, "%s: fence %d for %s, expires in %s (%s)",
			name, g.Fence, g.Holder, ops.Dur(g.TTL), ops.Stamp(g.CoordinatorExpiresAt.Time()))
		return nil
	}
	return cmd
}

// checkTTL checks a --ttl value.
func checkTTL(ttl time.Duration) error {
	if ttl < ops.MinTTL {
		return usagef("--ttl must be at least %v, got %v", ops.MinTTL, ttl)
	}
	return nil
}

// heldBy is the *heldError that says who holds a lock.
func heldBy(held *lease.HeldError) error {
	if held.Queued {
		return heldf("%s is free, but other waiters are ahead in its queue", held.Resource)
	}
	who := fmt.Sprintf("%q", held.HeldBy)
	if held.AlreadyHeld {
		who = fmt.Sprintf("this holder, %q, under another claim", held.HeldBy)
	}
	return heldf("%s is held by %s (fence %d); retry after %s", held.Resource, who, held.Fence, ops.Dur(held.RetryAfter))
}

// busy is the *heldError that says an acquisition found the lock in use by
// another transaction (the previous holder's write, a concurrent claim):
// for a claimer that is the lock being held, for now.
func busy(lock string, err error) error {
	return heldf("%s: busy, in use by another transaction; nothing was granted: retry, or use --wait (%v)", lock, err)
}

func checkCommand() *command {
	cmd := &command{
		name:     "check",
		aliases:  []string{"assert"}, // the MCP tool's name
		synopsis: "exit 0 if a token is current, 3 if it is stale or was never issued",
		usage:    "check [--lock NAME] TOKEN",
		help: `Exit 0 if TOKEN is current, 3 if it is stale or was never issued. TOKEN
defaults to $` + envToken + `; --lock, if given, must be the token's lock.

"Current" means: the lock's lease has exactly this holder and fence, is
neither expired nor released in the database's clock, and the gate's floor
is not above the fence. The answer is advisory: it can be stale by the time
you act on it. What is safe is a fenced write ('fencegate gate'), which the
database refuses once the token is stale.

'fencegate assert' is the same command, under the MCP tool's name.`,
	}
	return tokenCommand(cmd, nil, func(ctx context.Context, c *cli, b *ops.Backend, token fence.Token) error {
		st, _, why, err := ops.CheckToken(ctx, b, token)
		if err != nil {
			return err
		}
		if why != "" {
			return heldf("%s", why)
		}
		fmt.Fprintf(c.stdout, "current: %s fence %d held by %s, expires in %s\n",
			ops.TokenName(token), token.Fence, token.Holder, ops.Dur(st.Remaining))
		return nil
	})
}

func renewCommand() *command {
	cmd := &command{
		name:     "renew",
		synopsis: "extend the lease a token names",
		usage:    "renew [--ttl 30s] [--lock NAME] TOKEN",
		help: `Extend the lease TOKEN names to --ttl from now, in the database's clock, and
print the new expiry on stdout. The fence, and so the token, stays the same.
TOKEN defaults to $` + envToken + `.

A lease that expired, was released or was superseded is never extended:
exit 3, and claim the lock again.`,
	}
	ttl := durationFlag(cmd.flagSet(), "ttl", ops.DefaultTTL, "the new term: a `duration` from now")
	check := func() error { return checkTTL(*ttl) }
	return tokenCommand(cmd, check, func(ctx context.Context, c *cli, b *ops.Backend, token fence.Token) error {
		out, err := ops.RenewToken(ctx, b, token, *ttl)
		if errors.Is(err, lease.ErrUnknownResource) {
			return heldf("never issued: %s was never leased", ops.TokenName(token))
		}
		if err != nil {
			return err
		}
		if !out.OK {
			now := "it is free"
			if out.HeldBy != "" {
				now = fmt.Sprintf("it is held by %q with fence %d", out.HeldBy, out.Fence)
			}
			return heldf("stale: the lease on %s with fence %d for %q expired, was released or was superseded (%s); claim it again",
				ops.TokenName(token), token.Fence, token.Holder, now)
		}
		fmt.Fprintln(c.stdout, ops.Stamp(out.Grant.CoordinatorExpiresAt.Time()))
		c.logf(cmd, "%s: fence %d, expires in %s", ops.TokenName(token), token.Fence, ops.Dur(out.Grant.TTL))
		return nil
	})
}

func releaseCommand() *command {
	cmd := &command{
		name:     "release",
		synopsis: "release the lease a token names",
		usage:    "release [--lock NAME] TOKEN",
		help: `Release the lease TOKEN names, so the lock is free at once. TOKEN defaults
to $` + envToken + `.

A stale token (expired, released, superseded) changes nothing and exits 3:
a late release never frees a successor's lease. The gate's floor is left as
it is, so the released token's fenced writes are still admitted until
someone claims the lock again.`,
	}
	return tokenCommand(cmd, nil, func(ctx context.Context, c *cli, b *ops.Backend, token fence.Token) error {
		released, err := b.Coord.Release(ctx, token)
		if err != nil {
			return err
		}
		if !released {
			return heldf("stale: %s fence %d for %q is not the current lease (expired, released, superseded or never issued); nothing changed",
				ops.TokenName(token), token.Fence, token.Holder)
		}
		c.logf(cmd, "released %s (fence %d)", ops.TokenName(token), token.Fence)
		return nil
	})
}
