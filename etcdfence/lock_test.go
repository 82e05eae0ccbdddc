package etcdfence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencegate/fencegate/etcdfence"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// newGate is a gate on a migrated SQLite file of the test's own.
func newGate(t *testing.T) (*gate.Gate[*sql.Tx], *sqlite.Driver) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return gate.New(store, nil), store
}

func newSession(t *testing.T, c *clientv3.Client, ttl int) *concurrency.Session {
	t.Helper()
	s, err := concurrency.NewSession(c, concurrency.WithTTL(ttl))
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newLocker(t *testing.T, s *concurrency.Session, g etcdfence.Admitter, opts *etcdfence.Options) *etcdfence.Locker {
	t.Helper()
	l, err := etcdfence.New(s, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestFence(t *testing.T) {
	for _, c := range []struct{ epoch, rev, want int64 }{
		{0, 1, 1},
		{0, etcdfence.MaxRevision, etcdfence.MaxRevision},
		{1, 1, 1<<40 | 1},
		{etcdfence.MaxEpoch, etcdfence.MaxRevision, 1<<63 - 1},
	} {
		if got, err := etcdfence.Fence(c.epoch, c.rev); err != nil || got != c.want {
			t.Errorf("Fence(%d, %d) = %d, %v; want %d", c.epoch, c.rev, got, err, c.want)
		}
	}
	for _, c := range []struct{ epoch, rev int64 }{
		{-1, 1}, {etcdfence.MaxEpoch + 1, 1}, {0, 0}, {0, -1}, {0, etcdfence.MaxRevision + 1}, {3, 1 << 62},
	} {
		if got, err := etcdfence.Fence(c.epoch, c.rev); !errors.Is(err, etcdfence.ErrFenceOverflow) {
			t.Errorf("Fence(%d, %d) = %d, %v; want ErrFenceOverflow", c.epoch, c.rev, got, err)
		}
	}
	// Every fence of a later epoch is above every fence of an earlier one.
	hi, _ := etcdfence.Fence(4, etcdfence.MaxRevision)
	lo, _ := etcdfence.Fence(5, 1)
	if lo <= hi {
		t.Fatalf("epoch 5's lowest fence %d is not above epoch 4's highest %d", lo, hi)
	}
}

func TestNewChecks(t *testing.T) {
	c := startEtcd(t)
	g, _ := newGate(t)
	s := newSession(t, c, 5)
	if _, err := etcdfence.New(s, g, &etcdfence.Options{Epoch: etcdfence.MaxEpoch + 1}); !errors.Is(err, etcdfence.ErrFenceOverflow) {
		t.Fatalf("epoch above MaxEpoch: %v", err)
	}
	if _, err := etcdfence.New(nil, g, nil); err == nil {
		t.Fatal("nil session accepted")
	}
	l := newLocker(t, s, g, nil)
	if _, err := l.Lock(t.Context(), "", "a"); !errors.Is(err, fence.ErrInvalidInput) {
		t.Fatalf("empty resource: %v", err)
	}
	if resp, err := c.Get(t.Context(), "/fencegate/lock/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a refused Lock left keys: %v, %v", resp, err)
	}
}

// The fence is the CreateRevision of the lock's key, admitted before Lock
// returns; each later grant has a higher one, and a stale holder's write is
// refused whatever it read.
func TestLockAdmitsTheKeysCreateRevision(t *testing.T) {
	ctx := t.Context()
	c := startEtcd(t)
	g, _ := newGate(t)
	la := newLocker(t, newSession(t, c, 5), g, nil)
	lb := newLocker(t, newSession(t, c, 5), g, nil)

	a, err := la.Lock(ctx, "orders/42", "a")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, a.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the lock's key: %v, %v", resp, err)
	}
	if a.Token().Fence != resp.Kvs[0].CreateRevision || a.Token().Resource != "orders/42" || a.Token().Holder != "a" {
		t.Fatalf("token %+v, key created at revision %d", a.Token(), resp.Kvs[0].CreateRevision)
	}
	if f, err := g.Floor(ctx, "orders/42"); err != nil || f.Floor != a.Token().Fence {
		t.Fatalf("floor after Lock = %+v, %v; want the lock's fence %d admitted", f, err, a.Token().Fence)
	}

	// B waits while A holds the lock, and its ctx ends the wait.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := lb.Lock(wctx, "orders/42", "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while held: %v, want the ctx's deadline", err)
	}

	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, concurrency.ErrLockReleased) {
		t.Fatalf("second Unlock: %v", err)
	}
	b, err := lb.Lock(ctx, "orders/42", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	if b.Token().Fence <= a.Token().Fence {
		t.Fatalf("B's fence %d is not above A's %d", b.Token().Fence, a.Token().Fence)
	}
	if err := g.Do(ctx, a.Token(), func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("A's write after B's grant: %v, want a refusal", err)
	}
}

