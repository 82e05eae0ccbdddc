package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/wakeup"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// MaxPermits is the most permits a Semaphore has: each permit is a lease
// resource of its own, and a waiter at the head of the line tries them in
// turn.
const MaxPermits = 1024

// Semaphore is N permits on a name, each permit a fenced lease of its own:
// the resource "name#i" for slot i in 0..N-1, with its own fence and its
// own floor at the gate. See the package documentation.
//
// A Semaphore is safe for concurrent use. It must come from New.
type Semaphore struct {
	coord  *lease.Coordinator
	client *lease.Client
	name   string
	n      int
	line   string        // the resource whose queue orders waiters: "name#line"
	wake   chan struct{} // a permit released through this Semaphore
	local  chan struct{} // one Acquire of this Semaphore in line at a time: the line's lease is its Client's
}

// Permit is one permit of a Semaphore: the lease on its slot.
type Permit struct {
	s    *Semaphore
	slot int
	l    *lease.Lease
}

// New returns client's side of the semaphore name with n permits,
// over coord. n rules until N is stored in the database (SetPermits); from
// then on the stored N rules every participant, whatever n each was built
// with (see the package documentation on changing N). Errors:
// fence.ErrInvalidInput for a nil coord or client, an empty or invalid name,
// or n outside 1..MaxPermits; nothing is written.
func New(coord *lease.Coordinator, client *lease.Client, name string, n int) (*Semaphore, error) {
	if coord == nil {
		return nil, invalid("coordinator", "is nil")
	}
	if client == nil {
		return nil, invalid("client", "is nil")
	}
	if name == "" {
		return nil, invalid("semaphore name", "must not be empty")
	}
	if n <= 0 || n > MaxPermits {
		return nil, invalid("permits", "must be 1 to %d, got %d", MaxPermits, n)
	}
	s := &Semaphore{coord: coord, client: client, name: name, n: n, line: name + "#line", wake: make(chan struct{}, 1), local: make(chan struct{}, 1)}
	for _, r := range []string{name, s.line, s.slot(MaxPermits - 1)} {
		if err := fence.ValidateResource(r); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the n this Semaphore was built with: its N while none is
// stored in the database (see StoredPermits).
func (s *Semaphore) Permits() int { return s.n }

// SetPermits stores n as the semaphore's N in the database, for every
// participant: each reads it before it grants a permit. Lowering N revokes
// no live permit (each lives out its term, or until released), but nothing
// is granted until fewer than the new N are live; raising it grants the new
// slots at once. Errors: fence.ErrInvalidInput for n outside 1..MaxPermits,
// or the database's; nothing is written then.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if n <= 0 || n > MaxPermits {
		return invalid("permits", "must be 1 to %d, got %d", MaxPermits, n)
	}
	if err := s.coord.Store().Executor().SetSemaphorePermits(ctx, s.name, n); err != nil {
		return wrap("store the permits of", s.name, err)
	}
	wakeup.Poke(s.wake) // a raise frees slots for this Semaphore's head of the line
	return nil
}

// StoredPermits returns the N stored in the database for the semaphore,
// and false when none is (then each participant grants by its own n).
// Advisory, as lease.Coordinator.Status.
func (s *Semaphore) StoredPermits(ctx context.Context) (int, bool, error) {
	n, found, err := s.coord.Store().Executor().SemaphorePermits(ctx, s.name)
	if err != nil {
		return 0, false, wrap("read the permits of", s.name, err)
	}
	return n, found, nil
}

// permits is the N a grant is judged by: the stored one, or this
// Semaphore's n when none is stored. A stored value outside 1..MaxPermits
// (written around SetPermits) is refused: fail closed.
func (s *Semaphore) permits(ctx context.Context) (int, error) {
	n, found, err := s.StoredPermits(ctx)
	switch {
	case err != nil:
		return 0, err
	case !found:
		return s.n, nil
	case n <= 0 || n > MaxPermits:
		return 0, fmt.Errorf("fencegate: semaphore %q: the stored number of permits, %d, is not 1 to %d", s.name, n, MaxPermits)
	}
	return n, nil
}

// slot names slot i's resource.
func (s *Semaphore) slot(i int) string { return s.name + "#" + strconv.Itoa(i) }

// Slot returns the slot a token of this semaphore's permits names. Errors:
// fence.ErrInvalidInput for a token of another resource (another
// semaphore's permit, a plain lease) or a slot at or above MaxPermits.
func (s *Semaphore) Slot(token fence.Token) (int, error) {
	rest, ok := strings.CutPrefix(token.Resource, s.name+"#")
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 || i >= MaxPermits || strconv.Itoa(i) != rest {
		return 0, invalid("token", "resource %q is not a permit of semaphore %q", token.Resource, s.name)
	}
	return i, nil
}

