package fencegatecli

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// defaultTTL is the term claim and run ask for, and renew extends to.
const defaultTTL = 30 * time.Second

// minTTL is the shortest --ttl: a lease shorter than a round trip to the
// database would be born expired.
const minTTL = 100 * time.Millisecond

func claimCommand() *command {
	cmd := &command{
		name:     "claim",
		synopsis: "claim a lock and print its token",
		usage:    "claim --lock NAME [--ttl 30s] [--holder ID] [--wait D]",
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
ttl ends. --ttl is at least 100ms.`,
		db: true,
	}
	fs := cmd.flagSet()
	lock := fs.String("lock", "", "the lock (resource) to claim (required)")
	ttl := durationFlag(fs, "ttl", defaultTTL, "`duration` of the lease, unless renewed")
	holderFlag := fs.String("holder", "", "who claims it (default $"+envHolder+", else host-pid)")
	wait := durationFlag(fs, "wait", 0, "if the lock is held, keep trying for this `duration` before exiting 3")
	cmd.exec = func(ctx context.Context, c *cli, _ []string) error {
		if err := checkLock(*lock); err != nil {
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

		l, err := claimLock(ctx, b, client, *lock, *wait)
		if held, ok := errors.AsType[*lease.HeldError](err); ok {
			return heldBy(held)
		}
		if errors.Is(err, lease.ErrBusy) {
			return busy(*lock, err)
		}
		if err != nil {
			return err
		}
		g := l.Grant()
		fmt.Fprintln(c.stdout, l.Token())
		c.logf(cmd, "%s: fence %d for %s, expires in %s (%s)",
			g.Resource, g.Fence, g.Holder, dur(g.TTL), stamp(g.CoordinatorExpiresAt.Time()))
		return nil
	}
	return cmd
}

// claimLock acquires lock for client's holder, waiting its turn while it
// is held until wait has passed (lease.Coordinator.AcquireWait). A held
// lock is a *lease.HeldError; with wait 0, so is none of a busy one
// (lease.ErrBusy).
func claimLock(ctx context.Context, b *backend, client *lease.Client, lock string, wait time.Duration) (*lease.Lease, error) {
	if wait > 0 {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return b.coord.AcquireWait(ctx, client, lock)
	}
	req, err := client.BeginAcquire(lock)
	if err != nil {
		return nil, err
	}
	out, err := b.coord.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	if !out.OK {
		return nil, &lease.HeldError{Resource: lock, HeldBy: out.HeldBy, Fence: out.Fence, RetryAfter: out.RetryAfter, AlreadyHeld: out.AlreadyHeld}
	}
	return client.CompleteAcquire(req, out.Grant)
}

// checkTTL checks a --ttl value.
func checkTTL(ttl time.Duration) error {
	if ttl < minTTL {
		return usagef("--ttl must be at least %v, got %v", minTTL, ttl)
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
	return heldf("%s is held by %s (fence %d); retry after %s", held.Resource, who, held.Fence, dur(held.RetryAfter))
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
	return tokenCommand(cmd, nil, func(ctx context.Context, c *cli, b *backend, token gate.Token) error {
		st, _, why, err := checkToken(ctx, b, token)
		if err != nil {
			return err
		}
		if why != "" {
			return heldf("%s", why)
		}
		fmt.Fprintf(c.stdout, "current: %s fence %d held by %s, expires in %s\n",
			token.Resource, token.Fence, token.Holder, dur(st.Remaining))
		return nil
	})
}

// checkToken reads token's lease and floor, and says why the token is not
// current ("" if it is). Advisory, as check is.
func checkToken(ctx context.Context, b *backend, token gate.Token) (st lease.Status, floor int64, why string, err error) {
	if st, err = b.coord.Status(ctx, token.Resource); err != nil {
		return lease.Status{}, 0, "", err
	}
	f, err := b.gate.Floor(ctx, token.Resource)
	if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
		return lease.Status{}, 0, "", err
	}
	return st, f.Floor, staleness(token, st, f.Floor), nil
}

// staleness says why token is not current, given its lock's lease status
// and gate floor, or returns "" if it is.
func staleness(token gate.Token, st lease.Status, floor int64) string {
	mine := st.Fence == token.Fence && st.Holder == token.Holder
	switch {
	case st.Fence == 0:
		return fmt.Sprintf("never issued: %s was never leased", token.Resource)
	case mine && st.Released:
		return fmt.Sprintf("stale: the lease on %s with fence %d was released", token.Resource, token.Fence)
	case mine && !st.Held:
		return fmt.Sprintf("stale: the lease on %s with fence %d expired %s ago",
			token.Resource, token.Fence, dur(st.Now.Sub(st.ExpiresAt)))
	case mine && floor > token.Fence:
		return fmt.Sprintf("stale: the gate's floor for %s is %d, above fence %d", token.Resource, floor, token.Fence)
	case mine:
		return ""
	case token.Fence < st.Fence:
		return fmt.Sprintf("stale: %s has moved on to fence %d (%s), above fence %d",
			token.Resource, st.Fence, describe(st), token.Fence)
	default:
		return fmt.Sprintf("never issued: no lease on %s has fence %d for holder %q", token.Resource, token.Fence, token.Holder)
	}
}

// describe says who holds a lease now.
func describe(st lease.Status) string {
	switch {
	case st.Held:
		return fmt.Sprintf("held by %q", st.Holder)
	case st.Released:
		return fmt.Sprintf("released by %q", st.Holder)
	default:
		return fmt.Sprintf("expired, last held by %q", st.Holder)
	}
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
	ttl := durationFlag(cmd.flagSet(), "ttl", defaultTTL, "the new term: a `duration` from now")
	check := func() error { return checkTTL(*ttl) }
	return tokenCommand(cmd, check, func(ctx context.Context, c *cli, b *backend, token gate.Token) error {
		out, err := renewToken(ctx, b, token, *ttl)
		if errors.Is(err, lease.ErrUnknownResource) {
			return heldf("never issued: %s was never leased", token.Resource)
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
				token.Resource, token.Fence, token.Holder, now)
		}
		fmt.Fprintln(c.stdout, stamp(out.Grant.CoordinatorExpiresAt.Time()))
		c.logf(cmd, "%s: fence %d, expires in %s", token.Resource, token.Fence, dur(out.Grant.TTL))
		return nil
	})
}

// renewToken renews the lease token names. Each invocation is a fresh
// process with no lease.Client state, so the request is built from the
// token: the coordinator side is authoritative and reads only these fields.
func renewToken(ctx context.Context, b *backend, token gate.Token, ttl time.Duration) (lease.RenewOutcome, error) {
	return b.coord.Renew(ctx, &lease.RenewRequest{
		Resource:  token.Resource,
		Holder:    token.Holder,
		Fence:     token.Fence,
		RequestID: newRequestID(),
		TTL:       ttl,
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
	return tokenCommand(cmd, nil, func(ctx context.Context, c *cli, b *backend, token gate.Token) error {
		released, err := b.coord.Release(ctx, token)
		if err != nil {
			return err
		}
		if !released {
			return heldf("stale: %s fence %d for %q is not the current lease (expired, released, superseded or never issued); nothing changed",
				token.Resource, token.Fence, token.Holder)
		}
		c.logf(cmd, "released %s (fence %d)", token.Resource, token.Fence)
		return nil
	})
}

// newRequestID returns a random request id (128 bits of base32).
func newRequestID() string { return crand.Text() }
