package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

// parkingStore holds back the first acquisition of holder: the request is
// sent (Sending is called), the acquisition's context is cancelled, and the
// statement itself runs only when the test closes unpark, as a statement
// queued at the server behind the client's cancellation would.
type parkingStore struct {
	sqlstore.Store
	holder string
	cancel context.CancelFunc
	parked atomic.Bool
	unpark chan struct{}
	late   chan lateResult
}

type lateResult struct {
	res sqlstore.LeaseAcquireResult
	err error
}

func (s *parkingStore) Executor() sqlstore.Executor { return parkingExecutor{s.Store.Executor(), s} }

func (s *parkingStore) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *parkingStore) MaxConns() int          { return 0 }
func (s *parkingStore) SupportsListener() bool { return false }

type parkingExecutor struct {
	sqlstore.Executor
	s *parkingStore
}

func (e parkingExecutor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	if p.Holder != e.s.holder || !e.s.parked.CompareAndSwap(false, true) {
		return e.Executor.LeaseAcquire(ctx, p)
	}
	if p.Sending != nil {
		p.Sending()
	}
	q := *p
	q.Sending = nil
	go func() {
		<-e.s.unpark
		res, err := e.Executor.LeaseAcquire(context.Background(), &q)
		e.s.late <- lateResult{res, err}
	}()
	e.s.cancel()
	<-ctx.Done()
	return sqlstore.LeaseAcquireResult{}, ctx.Err()
}

// An acquisition of AcquireWait whose context ends after it was sent, and
// which the database runs only after the waiter left and the holder
// released, grants nothing: the waiter's cleanup spent the request
// (Executor.LeaseAbandon), so the late sending is refused as a late retry
// and the resource stays free. (A second sending, as the cleanup once made,
// was answered "held" and spent nothing: the late one was then granted to a
// waiter that had given up, and the resource stayed held for a term.)
func TestAcquireWaitSpendsAnUnknownAcquisition(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ps := &parkingStore{Store: store, holder: "b", cancel: cancel, unpark: make(chan struct{}), late: make(chan lateResult, 1)}
		coord := NewCoordinator(ps, nil)
		a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})
		r := resourceName(t)
		held := acquire(t, a, coord, r)

		_, err := coord.AcquireWait(bctx, b, r)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("AcquireWait = %v, want Canceled", err)
		}
		if leftGrant(err) != nil {
			t.Fatalf("AcquireWait = %v: the cleanup failed", err)
		}
		releaseOK(t, a, coord, held)
		close(ps.unpark)
		late := <-ps.late
		if late.err != nil || late.res.Status != sqlstore.AcquireRequestExpired {
			t.Errorf("the late sending = %+v, %v; want request expired", late.res, late.err)
		}
		if st, err := coord.Status(ctx, r); err != nil || st.Held {
			t.Errorf("after the late sending: %+v, %v; want free", st, err)
		}
	})
}
