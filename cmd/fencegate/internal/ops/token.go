package ops

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// DefaultTTL is the term claim and run ask for, and renew extends to.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest --ttl: a lease shorter than a round trip to the
// database would be born expired.
const MinTTL = 100 * time.Millisecond

// CheckToken reads token's lease and floor, and says why the token is not
// current ("" if it is). Advisory, as check is.
//
// A set token is current when every member is: the answer is the first
// member's that is not (or the first member's, if all are).
func CheckToken(ctx context.Context, b *Backend, token fence.Token) (st lease.Status, floor int64, why string, err error) {
	for i, m := range token.Members() {
		mst, err := b.Coord.Status(ctx, m)
		if err != nil {
			return lease.Status{}, 0, "", err
		}
		f, err := b.Gate.Floor(ctx, m)
		if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
			return lease.Status{}, 0, "", err
		}
		one := token
		if token.IsSet() {
			one = fence.Token{Resource: m, Holder: token.Holder, Fence: token.Fence}
		}
		if w := Staleness(one, mst, f.Floor); i == 0 || w != "" {
			st, floor, why = mst, f.Floor, w
			if w != "" {
				break
			}
		}
	}
	return st, floor, why, nil
}

// Staleness says why token is not current, given its lock's lease status
// and gate floor, or returns "" if it is.
func Staleness(token fence.Token, st lease.Status, floor int64) string {
	mine := st.Fence == token.Fence && st.Holder == token.Holder
	switch {
	case st.Fence == 0:
		return fmt.Sprintf("never issued: %s was never leased", token.Resource)
	case mine && st.Released:
		return fmt.Sprintf("stale: the lease on %s with fence %d was released", token.Resource, token.Fence)
	case mine && !st.Held:
		return fmt.Sprintf("stale: the lease on %s with fence %d expired %s ago",
			token.Resource, token.Fence, Dur(st.Now.Sub(st.ExpiresAt)))
	case mine && floor > token.Fence:
		return fmt.Sprintf("stale: the gate's floor for %s is %d, above fence %d", token.Resource, floor, token.Fence)
	case mine:
		return ""
	case token.Fence < st.Fence:
		return fmt.Sprintf("stale: %s has moved on to fence %d (%s), above fence %d",
			token.Resource, st.Fence, Describe(st), token.Fence)
	default:
		return fmt.Sprintf("never issued: no lease on %s has fence %d for holder %q", token.Resource, token.Fence, token.Holder)
	}
}

// Describe says who holds a lease now.
func Describe(st lease.Status) string {
	switch {
	case st.Held:
		return fmt.Sprintf("held by %q", st.Holder)
	case st.Released:
		return fmt.Sprintf("released by %q", st.Holder)
	default:
		return fmt.Sprintf("expired, last held by %q", st.Holder)
	}
}

// SetMembers is a set token's members for a request's Resources; nil for
// a token of one resource.
func SetMembers(token fence.Token) []string {
	if !token.IsSet() {
		return nil
	}
	return token.Members()
}

// RenewToken renews the lease token names. Each invocation is a fresh
// process with no lease.Client state, so the request is built from the
// token: the coordinator side is authoritative and reads only these fields.
func RenewToken(ctx context.Context, b *Backend, token fence.Token, ttl time.Duration) (lease.RenewOutcome, error) {
	return b.Coord.Renew(ctx, &lease.RenewRequest{
		Resource:  token.Resource,
		Resources: SetMembers(token),
		Holder:    token.Holder,
		Fence:     token.Fence,
		RequestID: NewRequestID(),
		TTL:       ttl,
	})
}

// NewRequestID returns a random request id (128 bits of base32).
func NewRequestID() string { return crand.Text() }