// A session that lapses closes the lock's Done; the successor is granted,
// and the lapsed holder's write is refused.
func TestSessionLossSurfacesAndFences(t *testing.T) {
	ctx := t.Context()
	c := startEtcd(t)
	g, _ := newGate(t)
	sa := newSession(t, c, 2) // its keep-alive, every ttl/3, finds the lease gone
	a, err := newLocker(t, sa, g, nil).Lock(ctx, "slot", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, sa.Lease()); err != nil { // the lease ends as if it expired
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done not closed after the session's lease ended")
	}
	b, err := newLocker(t, newSession(t, c, 60), g, nil).Lock(ctx, "slot", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	err = g.Do(ctx, a.Token(), func(context.Context, *sql.Tx) error { return nil })
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.Floor != b.Token().Fence || stale.FloorHolder != "b" {
		t.Fatalf("A's write after losing the lock: %v", err)
	}

	// Locking on a session that is over fails, and leaves nothing behind.
	if _, err := newLocker(t, sa, g, nil).Lock(ctx, "other", "a"); err == nil {
		t.Fatal("Lock on a lapsed session succeeded")
	}
}

// A rebuilt etcd cluster starts its revisions again; under the next epoch
// its fences are above the old cluster's, and under the old epoch they are
// refused, the lock released.
func TestEpochForARebuiltCluster(t *testing.T) {
	ctx := t.Context()
	g, _ := newGate(t)
	old := startEtcd(t)
	for range 50 { // the old cluster's revisions are well ahead
		if _, err := old.Put(ctx, "filler", "x"); err != nil {
			t.Fatal(err)
		}
	}
	a, err := newLocker(t, newSession(t, old, 5), g, &etcdfence.Options{Epoch: 0}).Lock(ctx, "slot", "a")
	if err != nil {
		t.Fatal(err)
	}

	rebuilt := startEtcd(t)
	stale := newLocker(t, newSession(t, rebuilt, 5), g, &etcdfence.Options{Epoch: 0})
	_, err = stale.Lock(ctx, "slot", "b")
	if !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("old epoch on the rebuilt cluster: %v, want a refusal", err)
	}
	if resp, err := rebuilt.Get(ctx, "/fencegate/lock/slot", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the refused lock was not released: %v, %v", resp, err)
	}

	b, err := newLocker(t, newSession(t, rebuilt, 5), g, &etcdfence.Options{Epoch: 1}).Lock(ctx, "slot", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	if b.Token().Fence <= a.Token().Fence {
		t.Fatalf("epoch 1's fence %d is not above epoch 0's %d", b.Token().Fence, a.Token().Fence)
	}
	if err := g.Do(ctx, a.Token(), func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("the old cluster's holder after the new epoch's grant: %v", err)
	}
}

// A ClusterID other than the granting cluster's refuses the lock before
// anything is admitted.
func TestClusterIDChecked(t *testing.T) {
	ctx := t.Context()
	c := startEtcd(t)
	g, _ := newGate(t)
	resp, err := c.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, c, 5)
	_, err = newLocker(t, s, g, &etcdfence.Options{ClusterID: resp.Header.ClusterId + 1}).Lock(ctx, "slot", "a")
	if !errors.Is(err, etcdfence.ErrWrongCluster) {
		t.Fatalf("wrong cluster: %v", err)
	}
	if _, err := g.Floor(ctx, "slot"); err == nil {
		t.Fatal("a lock from the wrong cluster raised the floor")
	}
	l, err := newLocker(t, s, g, &etcdfence.Options{ClusterID: resp.Header.ClusterId}).Lock(ctx, "slot", "a")
	if err != nil {
		t.Fatalf("right cluster: %v", err)
	}
	l.Unlock(ctx)
}
