package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// RenewBatch answers each lease for itself: a superseded lease in the
// batch is Expired, the others are renewed with their fences, and each
// renewed deadline is dated from the request's send instant.
func TestRenewBatchAnswersEachLease(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{})
		var leases []*Lease
		for i := range 5 {
			leases = append(leases, acquire(t, a, coord, fmt.Sprintf("job-%d", i)))
		}
		// job-2 is released behind a's back and taken by b.
		if ok, err := coord.Release(ctx, leases[2].Token()); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		acquire(t, b, coord, "job-2")

		var reqs []*RenewRequest
		for _, l := range leases {
			req, err := a.BeginRenewal(l)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, req)
		}
		outs, err := coord.RenewBatch(ctx, reqs)
		if err != nil {
			t.Fatalf("RenewBatch: %v", err)
		}
		if len(outs) != len(reqs) {
			t.Fatalf("%d outcomes for %d requests", len(outs), len(reqs))
		}
		for i, out := range outs {
			if i == 2 {
				if out.OK || !out.Expired {
					t.Errorf("the superseded lease: %+v, want Expired", out)
				}
				continue
			}
			if !out.OK || out.Grant.Fence != leases[i].Token().Fence || out.Grant.RequestID != reqs[i].RequestID {
				t.Errorf("lease %d: %+v, want renewed with fence %d", i, out, leases[i].Token().Fence)
				continue
			}
			l, err := a.CompleteRenewal(reqs[i], out.Grant)
			if err != nil {
				t.Fatal(err)
			}
			if want := reqs[i].SentAt().Add(out.Grant.TTL); l.Deadline() != want {
				t.Errorf("lease %d: deadline %v, want SentAt + TTL = %v", i, l.Deadline(), want)
			}
		}
		if st, _ := coord.Status(ctx, "job-2"); st.Holder != "agent-b" || !st.Held {
			t.Errorf("the batch disturbed the successor: %+v", st)
		}
		if outs, err := coord.RenewBatch(ctx, nil); err != nil || len(outs) != 0 {
			t.Errorf("an empty batch = %v, %v", outs, err)
		}
		req, _ := a.BeginRenewal(leases[0])
		req.Fence = 0
		if _, err := coord.RenewBatch(ctx, []*RenewRequest{req}); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("a batch with a bad request = %v, want fence.ErrInvalidInput", err)
		}
	})
}

// Two Holds of one Client share its keeper; when one lease is superseded,
// only its Hold is cancelled, and the other keeps its lease for terms.
func TestHoldLosingOneLeaseCancelsOnlyItsHold(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// A wide margin, so that the kept lease's renewals (each batch
		// bounded by a third of the term) get through on a loaded machine.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 4 * time.Second})
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})

		held := make(chan struct{}) // both Holds have their leases
		var wg sync.WaitGroup
		var lostErr, keptErr error
		var ready sync.WaitGroup
		ready.Add(2)
		wg.Go(func() {
			lostErr = Hold(ctx, a, coord, "lost", func(ctx context.Context, l *Lease) error {
				ready.Done()
				<-held
				if _, err := coord.Release(ctx, l.Token()); err != nil {
					return err
				}
				acquire(t, b, coord, "lost")
				<-ctx.Done() // the next batch says so
				return ctx.Err()
			})
		})
		wg.Go(func() {
			keptErr = Hold(ctx, a, coord, "kept", func(ctx context.Context, l *Lease) error {
				ready.Done()
				first := l.Grant().RequestID
				if err := renewed(ctx, l, 3); err != nil {
					return err
				}
				if l.Grant().RequestID == first || l.Expired() {
					t.Errorf("the kept lease: renewed %v, expired %v", l.Grant().RequestID != first, l.Expired())
				}
				return nil
			})
		})
		ready.Wait()
		close(held)
		wg.Wait()
		var lost *LostError
		if !errors.As(lostErr, &lost) || lost.Resource != "lost" {
			t.Errorf("the superseded Hold = %v, want a *LostError for it", lostErr)
		}
		if keptErr != nil {
			t.Errorf("the other Hold = %v, want nil", keptErr)
		}
	})
}

// flakyRenewals fails the next failures renewals (batches, or single
// renewals in a batch's transaction) and counts the failures.
type flakyRenewals struct {
	sqlstore.Store
	failures atomic.Int64 // still to fail
	failed   atomic.Int64
}

func (s *flakyRenewals) fail() bool {
	if s.failures.Add(-1) >= 0 {
		s.failed.Add(1)
		return true
	}
	return false
}

func (s *flakyRenewals) Executor() sqlstore.Executor {
	return flakyExecutor{s.Store.Executor(), s}
}

