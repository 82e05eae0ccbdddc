package lease

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
)

// ClientOptions configure a Client (NewClient takes a pointer, as every
// constructor of fencegate's takes its options). Holder is required.
type ClientOptions struct {
	// Holder names this holder: a process, pod or agent. Required; the same
	// rules as fence.ValidateHolder. Two holders must not share a name, or
	// neither can tell the coordinator which of them holds a lease.
	Holder string

	// ClockSkew is subtracted from every deadline. It is how far the holder's
	// clock may fall behind the database's over one lease term: the
	// difference in the rate the two clocks run at, times the ttl, plus any
	// margin you want (a stalled process is not a clock problem: the gate
	// covers it). Defaults to 0. Must be below TTL when TTL is set.
	ClockSkew time.Duration

	// Clock is the holder's clock. It must be monotonic; the Client panics if
	// it reads backwards. Defaults to clock.System().
	Clock clock.Clock

	// TTL is the lease term the holder asks for, at least MinTTL. Defaults
	// to 0, which lets the coordinator choose (CoordinatorOptions.TTL).
	TTL time.Duration

	// ReleaseTimeout bounds Hold's release of the lease, which runs even
	// when Hold's context is cancelled. When the coordinator does not
	// answer in time, Hold returns anyway, and its error says the lease may
	// not have been released (it then expires by itself at the end of its
	// term). Defaults to 5s.
	ReleaseTimeout time.Duration
}

// Client is the holder's side of the lease protocol. It dates every lease
// from the instant its request was sent, on the holder's own clock, so that
// the holder's belief always ends before the coordinator's:
//
//	deadline = request sent + grant.TTL - ClockSkew
//
// The coordinator starts its term when it processes the request, which is
// later, so however slow the request and the reply are, the holder's window
// lies inside the coordinator's.
//
// A Client is safe for concurrent use.
type Client struct {
	holder         string
	skew           time.Duration
	ttl            time.Duration
	releaseTimeout time.Duration
	clock          *checkedClock
	keeper         keeper // renews the leases held through Hold
}

// NewClient returns a Client for one holder. Invalid options (a nil opts
// has no Holder) return an error matching fence.ErrInvalidInput. The Client
// keeps a copy of *opts.
func NewClient(o *ClientOptions) (*Client, error) {
	var opts ClientOptions
	if o != nil {
		opts = *o
	}
	if err := fence.ValidateHolder(opts.Holder); err != nil {
		return nil, err
	}
	switch {
	case opts.ClockSkew < 0:
		return nil, invalid("clock skew", "must not be negative, got %v", opts.ClockSkew)
	case opts.TTL < 0 || (opts.TTL > 0 && opts.TTL < MinTTL):
		return nil, invalid("ttl", "must be at least %v (or 0 for the coordinator's default), got %v", MinTTL, opts.TTL)
	case opts.TTL > 0 && opts.ClockSkew >= opts.TTL:
		return nil, invalid("clock skew", "%v is not below the ttl %v: every lease would be born expired", opts.ClockSkew, opts.TTL)
	}
	holderClock := opts.Clock
	if holderClock == nil {
		holderClock = clock.System()
	}
	return &Client{
		holder: opts.Holder, skew: opts.ClockSkew, ttl: opts.TTL, clock: &checkedClock{clock: holderClock},
		releaseTimeout: cmp.Or(max(opts.ReleaseTimeout, 0), 5*time.Second),
	}, nil
}

// Holder returns the holder's name.
func (c *Client) Holder() string { return c.holder }

// AcquireRequest asks the coordinator for a new lease on a resource. Make one
// with Client.BeginAcquire just before sending it; the exported fields are
// what goes over the wire, and all Coordinator.Acquire reads.
//
// A request is single-use: Client.CompleteAcquire accepts it once. Sending
// it again (a retry after a lost reply) is safe: while the lease it was
// granted is current, the coordinator answers with the same grant.
type AcquireRequest struct {
	Resource  string        // the resource to lease; empty for a set
	Holder    string        // who asks
	RequestID string        // random, unique per request; makes retries idempotent
	TTL       time.Duration // the term asked for; 0 for the coordinator's default
	// Resources, for a claim of several resources at once
	// (BeginAcquireSet), names every member, sorted; nil otherwise.
	Resources []string

	sentAt sendStamp // holder-side only: never sent, never read by the coordinator
	client *Client
	used   atomic.Bool
	span   atomic.Pointer[acquireSpan] // the granting acquisition's span, for the Lease
	sends  atomic.Int32                // Coordinator sendings; settledSends once released settled (settle.go)
	id     string                      // RequestID as BeginAcquire made it (settle.go)
}

