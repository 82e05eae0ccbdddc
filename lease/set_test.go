package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// acquireSet runs a whole set acquisition and returns the lease, or nil and
// the outcome when it was denied.
func acquireSet(t *testing.T, c *Client, coord *Coordinator, resources ...string) (*Lease, AcquireOutcome) {
	t.Helper()
	req, err := c.BeginAcquireSet(resources)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%v by %s): %v", resources, c.Holder(), err)
	}
	if !out.OK {
		return nil, out
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l, out
}

func path(t *testing.T, rel string) string {
	t.Helper()
	r, err := fence.PathResource(rel)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A set is granted whole under one fence, every member's floor raised; a
// member held by another blocks the whole set and writes nothing; renew
// and release work on the whole set.
func TestAcquireSetAllOrNone(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})

		lb := acquire(t, b, coord, "y")
		if l, out := acquireSet(t, a, coord, "z", "x", "y"); l != nil || out.HeldBy != "b" || out.HeldResource != "y" || out.Fence != lb.Token().Fence {
			t.Fatalf("set over a held member: lease %v, outcome %+v", l, out)
		}
		for _, r := range []string{"x", "z"} {
			if st, err := coord.Status(ctx, r); err != nil || st.Fence != 0 {
				t.Fatalf("a denied set wrote %s: %+v, %v", r, st, err)
			}
		}
		if ok, err := coord.Release(ctx, lb.Token()); err != nil || !ok {
			t.Fatal(ok, err)
		}

		la, _ := acquireSet(t, a, coord, "z", "x", "y")
		if la == nil {
			t.Fatal("set denied after the release")
		}
		tok := la.Token()
		if !tok.IsSet() || fmt.Sprint(tok.Members()) != "[x y z]" || tok.Fence <= lb.Token().Fence {
			t.Fatalf("token %v members %v", tok, tok.Members())
		}
		for _, r := range tok.Members() {
			st, err := coord.Status(ctx, r)
			if err != nil || !st.Held || st.Holder != "a" || st.Fence != tok.Fence {
				t.Fatalf("%s: %+v, %v", r, st, err)
			}
			if f := floorOf(t, store, r); f.Floor != tok.Fence {
				t.Fatalf("%s: floor %d, want the set's fence %d", r, f.Floor, tok.Fence)
			}
		}
		// A single claim of a member is held by the set.
		if req, _ := b.BeginAcquire("x"); true {
			out, err := coord.Acquire(ctx, req)
			if err != nil || out.OK || out.HeldBy != "a" || out.Fence != tok.Fence {
				t.Fatalf("single over a set's member: %+v, %v", out, err)
			}
		}
		// Parse keeps the set.
		if back, err := fence.Parse(tok.String()); err != nil || back != tok {
			t.Fatalf("Parse(%s) = %v, %v", tok, back, err)
		}

		rreq, err := a.BeginRenewal(la)
		if err != nil {
			t.Fatal(err)
		}
		rout, err := coord.Renew(ctx, rreq)
		if err != nil || !rout.OK {
			t.Fatalf("renew set: %+v, %v", rout, err)
		}
		if _, err := a.CompleteRenewal(rreq, rout.Grant); err != nil {
			t.Fatal(err)
		}
		outs, err := coord.RenewBatch(ctx, []*RenewRequest{mustRenewal(t, a, la)})
		if err != nil || !outs[0].OK {
			t.Fatalf("batch renew of a set: %+v, %v", outs, err)
		}

		if ok, err := coord.Release(ctx, tok); err != nil || !ok {
			t.Fatalf("release set: %v, %v", ok, err)
		}
		for _, r := range tok.Members() {
			if st, _ := coord.Status(ctx, r); st.Held {
				t.Fatalf("%s still held after the set's release", r)
			}
		}
		if ok, err := coord.Release(ctx, tok); err != nil || ok {
			t.Fatalf("second release: %v, %v", ok, err)
		}
		rout, err = coord.Renew(ctx, mustRenewal(t, a, la))
		if err != nil || rout.OK || !rout.Expired {
			t.Fatalf("renew of a released set: %+v, %v", rout, err)
		}
	})
}

func mustRenewal(t *testing.T, c *Client, l *Lease) *RenewRequest {
	t.Helper()
	r, err := c.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A retried set request is answered the same grant while it is live, and
// refused once it is over.
func TestAcquireSetRetry(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		a := newClient(t, "a", ClientOptions{})
		req, err := a.BeginAcquireSet([]string{"p", path(t, "d/"), "q"})
		if err != nil {
			t.Fatal(err)
		}
		first, err := coord.Acquire(ctx, req)
		if err != nil || !first.OK {
			t.Fatal(first, err)
		}
		again, err := coord.Acquire(ctx, req)
		if err != nil || !again.OK || again.Grant.Fence != first.Grant.Fence {
			t.Fatalf("retry: %+v, %v (first %+v)", again, err, first)
		}
		l, err := a.CompleteAcquire(req, again.Grant)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := coord.Release(ctx, l.Token()); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
			t.Fatalf("retry after release: %v", err)
		}
	})
}

