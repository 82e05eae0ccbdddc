package lease

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/internal/dbtest"
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

// cutStore loses the reply to holder's first acquisition once the database
// granted it, and then fails every abandon (Executor.LeaseAbandon) at once,
// as a cut network would, while cut is set.
type cutStore struct {
	sqlstore.Store
	holder string
	lost   atomic.Bool // the reply to an acquisition was lost
	cut    atomic.Bool
}

// errCut is what a cut network answers: the connection broke.
var errCut = sqlstore.WithClass(errors.New("cut"), sqlstore.ErrorClass{ConnLost: true})

func (s *cutStore) Executor() sqlstore.Executor { return cutExecutor{s.Store.Executor(), s} }

func (s *cutStore) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *cutStore) MaxConns() int          { return 0 }
func (s *cutStore) SupportsListener() bool { return false }

type cutExecutor struct {
	sqlstore.Executor
	s *cutStore
}

func (e cutExecutor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	res, err := e.Executor.LeaseAcquire(ctx, p)
	if err != nil || p.Holder != e.s.holder || res.Status != sqlstore.AcquireGranted || !e.s.lost.CompareAndSwap(false, true) {
		return res, err
	}
	e.s.cut.Store(true)
	return sqlstore.LeaseAcquireResult{}, errCut
}

func (e cutExecutor) LeaseAbandon(ctx context.Context, p *sqlstore.LeaseAbandonParams) (sqlstore.LeaseAbandonResult, error) {
	if e.s.cut.Load() {
		return sqlstore.LeaseAbandonResult{}, errCut
	}
	return e.Executor.LeaseAbandon(ctx, p)
}

// manualPauses makes a background's pauses end only when the test says:
// each pause sends the channel that ends it, and the ends of the attempts
// arrive on ended.
func manualPauses(coord *Coordinator) (pauses chan chan time.Time, ended chan error) {
	pauses, ended = make(chan chan time.Time, 1), make(chan error, 1)
	coord.bg.hooks = &backgroundHooks{
		after: func(time.Duration) (<-chan time.Time, func() bool) {
			fire := make(chan time.Time, 1)
			pauses <- fire
			return fire, func() bool { return true }
		},
		ended: func(err error) { ended <- err },
	}
	return pauses, ended
}

// lostGrant has b's AcquireWait of r granted with the reply lost and the
// network cut at once, so that its cleanup fails, and checks what it says.
func lostGrant(t *testing.T, coord *Coordinator, b *Client, r string) {
	t.Helper()
	_, err := coord.AcquireWait(context.Background(), b, r)
	if !sqlstore.IsConnLost(err) || leftGrant(err) == nil || !strings.Contains(err.Error(), "retried in the background") {
		t.Fatalf("AcquireWait = %v; want the reply lost, the release failed and retried", err)
	}
	if st, err := coord.Status(context.Background(), r); err != nil || !st.Held || st.Holder != b.Holder() {
		t.Fatalf("after the lost reply: %+v, %v; want held by b (granted, the reply lost)", st, err)
	}
}

// A grant whose reply was lost, and whose release failed because the
// network stayed cut, is released in the background once the network
// heals: the lease (an hour's term) does not stay held to its end.
func TestAcquireWaitReleasesALostGrantOnceTheNetworkHeals(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		cs := &cutStore{Store: store, holder: "b"}
		coord := NewCoordinator(cs, nil)
		defer coord.Close()
		pauses, ended := manualPauses(coord)
		b := newClient(t, "b", ClientOptions{TTL: time.Hour})
		r := resourceName(t)
		lostGrant(t, coord, b, r)

		recv(t, pauses, "a retry") <- time.Time{} // still cut: fails
		fire := recv(t, pauses, "a second retry")
		cs.cut.Store(false)
		fire <- time.Time{}
		if err := recv(t, ended, "the retried release"); err != nil {
			t.Fatalf("the retried release: %v", err)
		}
		if st, err := coord.Status(context.Background(), r); err != nil || st.Held {
			t.Errorf("after the network healed: %+v, %v; want free", st, err)
		}
	})
}

// The retries are bounded: they end once the term the request asked for
// has passed on its client's clock (a lease it made is over by then), and
// when the Coordinator is closed.
func TestAcquireWaitRetriesALostGrantsReleaseWithinItsTerm(t *testing.T) {
	store := dbtest.SQLite(t)
	for _, end := range []string{"term", "close"} {
		t.Run(end, func(t *testing.T) {
			cs := &cutStore{Store: store, holder: "b"}
			coord := NewCoordinator(cs, nil)
			pauses, ended := manualPauses(coord)
			clk := clock.NewManual(0, 0)
			b := newClient(t, "b", ClientOptions{TTL: time.Hour, Clock: clk})
			lostGrant(t, coord, b, resourceName(t))
			fire := recv(t, pauses, "a retry")
			want := context.Canceled
			if end == "term" {
				clk.Advance(time.Hour)
				fire <- time.Time{}
				want = errTermOver
			} else {
				coord.Close()
			}
			if err := recv(t, ended, "the end of the retries"); !errors.Is(err, want) {
				t.Errorf("the retries ended with %v, want %v", err, want)
			}
			coord.Close() // the background is idle: returns at once
			select {
			case <-pauses:
				t.Error("a retry after the end")
			default:
			}
		})
	}
}
