package lease

import (
	"sync"
	"time"
)

// Settled releases.
//
// A request that made a lease has to be refused if a copy of it arrives
// after the lease ended (ErrRequestExpired), so the store keeps a record of
// it. On Postgres the lease row is that record while the row is the
// request's generation, and the request is written to fencegate_request
// only when a new generation overwrites the row: one row written per
// generation, on the overwrite's path instead of the grant's.
//
// The overwrite can skip that row when no copy of the request can still
// arrive: the request was sent once, by one call of Acquire on this
// Coordinator, that call had its answer (the grant), and the request will
// never be sent again. Copies come from sendings whose outcome the sender
// does not know (a call that failed after it sent, a retry, a second
// caller), so a request sent once and answered has none in flight. Release
// then tells the store so (sqlstore.LeaseReleaseParams.Settled), and marks
// the request spent here, so that no later Acquire of it is sent: it is
// answered ErrRequestExpired before the database is asked.
//
// The Coordinator remembers the leases it granted to such requests until
// their release, at most maxSettling of them (a lease never released here
// stays until its term is over, and is then forgotten): a lease it does not
// remember is released without the word, and its request recorded when the
// row is overwritten, as for any other.

// maxSettling bounds the leases a Coordinator remembers for Release.
const maxSettling = 4096

// settleKey names a generation.
type settleKey struct {
	resource, holder string
	fence            int64
}

type settling struct {
	req     *AcquireRequest
	expires time.Time // this process's clock: the term's end, after which Release cannot settle
}

// settler is a Coordinator's memory of the leases it granted to requests
// sent once.
type settler struct {
	mu sync.Mutex
	m  map[settleKey]settling
}

// granted remembers a lease granted to req on its only sending. Only a
// request a Client of this process began, under the id it was given, can
// be known to have been sent once: one that came over a wire (no Client)
// or whose RequestID was set by hand may have copies this process never
// saw, so its request is recorded as any other.
func (s *settler) granted(k settleKey, req *AcquireRequest, ttl time.Duration) {
	if req.client == nil || req.RequestID != req.id || req.sends.Load() != 1 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[settleKey]settling)
	}
	if len(s.m) >= maxSettling {
		for k, v := range s.m {
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= maxSettling {
			return
		}
	}
	s.m[k] = settling{req: req, expires: now.Add(ttl)}
}

// release reports whether the release of k may settle its request, which
// it then marks spent: no Acquire of it is sent any more.
func (s *settler) release(k settleKey) bool {
	s.mu.Lock()
	v, ok := s.m[k]
	if ok {
		delete(s.m, k)
	}
	s.mu.Unlock()
	return ok && v.req.sends.CompareAndSwap(1, settledSends)
}

// settledSends is AcquireRequest.sends once its lease was released settled.
const settledSends = -1

// countSend counts a sending of r, or reports false when r was settled: it
// must not be sent again.
func (r *AcquireRequest) countSend() bool {
	for {
		n := r.sends.Load()
		if n == settledSends {
			return false
		}
		if r.sends.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