// The grant side of the path rule: a claim conflicts with one of the same
// path, of a directory above it, or (for a directory) of anything below
// it; siblings never conflict.
func TestPathClaimsConflict(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})

		la, _ := acquireSet(t, a, coord, path(t, "src/a.go"))
		if la == nil {
			t.Fatal("file claim denied")
		}
		if lb, _ := acquireSet(t, b, coord, path(t, "src/b.go")); lb == nil {
			t.Fatal("a sibling was refused")
		}
		for _, p := range []string{"src/a.go", "src/", "src/x/../"} {
			r, err := fence.PathResource(p)
			if err != nil {
				continue // "src/x/../" is refused as input, below
			}
			if l, out := acquireSet(t, b, coord, r); l != nil || out.HeldBy == "" {
				t.Fatalf("%s granted over a's claim of src/a.go: %+v", p, out)
			}
		}
		if ok, err := coord.Release(ctx, la.Token()); err != nil || !ok {
			t.Fatal(ok, err)
		}
		// b's src/b.go is still live: the directory stays refused, and says why.
		if l, out := acquireSet(t, a, coord, path(t, "src/")); l != nil || out.HeldResource != path(t, "src/b.go") || out.HeldBy != "b" {
			t.Fatalf("directory over a live file below it: %+v", out)
		}
		// A directory blocks what is below it, at any depth, not its siblings.
		ld, _ := acquireSet(t, a, coord, path(t, "lib/"))
		if ld == nil {
			t.Fatal("directory claim denied")
		}
		for _, p := range []string{"lib/x/y.go", "lib/x/", "lib/"} {
			if l, out := acquireSet(t, b, coord, path(t, p)); l != nil || out.HeldResource != path(t, "lib/") {
				t.Fatalf("%s under a's lib/: %+v", p, out)
			}
		}
		for _, p := range []string{"lib.go", "lib2/", "li/"} {
			if l, _ := acquireSet(t, b, coord, path(t, p)); l == nil {
				t.Fatalf("%s refused beside lib/", p)
			}
		}
	})
}

// A set that races a single claim of one of its members is granted whole
// or not at all, on every store, with -race.
func TestAcquireSetRacesSingle(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 5 * time.Second})
		for round := range 8 {
			members := []string{fmt.Sprintf("r%d/a", round), path(t, fmt.Sprintf("r%d/b", round)), fmt.Sprintf("r%d/c", round)}
			single := members[1+round%2]
			setc, one := newClient(t, "set", ClientOptions{}), newClient(t, "one", ClientOptions{})
			var wg sync.WaitGroup
			var setL, oneL *Lease
			wg.Go(func() { setL, _ = tryClaim(t, setc, coord, members...) })
			wg.Go(func() { oneL, _ = tryClaim(t, one, coord, single) })
			wg.Wait()
			if (setL == nil) == (oneL == nil) {
				t.Fatalf("round %d: set %v, single %v: exactly one must win", round, setL != nil, oneL != nil)
			}
			for _, m := range members {
				st, err := coord.Status(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case setL != nil && (st.Holder != "set" || st.Fence != setL.Token().Fence):
					t.Fatalf("round %d: set won but %s is %+v", round, m, st)
				case oneL != nil && m != single && st.Fence != 0:
					t.Fatalf("round %d: the set lost but wrote %s: %+v", round, m, st)
				}
			}
		}
	})
}

// tryClaim acquires a set (or one resource) and tolerates ErrBusy as a
// loss; other errors fail the test.
func tryClaim(t *testing.T, c *Client, coord *Coordinator, resources ...string) (*Lease, error) {
	req, err := c.BeginAcquireSet(resources)
	if err != nil {
		t.Error(err)
		return nil, err
	}
	out, err := coord.Acquire(context.Background(), req)
	if errors.Is(err, ErrBusy) {
		return nil, err
	}
	if err != nil {
		t.Error(err)
		return nil, err
	}
	if !out.OK {
		return nil, nil
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Error(err)
	}
	return l, err
}