// Acquire waits for a permit until one is granted or ctx ends. Waiters
// line up in the database's queue of the resource "name#line"
// (lease.Coordinator.AcquireWait, so in the order they joined, across processes);
// the one at the head holds that line's lease while it tries the slots,
// and takes the first free one, so permits are granted in the order of the
// line. The head looks again when a permit is released through this
// Semaphore, on Postgres at any release of a slot (LISTEN/NOTIFY), when the
// first held permit is due to expire, and otherwise every third of the
// lease.Coordinator.WaiterTTL. Acquisitions through one Semaphore line up in
// it first (the line's lease is its Client's), so use one Semaphore per
// Client and name.
//
// The permit's lease is not renewed: renew it as any lease (lease.Keep,
// lease.Coordinator.Renew), or use Hold.
//
// Errors: as AcquireWait's; ctx's error joined with a *lease.HeldError when ctx
// ends.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	select {
	case s.local <- struct{}{}:
		defer func() { <-s.local }()
	case <-ctx.Done():
		return nil, errors.Join(context.Cause(ctx), &lease.HeldError{Resource: s.name, Queued: true})
	}
	return s.acquire(ctx)
}

func (s *Semaphore) acquire(ctx context.Context) (*Permit, error) {
	turn, err := s.coord.AcquireWait(ctx, s.client, s.line)
	if err != nil {
		return nil, err
	}
	head, err := lease.Keep(ctx, s.client, s.coord, turn)
	if err != nil {
		return nil, err
	}
	// The line's lease, if its release fails, expires by itself: the next
	// waiter waits for it then, and nothing else is at stake.
	defer func() { _ = head.Release(ctx) }()
	hctx := head.Context()
	lctx, stop := context.WithCancel(hctx)
	defer stop()
	wake := make(chan struct{}, 1)
	if n := s.coord.Store(); n.SupportsListener() {
		go wakeup.Listen(lctx, n, sqlstore.Watch{Resource: s.name + "#", Prefix: true}, func(res string) bool { return strings.HasPrefix(res, s.name+"#") && res != s.line }, wake)
	}
	for {
		p, held, err := s.try(hctx)
		next := s.coord.WaiterTTL() / 3
		if held != nil && held.RetryAfter > 0 {
			next = min(next, held.RetryAfter+s.coord.Store().ClockPrecision())
		}
		switch {
		case p != nil:
			return p, nil
		case hctx.Err() != nil && ctx.Err() == nil:
			// Head of the line lost (a stall past its term): join again.
			return s.acquire(ctx)
		case ctx.Err() != nil:
			if held == nil { // the last try failed before any slot answered
				held = &lease.HeldError{Resource: s.name, Queued: true}
			}
			return nil, errors.Join(context.Cause(ctx), held)
		case err != nil && !errors.Is(err, lease.ErrBusy):
			return nil, err
		case err != nil:
			next = busyWait
		}
		t := time.NewTimer(next)
		select {
		case <-hctx.Done():
		case <-wake:
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// TryAcquire takes a free permit at once, or returns a *lease.HeldError (lease.ErrHeld):
// for the slot that frees first when every permit is held, for the
// semaphore's name (Queued) when others wait in line or the permits of a
// larger N are still live. It does not jump the line, though one that
// joins the line as it tries may come second. Errors otherwise: the
// lease.Coordinator's.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	st, err := s.coord.Status(ctx, s.line)
	if err != nil {
		return nil, err
	}
	if st.Held {
		return nil, &lease.HeldError{Resource: s.name, HeldBy: st.Holder, Queued: true}
	}
	p, held, err := s.try(ctx)
	if p != nil || err != nil {
		return p, err
	}
	return nil, held
}

// try tries the slots in order and returns the first granted, or the
// refusal of the held slot that frees first (nil if every slot is this
// holder's). A slot is tried only after every lower one was held, so the
// slots ever leased run from 0 without a gap.
func (s *Semaphore) try(ctx context.Context) (*Permit, *lease.HeldError, error) {
	n, err := s.permits(ctx)
	if err != nil {
		return nil, nil, err
	}
	var held *lease.HeldError
	for i := 0; i < n; i++ {
		l, err := s.coord.TryAcquire(ctx, s.client, s.slot(i))
		if h, ok := errors.AsType[*lease.HeldError](err); ok {
			if !h.AlreadyHeld && (held == nil || h.RetryAfter < held.RetryAfter) {
				held = h
			}
			continue
		}
		if err != nil {
			return nil, held, err
		}
		over, err := s.over(ctx, n)
		if err == nil && !over {
			return &Permit{s: s, slot: i, l: l}, nil, nil
		}
		// Over N (permits of a larger N still live), or unknown: the
		// permit is never handed out.
		if err == nil {
			held = &lease.HeldError{Resource: s.name, Queued: true}
		}
		return nil, held, errors.Join(err, lease.Release(ctx, s.client, s.coord, l))
	}
	if held == nil {
		held = &lease.HeldError{Resource: s.name, HeldBy: s.client.Holder(), AlreadyHeld: true}
	}
	return nil, held, nil
}

// over reports whether more than n permits are live: only possible while
// permits granted under a larger N (slots n and up) are. Slots ever leased
// run from 0 without a gap, so the scan above n stops at the first slot
// never leased: one read, unless N was lowered.
func (s *Semaphore) over(ctx context.Context, n int) (bool, error) {
	above := 0
	for i := n; i < MaxPermits; i++ {
		st, err := s.coord.Status(ctx, s.slot(i))
		if err != nil {
			return false, err
		}
		if st.Fence == 0 {
			break
		}
		if st.Held {
			above++
		}
	}
	if above == 0 {
		return false, nil
	}
	live := above
	for i := range n {
		st, err := s.coord.Status(ctx, s.slot(i))
		if err != nil {
			return false, err
		}
		if st.Held {
			live++
		}
	}
	return live > n, nil
}

// Release releases the permit the token names, as lease.Coordinator.Release
// does, and wakes this Semaphore's head of the line. Errors:
// fence.ErrInvalidInput for a token that is not a permit of this semaphore
// (nothing is released), and Release's.
func (s *Semaphore) Release(ctx context.Context, token fence.Token) (bool, error) {
	if _, err := s.Slot(token); err != nil {
		return false, err
	}
	ok, err := s.coord.Release(ctx, token)
	if ok {
		wakeup.Poke(s.wake)
	}
	return ok, err
}

// Hold acquires a permit (waiting in line, as Acquire), runs fn while the
// permit is kept alive (lease.Keep), and releases it when fn returns: lease.Hold for a
// permit, with the same context and error rules.
func (s *Semaphore) Hold(ctx context.Context, fn func(ctx context.Context, p *Permit) error) error {
	p, err := s.Acquire(ctx)
	if err != nil {
		return err
	}
	// Cancelling kctx stops the renewals (Keep): at the latest when Hold
	// returns, also if fn panics.
	kctx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	kept, err := lease.Keep(kctx, s.client, s.coord, p.l)
	if err != nil {
		return err
	}
	fnErr := fn(kept.Context(), p)
	stopKeeping() // from here on, the permit cannot be reported lost
	if lost := lostCause(kept.Context()); lost != nil && fnErr != nil {
		if errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, lease.ErrLeaseLost) {
			fnErr = lost
		} else {
			fnErr = errors.Join(lost, fnErr)
		}
	}
	err = kept.Release(ctx)
	wakeup.Poke(s.wake)
	return errors.Join(fnErr, err)
}

// Slot returns the permit's slot, 0..N-1.
func (p *Permit) Slot() int { return p.slot }

// Lease returns the permit's lease: renew it, lease.Keep it, or release it as any
// lease.
func (p *Permit) Lease() *lease.Lease { return p.l }

// Token returns the permit's proof for gate.Commit: it fences writes on the
// permit's slot ("name#i"), not on the semaphore as a whole.
func (p *Permit) Token() fence.Token { return p.l.Token() }

// Release releases the permit, bounded by lease.ClientOptions.ReleaseTimeout
// even when ctx is cancelled. Releasing twice is harmless (the second is a
// no-op, as a stale release is).
func (p *Permit) Release(ctx context.Context) error {
	err := lease.Release(ctx, p.s.client, p.s.coord, p.l)
	wakeup.Poke(p.s.wake)
	return err
}

// String names the permit, for logs. (N is not in it: the stored N may
// have changed since the grant.)
func (p *Permit) String() string {
	return fmt.Sprintf("%s permit %d (fence %d)", p.s.name, p.slot, p.Token().Fence)
}

// busyWait is how long the head of the line pauses after a busy database
// (lease.ErrBusy) before it tries the slots again.
const busyWait = 10 * time.Millisecond

// lostCause returns the *lease.LostError a kept permit's context ended with, or
// nil.
func lostCause(ctx context.Context) *lease.LostError {
	if lost, ok := errors.AsType[*lease.LostError](context.Cause(ctx)); ok {
		return lost
	}
	return nil
}

// wrap labels a database error as lease.Coordinator labels its own, marking
// retryable ones with lease.ErrBusy.
func wrap(op, name string, err error) error {
	if _, ok := errors.AsType[*fence.InvalidInputError](err); ok {
		return err
	}
	if sqlstore.IsRetryable(err) {
		err = &busyError{err}
	}
	return fmt.Errorf("fencegate: %s %q: %w", op, name, err)
}

// busyError wraps a retryable database error so that it matches both
// lease.ErrBusy and the original error.
type busyError struct{ err error }

func (e *busyError) Error() string        { return "coordinator busy, retry: " + e.err.Error() }
func (e *busyError) Is(target error) bool { return target == lease.ErrBusy }
func (e *busyError) Unwrap() error        { return e.err }

func invalid(field, format string, args ...any) error {
	return &fence.InvalidInputError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
