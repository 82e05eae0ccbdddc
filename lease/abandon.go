package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// The pauses between the background attempts to spend a request whose
// outcome is unknown (retryAbandon): doubling from the first to the last.
const (
	abandonRetryFirst = 100 * time.Millisecond
	abandonRetryMax   = 5 * time.Second
)

// errTermOver ends the background attempts of a request once the term it
// asked for has passed: whatever lease it made is over by itself.
var errTermOver = errors.New("fencegate: the term it asked for is over")

// background runs a Coordinator's work that outlives the calls that
// started it (retryAbandon), until Close. The zero value is not usable:
// NewCoordinator makes it.
type background struct {
	mu   sync.Mutex // orders a start against Close's stop, for wg
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	hooks *backgroundHooks // tests only: set before the first use
}

// backgroundHooks let tests steer the background work. Every field may be
// nil.
type backgroundHooks struct {
	after afterFunc       // the pause before an attempt
	ended func(err error) // a request's attempts ended: nil when it was spent
}

// afterFunc is a test's timer: the channel it fires on, and its Stop.
type afterFunc func(d time.Duration) (<-chan time.Time, func() bool)

// timer starts a timer of d: after's if not nil, else the runtime's.
func timer(after afterFunc, d time.Duration) (<-chan time.Time, func() bool) {
	if after != nil {
		return after(d)
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func newBackground() *background {
	ctx, stop := context.WithCancel(context.Background())
	return &background{ctx: ctx, stop: stop}
}

// start runs fn in a goroutine of its own with the background's context,
// unless Close was called.
func (b *background) start(fn func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
	return true
}

// close stops the background work and waits for it to end.
func (b *background) close() {
	b.mu.Lock()
	b.stop()
	b.mu.Unlock()
	b.wg.Wait()
}

// pause waits d, and reports false if ctx ended first.
func (b *background) pause(ctx context.Context, d time.Duration) bool {
	var after afterFunc
	if b.hooks != nil {
		after = b.hooks.after
	}
	fired, stop := timer(after, d)
	defer stop()
	select {
	case <-ctx.Done():
		return false
	case <-fired:
		return true
	}
}

func (b *background) ended(err error) {
	if b.hooks != nil && b.hooks.ended != nil {
		b.hooks.ended(err)
	}
}

// retryAbandon goes on spending req in the background after
// releaseUnknown's attempt failed (the network cut, the database away),
// so that a lease the request made is freed once the database answers
// again, not held to the end of its term. It tries again after a pause
// that doubles, each attempt bounded as releaseUnknown's, until one
// succeeds, the term req asked for has passed on its client's clock since
// (a lease it made is over by itself by then: it was made before now), or
// c is closed. It reports false if c is closed already.
func (c *Coordinator) retryAbandon(req *AcquireRequest) bool {
	members, err := checkMembers(req.Resource, req.Resources)
	if err != nil || req.client == nil {
		return false // not a request an acquisition sent
	}
	term, err := c.checkRequest(members[0], req.Holder, req.RequestID, req.TTL)
	if err != nil {
		return false
	}
	clock := req.client.clock
	end := clock.Now().Add(term)
	return c.bg.start(func(ctx context.Context) {
		for wait := abandonRetryFirst; ; wait = min(2*wait, abandonRetryMax) {
			if !c.bg.pause(ctx, wait) {
				c.bg.ended(ctx.Err())
				return
			}
			if !clock.Now().Before(end) {
				c.bg.ended(errTermOver)
				return
			}
			actx, cancel := context.WithTimeout(ctx, cleanupTimeout)
			members, err := c.abandon(actx, req)
			cancel()
			if err == nil {
				for _, m := range members { // released: nil when nothing was
					c.waits.announced(sqlstore.LeaseChange{Resource: m})
				}
				c.bg.ended(nil)
				return
			}
		}
	})
}

// Close stops what c does in the background and waits for it to end: the
// releases it retries of grants whose reply was lost (AcquireWait, Hold),
// which then stay held until their terms end, and its listening
// connection, which otherwise lingers a second after the last waiter left.
// It does not close the store. Call it once nothing uses c any more.
func (c *Coordinator) Close() {
	c.bg.close()
	c.waits.close()
}