// Sets that overlap in opposite orders of asking never deadlock: every
// claim ends (granted, held, or busy) well within the lock timeout, and
// no member is ever held by two.
func TestOverlappingSetsNoDeadlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Second, LockTimeout: 5 * time.Second})
		res := []string{"k1", "k2", "k3", path(t, "d/x"), path(t, "d/")}
		sets := [][]string{{res[0], res[1], res[2]}, {res[2], res[1], res[3]}, {res[3], res[0]}, {res[4], res[1]}, {res[2], res[0]}}
		var wg sync.WaitGroup
		var deadlocks atomic.Int64
		for w, set := range sets {
			c := newClient(t, fmt.Sprintf("w%d", w), ClientOptions{})
			wg.Go(func() {
				for range 10 {
					l, err := tryClaim(t, c, coord, set...)
					if serializationFailure(err) {
						// Two ways a claim is rolled back at once, not
						// waited on (ErrBusy, nothing written): InnoDB's gap
						// locks on lease rows not yet created can still
						// deadlock whatever the order (once the rows exist,
						// the fixed order holds); and the distributed
						// profile's SERIALIZABLE transactions fail to
						// serialize when they overlap, past its retries.
						deadlocks.Add(1)
						continue
					}
					if errors.Is(err, ErrBusy) {
						t.Errorf("%s: busy: the lock timeout ran out, which only a deadlock-like wait explains here: %v", c.Holder(), err)
						return
					}
					if l != nil {
						if _, err := coord.Release(ctx, l.Token()); err != nil {
							t.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
		if n := deadlocks.Load(); n > 0 {
			t.Logf("%d claims rolled back as serialization failures (MySQL's deadlock detection, the distributed profile's SERIALIZABLE)", n)
		}
	})
}

// serializationFailure reports whether err is the database's SQLSTATE
// 40001: a transaction it rolled back rather than let wait (MySQL's error
// 1213, a deadlock victim; Postgres's serialization failure).
func serializationFailure(err error) bool {
	if my := (*mysqldriver.MySQLError)(nil); errors.As(err, &my) {
		return my.Number == 1213
	}
	pe := (*pgconn.PgError)(nil)
	return errors.As(err, &pe) && pe.Code == "40001"
}

// Hold, Keep and AcquireWait work on a set as on one resource.
func TestHoldSetAndWait(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// A term with a wide margin: the keeper renews when two thirds
		// remain, so only a stall of over 2.6 s could lose it (a 500 ms term
		// was lost under load, and b granted m/q).
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 4 * time.Second, WaiterTTL: 300 * time.Millisecond})
		a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})
		members := []string{"m1", path(t, "m/")}
		held := make(chan *Lease)
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- HoldSet(ctx, a, coord, members, func(ctx context.Context, l *Lease) error {
				held <- l
				<-release
				if !l.Token().IsSet() {
					return errors.New("Hold's lease is not the set's")
				}
				return nil
			})
		}()
		var la *Lease
		select {
		case la = <-held:
		case err := <-done:
			t.Fatalf("HoldSet without running fn: %v", err)
		}
		// Kept across two renewals while b waits.
		got := make(chan *Lease, 1)
		go func() {
			l, err := coord.AcquireWaitSet(ctx, b, []string{path(t, "m/q"), "m2"})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		if err := renewed(ctx, la, 2); err != nil {
			t.Fatalf("a's lease: %v", err)
		}
		select {
		case l := <-got:
			t.Fatalf("b was granted m/q while a holds m/: %v", l)
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if l := <-got; l == nil || fmt.Sprint(l.Token().Members()) != fmt.Sprint([]string{"m2", path(t, "m/q")}) {
			t.Fatalf("b's wait: %v", l)
		}
	})
}

// The path rule with real grants, both halves: a holder of a file whose
// claim was released is refused on that file once a directory above it is
// granted to another, who has not written anything yet. Without the grant
// raising the directory's floor, or the write checking the floors of the
// directories above the file, the stale write would commit.
func TestPathRuleOverCoordinator(t *testing.T) {
	forEachDriver(t, testPathRuleOverCoordinator[*sql.Tx], testPathRuleOverCoordinator[pgx.Tx])
}

func testPathRuleOverCoordinator[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	coord := NewCoordinator(h.Driver, &CoordinatorOptions{TTL: 5 * time.Second})
	g := gate.New(h.Driver, &gate.Options{VerifyIssued: true})
	a, b := newClient(t, "a", ClientOptions{}), newClient(t, "b", ClientOptions{})
	file := path(t, "src/a.go")
	write := func(tok fence.Token) error {
		tx, err := h.Driver.Begin(ctx)
		if err != nil {
			return err
		}
		defer h.Driver.Rollback(ctx, tx)
		if err := g.CommitFile(ctx, tx, tok, file); err != nil {
			return err
		}
		return h.Driver.Commit(ctx, tx)
	}
	la, _ := acquireSet(t, a, coord, file)
	if err := write(la.Token()); err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Release(ctx, la.Token()); err != nil {
		t.Fatal(err)
	}
	lb, _ := acquireSet(t, b, coord, path(t, "src/"))
	if lb == nil {
		t.Fatal("directory denied after the file's release")
	}
	stale := mustStale(t, write(la.Token()), la.Token())
	if stale.Resource != path(t, "src/") || stale.FloorHolder != "b" || stale.Floor != lb.Token().Fence {
		t.Fatalf("refusal %+v, want one naming b's claim of src/", stale)
	}
	if err := write(lb.Token()); err != nil {
		t.Fatalf("the directory's holder writing below it: %v", err)
	}
}
