package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// The Postgres drivers: only they announce releases (and only when someone
// waits for one: fencegate_lease_notify).
var notifyDrivers = []string{"postgres-sql", "pgx-cache-statement"}

// forNotifyStores is forWaitStores for notifyDrivers, also passing the
// database's URL, for a connection of the test's own.
func forNotifyStores(t *testing.T, fn func(t *testing.T, store sqlstore.Store, url string)) {
	t.Helper()
	for _, name := range notifyDrivers {
		d := dbtest.Find(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := d.DSN(t)
			if d.SQL != nil {
				fn(t, d.SQL(t, url).Driver, url)
			} else {
				fn(t, d.Pgx(t, url).Driver, url)
			}
		})
	}
}

// releaseInFlight releases tok's lease in a transaction of a connection of
// its own, as the store's release does, and leaves it open: the release's
// trigger has run. It returns the session's pid and a commit function.
func releaseInFlight(t *testing.T, url string, tok fence.Token) (pid int, commit func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, `UPDATE fencegate_lease SET released = true, expires_at = LEAST(expires_at, clock_timestamp())
 WHERE resource = $1 AND holder = $2 AND fence = $3 AND NOT released AND expires_at > clock_timestamp()`, tok.Resource, tok.Holder, tok.Fence)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("release in flight: %v, %v", tag, err)
	}
	return pid, func() {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitBlockedBy returns once some session waits for a lock that session
// pid holds. It polls pg_stat_activity for a state, not a duration.
func waitBlockedBy(t *testing.T, url string, pid int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(recvTimeout)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waited for the release in flight within %v", recvTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// watchHeard watches w and returns every resource announced to the
// watcher, once it is registered.
func watchHeard(t *testing.T, store sqlstore.Store, w sqlstore.Watch) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan struct{})
	got := make(chan string, 1000)
	go func() {
		_ = store.WatchLeases(ctx, w, func() { close(ready) }, func(ch sqlstore.LeaseChange) { got <- ch.Resource })
	}()
	recv(t, ready, "watcher registered")
	return got
}

// watch registers a watcher of w on its own session and returns once it is
// registered (WatchLeases called ready).
func watch(t *testing.T, store sqlstore.Store, w sqlstore.Watch) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan struct{})
	go func() { _ = store.WatchLeases(ctx, w, func() { close(ready) }, func(sqlstore.LeaseChange) {}) }()
	recv(t, ready, "watcher registered")
}

// TestReleaseNobodyWaitsForIsNotAnnounced: a release of a resource with no
// waiter and no watcher is not announced; one with a watcher (exact or by
// prefix) or a live waiter is. Announcements arrive in commit order, so the
// watched marker released last shows that the unwatched one was skipped,
// not late.
func TestReleaseNobodyWaitsForIsNotAnnounced(t *testing.T) {
	forWaitStores(t, notifyDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		c := newClient(t, "c", ClientOptions{})
		base := resourceName(t)
		unwatched, exact, prefixed, waited, marker := base+"-none", base+"-exact", base+"-sem#0", base+"-waited", base+"-marker"
		// Three listening sessions (the test pools hold four connections):
		// the marker's watcher hears every announcement.
		heard := watchHeard(t, store, sqlstore.Watch{Resource: marker})
		watch(t, store, sqlstore.Watch{Resource: exact})
		watch(t, store, sqlstore.Watch{Resource: base + "-sem#", Prefix: true})

		releaseOK(t, c, coord, acquire(t, c, coord, unwatched))
		releaseOK(t, c, coord, acquire(t, c, coord, exact))
		releaseOK(t, c, coord, acquire(t, c, coord, prefixed))
		// A live waiter's row makes its resource's release announced.
		l := acquire(t, c, coord, waited)
		if _, err := store.Executor().WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: waited, Holder: "w", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		releaseOK(t, c, coord, l)
		releaseOK(t, c, coord, acquire(t, c, coord, marker))

		var order []string
		for r := ""; r != marker; {
			r = recv(t, heard, "announcement of the marker")
			order = append(order, r)
		}
		want := []string{exact, prefixed, waited, marker}
		if len(order) != len(want) {
			t.Fatalf("announced %q, want %q (the unwatched release %q is not announced)", order, want, unwatched)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("announced %q, want %q", order, want)
			}
		}
	})
}