// OnConn runs fn on the wrapper's own Executor, MaxConns sets no bound and
// SupportsListener is false: the wrapper hides the store's pinned
// connections and its announcements.
func (s *flakyRenewals) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *flakyRenewals) MaxConns() int { return 0 }

func (s *flakyRenewals) SupportsListener() bool { return false }

func (s *flakyRenewals) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return s.Store.InTx(ctx, func(ex sqlstore.Executor) error { return fn(flakyExecutor{ex, s}) })
}

type flakyExecutor struct {
	sqlstore.Executor
	s *flakyRenewals
}

func (e flakyExecutor) LeaseRenew(ctx context.Context, p *sqlstore.LeaseRenewParams) (sqlstore.LeaseRow, error) {
	if e.s.fail() {
		return sqlstore.LeaseRow{}, errUnreachable
	}
	return e.Executor.LeaseRenew(ctx, p)
}

func (e flakyExecutor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	if e.s.fail() {
		return nil, errUnreachable
	}
	return e.Executor.LeaseRenewBatch(ctx, p)
}

// A failed batch is retried (every tenth of the term): two failures in a
// row cost the leases nothing, and none is lost before its deadline.
func TestHoldRetriesAFailedBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, inner sqlstore.Store) {
		ctx := context.Background()
		// 4 s: the two failed batches and their retries fit in a term even
		// when the whole suite loads the machine (CI lost all three leases
		// of two pgx modes at once with 1 s).
		store := &flakyRenewals{Store: inner}
		store.failures.Store(2)
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 4 * time.Second})
		c := newClient(t, "agent-a", ClientOptions{})
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() {
				errs[i] = Hold(ctx, c, coord, fmt.Sprintf("job-%d", i), func(ctx context.Context, l *Lease) error {
					return renewed(ctx, l, 2) // past the failed batches
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Hold %d = %v, want nil: the failed batches were not retried", i, err)
			}
		}
		if n := store.failed.Load(); n != 2 {
			t.Errorf("%d renewals failed, want 2", n)
		}
	})
}

// errorCounter is a pgx tracer that counts the batch renewals sent and
// those that failed.
type errorCounter struct{ sent, failed atomic.Int64 }

type batchKey struct{}

func (c *errorCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "fencegate_renew_leases(") {
		c.sent.Add(1)
		return context.WithValue(ctx, batchKey{}, true)
	}
	return ctx
}

func (c *errorCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(batchKey{}) != nil && d.Err != nil {
		c.failed.Add(1)
	}
}

// When the server cuts the pool's connection, the batch sent on it fails
// and is retried on a new one; no lease is lost. Renewals are one
// statement per batch, not per lease.
func TestHoldSurvivesACutConnection(t *testing.T) {
	ctx := context.Background()
	counter := &errorCounter{}
	// A name of this run's own: another run on the server keeps its
	// connections.
	app := "fencegate-keeper-cut-" + newRequestID()
	store := pgxStore(t, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = counter
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		cfg.MaxConns = 1 // every batch runs on the connection that is cut
	})
	// A wide margin, so that the retry on a new connection gets through
	// before the deadlines on a loaded machine.
	const ttl = 3 * time.Second
	const leases = 40
	coord := NewCoordinator(store, &CoordinatorOptions{TTL: ttl})
	c := newClient(t, "agent-a", ClientOptions{})
	admin := pgxStore(t, func(*pgxpool.Config) {}).Pool()

	var ready, wg sync.WaitGroup
	ready.Add(leases)
	stop := make(chan struct{})
	errs := make([]error, leases)
	for i := range leases {
		wg.Go(func() {
			errs[i] = Hold(ctx, c, coord, fmt.Sprintf("job-%d", i), func(ctx context.Context, l *Lease) error {
				ready.Done()
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-stop:
					return nil
				}
			})
		})
	}
	ready.Wait()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1`, app); err != nil {
		t.Fatal(err)
	}
	// The next batch meets the cut. One timer for the whole wait, far past
	// the next tick: a new one in each round would never fire, and a test
	// that saw no failure would hang instead of failing.
	gaveUp := time.After(10 * ttl)
	for counter.failed.Load() == 0 {
		select {
		case <-time.After(ttl / 20):
		case <-gaveUp:
			t.Fatal("no batch failed on the cut connection")
		}
	}
	// Then two more terms.
	sentAfterCut := counter.sent.Load()
	<-time.After(2 * ttl)
	close(stop)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Hold %d = %v, want nil", i, err)
		}
	}
	batches := counter.sent.Load() - sentAfterCut
	t.Logf("%d batches failed on the cut connection; %d batches renewed %d leases over two terms", counter.failed.Load(), batches, leases)
	if batches == 0 || batches >= 2*leases {
		t.Errorf("%d batch statements for %d leases over two terms: not one per tick", batches, leases)
	}
}
