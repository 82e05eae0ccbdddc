package lease

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// Hold keeps the lease past several terms by renewing it, with the same
// fence, and releases it at the end.
func TestHoldRenewsAndReleases(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// A term with a wide margin: each renewal (its batch bounded by a
		// third of it) gets through on a loaded machine, with retries.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 4 * time.Second})
		c := newClient(t, "agent-a", ClientOptions{})
		var fence int64
		err := Hold(ctx, c, coord, "job", func(ctx context.Context, l *Lease) error {
			fence = l.Token().Fence
			first := l.Grant().RequestID
			// Past its first term, on the lease's own context.
			if err := renewed(ctx, l, 3); err != nil {
				return err
			}
			if l.Grant().RequestID == first {
				t.Error("the lease was never renewed")
			}
			if l.Expired() || l.Token().Fence != fence {
				t.Errorf("after three renewals: expired %v, fence %d (was %d)", l.Expired(), l.Token().Fence, fence)
			}
			st, err := coord.Status(ctx, "job")
			if err != nil || !st.Held || st.Holder != "agent-a" || st.Fence != fence {
				t.Errorf("Status during Hold = %+v, %v", st, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Hold: %v", err)
		}
		st, _ := coord.Status(ctx, "job")
		if st.Held || !st.Released || st.Fence != fence {
			t.Errorf("Status after Hold = %+v, want released", st)
		}
	})
}

// When the coordinator stops honouring the lease (here: it was released
// behind the holder's back and granted to someone else), the next renewal
// says so and fn's context is cancelled with ErrLeaseLost.
func TestHoldCancelsWhenTheCoordinatorSaysExpired(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Second}) // long enough that fn releases before any deadline, on a loaded machine too
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})
		err := Hold(ctx, a, coord, "job", func(ctx context.Context, l *Lease) error {
			if _, err := coord.Release(ctx, l.Token()); err != nil {
				return err
			}
			acquire(t, b, coord, "job")
			<-ctx.Done() // the next renewal is refused
			var lost *LostError
			if !errors.As(context.Cause(ctx), &lost) || lost.Fence != l.Token().Fence {
				t.Errorf("cause %v, want a *LostError for fence %d", context.Cause(ctx), l.Token().Fence)
			}
			return ctx.Err()
		})
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Hold = %v, want ErrLeaseLost", err)
		}
		t.Log(err)
		if st, _ := coord.Status(ctx, "job"); st.Holder != "agent-b" || !st.Held {
			t.Errorf("Hold's final release disturbed the successor: %+v", st)
		}
	})
}

// failingRenewals is a store whose renewals fail while fail is set: the
// coordinator is unreachable for renewals.
type failingRenewals struct {
	sqlstore.Store
	fail atomic.Bool
}

func (s *failingRenewals) Executor() sqlstore.Executor {
	return failingRenewExecutor{s.Store.Executor(), &s.fail}
}

// OnConn runs fn on the wrapper's own Executor, MaxConns sets no bound and
// SupportsListener is false: the wrapper hides the store's pinned
// connections and its announcements.
func (s *failingRenewals) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *failingRenewals) MaxConns() int { return 0 }

func (s *failingRenewals) SupportsListener() bool { return false }

// InTx fails the renewals of a transaction too: RenewBatch's, where the
// executor renews no batch in one statement.
func (s *failingRenewals) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return s.Store.InTx(ctx, func(ex sqlstore.Executor) error { return fn(failingRenewExecutor{ex, &s.fail}) })
}

type failingRenewExecutor struct {
	sqlstore.Executor
	fail *atomic.Bool
}

var errUnreachable = errors.New("coordinator unreachable")

func (e failingRenewExecutor) LeaseRenew(ctx context.Context, p *sqlstore.LeaseRenewParams) (sqlstore.LeaseRow, error) {
	if e.fail.Load() {
		return sqlstore.LeaseRow{}, errUnreachable
	}
	return e.Executor.LeaseRenew(ctx, p)
}

func (e failingRenewExecutor) LeaseRenewBatch(ctx context.Context, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	if e.fail.Load() {
		return nil, errUnreachable
	}
	return e.Executor.LeaseRenewBatch(ctx, p)
}