// SentAt returns the instant, on the holder's clock, at which the request
// was sent: the anchor of the lease's deadline. BeginAcquire reads the
// clock; a Coordinator in the holder's process reads it again once it has
// a connection for the request's first sending (see Coordinator.Acquire),
// so that time queued for a connection is not taken off the lease. It is
// zero for a request no Client began.
func (r *AcquireRequest) SentAt() clock.Instant { return r.sentAt.load() }

// sent reports whether the request may have been sent: restamp ran, just
// before its first sending.
func (r *AcquireRequest) sent() bool {
	r.sentAt.mu.Lock()
	defer r.sentAt.mu.Unlock()
	return r.sentAt.resent
}

// restamp reads the holder's clock again, just before the request's first
// sending, when the request was begun in this process. A retry keeps the
// first sending's instant, which comes before any grant the retry can get.
func (r *AcquireRequest) restamp() {
	if r.client != nil {
		r.sentAt.restamp(r.client.clock)
	}
}

// reanchor dates the request from at, a send instant on the holder's
// clock later than the one it had: a waiter's hand-over request follows
// the touches of its place that were answered (Coordinator.handedOver says
// why that is safe). The request counts as sent.
func (r *AcquireRequest) reanchor(at clock.Instant) {
	r.sentAt.mu.Lock()
	defer r.sentAt.mu.Unlock()
	r.sentAt.at, r.sentAt.resent = at, true
}

// RenewRequest asks the coordinator to extend a live lease. Make one with
// Client.BeginRenewal just before sending it; the exported fields are all
// Coordinator.Renew reads. It is single-use, like AcquireRequest.
type RenewRequest struct {
	Resource  string
	Holder    string
	Fence     int64 // the lease's fence: renewal keeps it
	RequestID string
	TTL       time.Duration // the new term, from when the coordinator processes it; 0 for its default
	// Resources names every member of a set's lease, sorted (Resource is
	// then empty); nil otherwise.
	Resources []string

	sentAt sendStamp
	lease  *Lease
	used   atomic.Bool
}

// SentAt returns the instant at which the request was sent, on the holder's
// clock: when BeginRenewal read it, or later, as AcquireRequest.SentAt.
// The renewed deadline dates from it, not from the reply's arrival.
func (r *RenewRequest) SentAt() clock.Instant { return r.sentAt.load() }

// restamp is AcquireRequest.restamp for a renewal.
func (r *RenewRequest) restamp() {
	if r.lease != nil && r.lease.client != nil {
		r.sentAt.restamp(r.lease.client.clock)
	}
}

// sendStamp is a request's send instant. It is read again (restamp) at most
// once, before the first sending; a lock orders that reading before the
// sending of any concurrent copy of the request.
type sendStamp struct {
	mu     sync.Mutex
	at     clock.Instant
	resent bool // restamp ran: the request has been sent
}

func newSendStamp(at clock.Instant) sendStamp { return sendStamp{at: at} }

func (s *sendStamp) load() clock.Instant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at
}

func (s *sendStamp) restamp(c clock.Clock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.resent {
		s.at, s.resent = c.Now(), true
	}
}

// Grant is the coordinator's answer to a successful acquisition or renewal.
type Grant struct {
	Resource  string // empty for a set's grant, which answers the request naming them
	Holder    string
	Fence     int64
	RequestID string // the request this grant answers

	// TTL is how long the lease had left at the coordinator when it answered
	// (a whole term for a fresh grant; less for a retried request), less the
	// database clock's resolution. The holder dates it from its own send
	// instant, never from the reply's arrival.
	TTL time.Duration

	// CoordinatorExpiresAt is the expiry in the database's clock. It is for
	// logs: the holder cannot compare it with its own clock, and the types
	// keep it from trying.
	CoordinatorExpiresAt clock.DBTime
}