// TestReleaseRacingAQueueingWaiterWakesIt: the release's trigger runs
// (finding no waiter, so announcing nothing) before the waiter queues, and
// the release commits only after the waiter queued and tried. The waiter's
// acquisition waits for the release's commit on the lease row and takes
// the lease: no announcement and no fallback timer is needed (the test's
// timers never fire).
func TestReleaseRacingAQueueingWaiterWakesIt(t *testing.T) {
	forNotifyStores(t, func(t *testing.T, store sqlstore.Store, url string) {
		ctx := context.Background()
		r := resourceName(t)
		holder := newClient(t, "holder", ClientOptions{})
		pid, commit := releaseInFlight(t, url, acquire(t, holder, NewCoordinator(store, nil), r).Token())

		coord, rec := hookedCoordinator(store)
		w := startWait(t, ctx, coord, newClient(t, "w", ClientOptions{}), r)
		recv(t, rec.queued, "waiter joining the queue")
		waitBlockedBy(t, url, pid) // the waiter's acquisition waits on the lease row
		commit()
		res := recv(t, w, "grant to the waiter")
		if res.err != nil || res.l.Token().Holder != "w" {
			t.Fatalf("waiter after the racing release: %v, %v", res.l, res.err)
		}
	})
}

// TestWatcherRegisteringDuringAReleaseSeesIt: a watcher that registers
// while a release is in flight (its trigger found no watcher) does not
// call ready before the release commits, so what it reads after ready shows
// the release.
func TestWatcherRegisteringDuringAReleaseSeesIt(t *testing.T) {
	forNotifyStores(t, func(t *testing.T, store sqlstore.Store, url string) {
		ctx := context.Background()
		r := resourceName(t)
		coord := NewCoordinator(store, nil)
		holder := newClient(t, "holder", ClientOptions{})
		pid, commit := releaseInFlight(t, url, acquire(t, holder, coord, r).Token())

		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ready := make(chan struct{})
		go func() {
			_ = store.WatchLeases(wctx, sqlstore.Watch{Resource: r}, func() { close(ready) }, func(sqlstore.LeaseChange) {})
		}()
		waitBlockedBy(t, url, pid)
		select {
		case <-ready:
			t.Fatal("the watcher was ready while a release of its resource was in flight")
		default:
		}
		commit()
		recv(t, ready, "watcher ready after the release's commit")
		st, err := coord.Status(ctx, r)
		if err != nil || st.Held {
			t.Fatalf("Status after ready = %+v, %v; want released", st, err)
		}
	})
}

// TestWatcherRowsEndWithTheirSession: a watch's row is there while it
// watches and gone when WatchLeases returns; a row left by a session that
// died (pid 0 is never a backend's) is cleared by the next registration.
func TestWatcherRowsEndWithTheirSession(t *testing.T) {
	forNotifyStores(t, func(t *testing.T, store sqlstore.Store, url string) {
		bg := context.Background()
		conn, err := pgx.Connect(bg, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(bg)
		count := func() (n int) {
			t.Helper()
			if err := conn.QueryRow(bg, `SELECT count(*) FROM fencegate_watcher`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if _, err := conn.Exec(bg, `INSERT INTO fencegate_watcher (pid, resource, prefix) VALUES (0, 'dead', false)`); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		ready, done := make(chan struct{}), make(chan error, 1)
		go func() {
			done <- store.WatchLeases(ctx, sqlstore.Watch{Resource: resourceName(t)}, func() { close(ready) }, func(sqlstore.LeaseChange) {})
		}()
		recv(t, ready, "watcher registered")
		if n := count(); n != 1 {
			t.Fatalf("%d watcher rows while watching, want 1 (the dead session's cleared)", n)
		}
		cancel()
		recv(t, done, "the watch's end")
		if n := count(); n != 0 {
			t.Fatalf("%d watcher rows after the watch ended, want 0", n)
		}
	})
}