// When renewals keep failing, fn's context is cancelled at the holder's
// deadline, which comes no later than the coordinator's expiry.
func TestHoldCancelsAtTheDeadlineWhenRenewalsFail(t *testing.T) {
	forEachStore(t, func(t *testing.T, inner sqlstore.Store) {
		ctx := context.Background()
		store := &failingRenewals{Store: inner}
		store.fail.Store(true)
		// A term long enough that the lease is not born expired between
		// acquire and Keep, and that the keeper tries (and fails) a renewal
		// before the deadline, on a loaded machine too: with 150 ms either
		// could miss, and Hold's error would then not wrap errUnreachable.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Second})
		c := newClient(t, "agent-a", ClientOptions{ClockSkew: 5 * time.Millisecond})
		err := Hold(ctx, c, coord, "job", func(ctx context.Context, l *Lease) error {
			<-ctx.Done()
			if !l.Expired() {
				t.Errorf("cancelled %v before the deadline", l.Remaining())
			}
			return ctx.Err()
		})
		var lost *LostError
		if !errors.As(err, &lost) || !errors.Is(err, errUnreachable) {
			t.Fatalf("Hold = %v, want a *LostError wrapping the renewal failure", err)
		}
		t.Log(err)
	})
}

func TestHoldRefusesWhenHeld(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{})
		la := acquire(t, a, coord, "job")
		err := Hold(ctx, b, coord, "job", func(context.Context, *Lease) error {
			t.Error("fn ran without the lease")
			return nil
		})
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrHeld) || held.HeldBy != "agent-a" ||
			held.Fence != la.Token().Fence || held.RetryAfter <= 0 || held.AlreadyHeld {
			t.Fatalf("Hold = %v (%+v), want a *HeldError naming agent-a", err, held)
		}
		err = Hold(ctx, a, coord, "job", func(context.Context, *Lease) error { return nil })
		if !errors.As(err, &held) || !held.AlreadyHeld {
			t.Errorf("Hold by the holder itself = %v, want AlreadyHeld", err)
		}
	})
}

// fn's error comes back as it is, and the lease is released either way,
// also when ctx was cancelled.
func TestHoldReturnsFnErrorAndReleases(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		coord := NewCoordinator(store, nil)
		c := newClient(t, "agent-a", ClientOptions{})
		boom := errors.New("boom")
		err := Hold(context.Background(), c, coord, "job", func(context.Context, *Lease) error { return boom })
		if err != boom {
			t.Errorf("Hold = %v, want fn's error as it is", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		err = Hold(ctx, c, coord, "job", func(ctx context.Context, _ *Lease) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrLeaseLost) {
			t.Errorf("Hold after cancel = %v, want context.Canceled", err)
		}
		if st, _ := coord.Status(context.Background(), "job"); st.Held {
			t.Errorf("the lease outlived Hold: %+v", st)
		}
	})
}

// When the database does not answer the release (another session locks the
// lease table; on SQLite another connection holds the write lock), Hold
// returns anyway, within ClientOptions.ReleaseTimeout, saying the lease may
// not have been released. It used to wait with context.WithoutCancel alone.
func TestHoldReleaseIsBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		coord := NewCoordinator(store, nil)
		c := newClient(t, "agent-a", ClientOptions{ReleaseTimeout: 100 * time.Millisecond})
		var unlock func()
		err := Hold(context.Background(), c, coord, "job", func(context.Context, *Lease) error {
			unlock = lockLeases(t, store)
			return nil
		})
		unlock()
		if err == nil || !strings.Contains(err.Error(), "may not have been released") {
			t.Fatalf("Hold = %v; want an error saying the lease may not have been released", err)
		}
		if strings.Contains(err.Error(), ": lease: ") {
			t.Errorf("error %q repeats its prefix", err)
		}
	})
}

// lockLeases makes the lease table unwritable from a connection of its own
// until unlock.
func lockLeases(t *testing.T, store sqlstore.Store) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	if u, ok := store.(interface{ Unwrap() sqlstore.Store }); ok { // sqlstoretest.Stepwise
		return lockLeases(t, u.Unwrap())
	}
	switch d := store.(type) {
	case interface{ DB() *sql.DB }: // pgsql.Driver, sqlite.Driver, mysql.Driver
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if store.Dialect() == mysql.Dialect { // LOCK TABLES ends a transaction
			if _, err := conn.ExecContext(ctx, `LOCK TABLES fencegate_lease WRITE`); err != nil {
				t.Fatal(err)
			}
			return func() { _, _ = conn.ExecContext(ctx, `UNLOCK TABLES`); conn.Close() }
		}
		tx, err := conn.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE takes the write lock
		if err != nil {
			t.Fatal(err)
		}
		if store.Dialect() == pgsql.Dialect {
			if _, err := tx.Exec(`LOCK TABLE fencegate_lease IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
		}
		return func() { _ = tx.Rollback(); conn.Close() }
	case interface{ Pool() *pgxpool.Pool }: // pgxv5.Driver, and its distributed profile
		conn, err := d.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE fencegate_lease IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx); conn.Release() }
	}
	t.Fatalf("unknown store %T", store)
	return nil
}