// BeginAcquire starts an acquisition of resource: it reads the holder's
// clock (the instant the lease will be dated from) and returns a request
// with a fresh random id. Send it to Coordinator.Acquire right away: time
// spent between BeginAcquire and sending only shortens the lease.
func (c *Client) BeginAcquire(resource string) (*AcquireRequest, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, err
	}
	id := newRequestID()
	return &AcquireRequest{
		Resource:  resource,
		Holder:    c.holder,
		RequestID: id,
		TTL:       c.ttl,
		sentAt:    newSendStamp(c.clock.Now()),
		client:    c,
		id:        id,
	}, nil
}

// CompleteAcquire turns the coordinator's grant into a Lease whose deadline
// is req.SentAt() + grant.TTL - ClockSkew. It is the only way to make a
// Lease. Errors: ErrRequestUsed if req was completed before,
// ErrGrantMismatch if grant answers another request, and an error matching
// fence.ErrInvalidInput for a request this Client did not begin or a
// malformed grant.
func (c *Client) CompleteAcquire(req *AcquireRequest, grant Grant) (*Lease, error) {
	if req == nil || req.client != c {
		return nil, invalid("request", "was not begun by this Client's BeginAcquire")
	}
	if req.used.Load() {
		return nil, ErrRequestUsed
	}
	if err := checkGrant(grant, req.Resource, req.Holder, req.RequestID, 0); err != nil {
		return nil, err
	}
	token := fence.Token{Resource: grant.Resource, Holder: grant.Holder, Fence: grant.Fence}
	if len(req.Resources) > 0 {
		var err error
		if token, err = fence.NewSetToken(req.Resources, grant.Holder, grant.Fence); err != nil {
			return nil, err
		}
	}
	if !req.used.CompareAndSwap(false, true) {
		return nil, ErrRequestUsed // a concurrent completion won
	}
	l := &Lease{client: c, token: token}
	l.set(req.SentAt(), grant)
	req.completed(l)
	return l, nil
}

// BeginRenewal starts a renewal of l, reading the holder's clock for the new
// deadline's anchor. Renew one lease at a time: the deadline follows the
// renewal completed last. Errors: ErrReleased for a lease this Client
// released, and an error matching fence.ErrInvalidInput for a lease of
// another Client.
func (c *Client) BeginRenewal(l *Lease) (*RenewRequest, error) {
	if l == nil || l.client != c {
		return nil, invalid("lease", "was not acquired by this Client")
	}
	if l.isReleased() {
		return nil, ErrReleased
	}
	var members []string
	if l.token.IsSet() {
		members = l.token.Members()
	}
	return &RenewRequest{
		Resources: members,
		Resource:  l.token.Resource,
		Holder:    l.token.Holder,
		Fence:     l.token.Fence,
		RequestID: newRequestID(),
		TTL:       c.ttl,
		sentAt:    newSendStamp(c.clock.Now()),
		lease:     l,
	}, nil
}

// CompleteRenewal applies the coordinator's renewal grant to the lease the
// request renews and returns that same *Lease. The fence (and so the token)
// is unchanged; the new deadline is req.SentAt() + grant.TTL - ClockSkew.
// Errors: as CompleteAcquire, plus ErrReleased if the lease was released
// while the renewal was in flight.
func (c *Client) CompleteRenewal(req *RenewRequest, grant Grant) (*Lease, error) {
	if req == nil || req.lease == nil || req.lease.client != c {
		return nil, invalid("request", "was not begun by this Client's BeginRenewal")
	}
	if req.used.Load() {
		return nil, ErrRequestUsed
	}
	if err := checkGrant(grant, req.Resource, req.Holder, req.RequestID, req.Fence); err != nil {
		return nil, err
	}
	if !req.used.CompareAndSwap(false, true) {
		return nil, ErrRequestUsed
	}
	l := req.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil, ErrReleased
	}
	l.setLocked(req.SentAt(), grant)
	return l, nil
}

// Release marks l released on the holder's side, so that it reports Expired
// and cannot be renewed, and returns the token to pass to
// Coordinator.Release. Marking first means the holder stops trusting the
// lease before the coordinator frees it. Releasing twice is harmless.
func (c *Client) Release(l *Lease) (fence.Token, error) {
	if l == nil || l.client != c {
		return fence.Token{}, invalid("lease", "was not acquired by this Client")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = true
	return l.token, nil
}

// checkGrant reports how grant fails to answer a request. fence is 0 for an
// acquisition, whose fence the holder does not know yet.
func checkGrant(grant Grant, resource, holder, requestID string, fence int64) error {
	switch {
	case grant.Resource != resource:
		return fmt.Errorf("%w: grant is for resource %q, request for %q", ErrGrantMismatch, grant.Resource, resource)
	case grant.Holder != holder:
		return fmt.Errorf("%w: grant is for holder %q, request from %q", ErrGrantMismatch, grant.Holder, holder)
	case grant.RequestID != requestID:
		return fmt.Errorf("%w: grant answers request %q, not %q", ErrGrantMismatch, grant.RequestID, requestID)
	case fence != 0 && grant.Fence != fence:
		return fmt.Errorf("%w: grant has fence %d, the lease renewed has %d", ErrGrantMismatch, grant.Fence, fence)
	case grant.Fence <= 0:
		return invalid("grant", "fence must be positive, got %d", grant.Fence)
	case grant.TTL < 0:
		return invalid("grant", "ttl must not be negative, got %v", grant.TTL)
	}
	return nil
}

// Lease is a holder's lease: the token to present to the gate, and the
// holder's own estimate of how long it lasts.
//
// Remaining and Expired are ADVISORY ONLY. They are safe for deciding when
// to renew or whether to start long work, and unsafe to branch a write on:
// the answer can be stale before the write lands (a GC pause, a slow model
// call, a stalled network), which is exactly when it matters. Guard the
// write with gate.Commit in the write's own transaction instead.
//
// A Lease is safe for concurrent use. Renewals update it in place.
type Lease struct {
	client *Client
	token  fence.Token // never changes: renewals keep the fence
	otel   leaseOtel   // set once, before the Lease is shared

	mu       sync.Mutex
	deadline clock.Instant
	grant    Grant
	released bool
}

func (l *Lease) set(sentAt clock.Instant, grant Grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(sentAt, grant)
}

func (l *Lease) setLocked(sentAt clock.Instant, grant Grant) {
	l.deadline = sentAt.Add(grant.TTL - l.client.skew)
	l.grant = grant
}

// Token returns the proof of ownership to pass to gate.Commit. It stays the
// same across renewals.
func (l *Lease) Token() fence.Token { return l.token }

// Deadline returns the instant, on the holder's clock, at which the holder
// stops believing it holds the lease. As long as ClockSkew bounds how far
// the holder's clock falls behind the database's, it is never later than the
// coordinator's expiry. Advisory: see Lease.
func (l *Lease) Deadline() clock.Instant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Grant returns the grant the lease was last acquired or renewed with, for
// logs (Grant.CoordinatorExpiresAt) and to learn the term (Grant.TTL).
func (l *Lease) Grant() Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grant
}

// Age returns how long ago, on the holder's clock, the request of the
// lease's current grant (its acquisition or its latest renewal) was sent:
// the term is counted from then, so while the lease lasts, Age plus
// Remaining is the term less ClientOptions.ClockSkew. A renewal is due once
// Age passes a third of the term (Grant().TTL / 3); for health checks.
// Advisory, as Remaining.
func (l *Lease) Age() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	sentAt := l.deadline.Add(l.client.skew - l.grant.TTL)
	return l.client.clock.Now().Sub(sentAt)
}

// Remaining returns the time left until the deadline on the holder's clock,
// and 0 once it has passed or the lease was released.
//
// ADVISORY ONLY: unsafe to branch a write on. Use gate.Commit.
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return 0
	}
	return max(l.deadline.Sub(l.client.clock.Now()), 0)
}

// Expired reports whether the deadline has passed or the lease was released.
// A false answer is already stale when it arrives.
//
// ADVISORY ONLY: unsafe to branch a write on. Use gate.Commit.
func (l *Lease) Expired() bool { return l.Remaining() <= 0 }

func (l *Lease) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// newRequestID returns 128 random bits in hex. crypto/rand does not fail
// (it crashes the program if the system's generator is unavailable).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func invalid(field, format string, args ...any) error {
	return &fence.InvalidInputError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
