package distributed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
)

// Two coordinators, each with its own pool on one database, grant three
// resources to four holders at once: every fence is issued once, and on
// each resource the fences of successive grants strictly increase, though
// the grants conflict on the one counter row (and, at SERIALIZABLE, abort
// one another with 40001, which InTx runs again).
func TestFencesIncreaseUnderTwoCoordinators(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.PostgresSchemaURL(t)
	opts := &lease.CoordinatorOptions{TTL: 5 * time.Second, WaiterTTL: 300 * time.Millisecond}
	rec := &recorder{}
	d0 := open(t, url, nil, rec)
	coords := []*lease.Coordinator{
		lease.NewCoordinator(d0, opts),
		lease.NewCoordinator(open(t, url, nil, rec), opts),
	}
	resources := []string{"r0", "r1", "r2"}
	const workers, rounds = 4, 12

	var (
		mu       sync.Mutex
		byRes    = map[string][]int64{} // appended while the lease is held: grant order
		issued   = map[int64]string{}
		failures []error
		wg       sync.WaitGroup
	)
	for w := range workers {
		coord := coords[w%2]
		client, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("h%d", w)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range rounds {
				res := resources[(w+i)%len(resources)]
				l, err := coord.AcquireWait(ctx, client, res)
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					continue
				}
				f := l.Token().Fence
				mu.Lock()
				byRes[res] = append(byRes[res], f)
				if other, dup := issued[f]; dup {
					t.Errorf("fence %d issued twice: %s and %s", f, other, res)
				}
				issued[f] = res
				mu.Unlock()
				tok, err := client.Release(l)
				if err == nil {
					_, err = coord.Release(ctx, tok)
				}
				if err != nil {
					t.Errorf("release %s: %v", res, err)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		// A grant that lost 11 conflicts in a row is reported retryable,
		// never as anything else.
		if !sqlstore.IsRetryable(err) {
			t.Errorf("acquire: %v", err)
		}
	}
	if n := len(issued); n < workers*rounds*3/4 {
		t.Fatalf("%d of %d grants (failures: %v)", n, workers*rounds, failures)
	}
	ex := d0.Executor()
	for _, res := range resources {
		fs := byRes[res]
		for i := 1; i < len(fs); i++ {
			if fs[i] <= fs[i-1] {
				t.Errorf("%s: fence %d granted after %d", res, fs[i], fs[i-1])
			}
		}
		if len(fs) == 0 {
			continue
		}
		if fl, err := ex.FloorGet(ctx, res); err != nil || fl.Floor != fs[len(fs)-1] {
			t.Errorf("%s: floor %+v, %v; want the last fence %d", res, fl, err, fs[len(fs)-1])
		}
	}
	t.Logf("%d grants, %d serialization failures retried, %d acquisitions failed retryable", len(issued), rec.serializationFailures(), len(failures))
}

// A serialization failure (40001) of a statement in InTx rolls the
// transaction back and runs the function again, which then commits; with
// retries turned off it is returned, marked retryable.
func TestSerializationFailureRetried(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		retries  int
		attempts int
	}{{"retried", 0, 2}, {"not retried", -1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			d := open(t, "", &distributed.Options{SerializationRetries: c.retries}, nil)
			started, other := make(chan struct{}), make(chan error, 1)
			go func() {
				<-started
				other <- d.InTx(ctx, func(ex sqlstore.Executor) error { _, err := ex.FenceNext(ctx); return err })
			}()
			attempts := 0
			var fence int64
			err := d.InTx(ctx, func(ex sqlstore.Executor) error {
				attempts++
				// The first statement takes the transaction's snapshot.
				if _, err := ex.FloorList(ctx); err != nil {
					return err
				}
				if attempts == 1 {
					// Another transaction takes a fence and commits after
					// this snapshot: this one's update of the counter row
					// is a serialization failure.
					close(started)
					if err := <-other; err != nil {
						return err
					}
				}
				var err error
				fence, err = ex.FenceNext(ctx)
				return err
			})
			if c.attempts == 1 {
				if !sqlstore.IsRetryable(err) || attempts != 1 {
					t.Fatalf("InTx = %v after %d attempts; want a retryable error after 1", err, attempts)
				}
				return
			}
			if err != nil || attempts != 2 || fence != 2 {
				t.Fatalf("InTx = %v after %d attempts, fence %d; want nil after 2, fence 2", err, attempts, fence)
			}
		})
	}
}

// Without a listener (SupportsListener is false) a waiter in one
// coordinator gets the lease that a holder releases through another
// coordinator, whose release wakes nobody there: by its own polling.
func TestHandOverByPolling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.PostgresSchemaURL(t)
	d1, d2 := open(t, url, nil, nil), open(t, url, nil, nil)
	if d1.SupportsListener() {
		t.Fatal("the profile says it listens")
	}
	if err := d1.ListenLeases(ctx, func() { t.Error("ListenLeases called ready") }, nil); !errors.Is(err, sqlstore.ErrNotSupported) {
		t.Fatalf("ListenLeases = %v, want ErrNotSupported", err)
	}
	opts := &lease.CoordinatorOptions{TTL: 20 * time.Second, WaiterTTL: 300 * time.Millisecond}
	c1, c2 := lease.NewCoordinator(d1, opts), lease.NewCoordinator(d2, opts)
	alice, _ := lease.NewClient(&lease.ClientOptions{Holder: "alice"})
	bob, _ := lease.NewClient(&lease.ClientOptions{Holder: "bob"})

	held, err := c1.AcquireWait(ctx, alice, "r")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	waitErr := make(chan error, 1)
	go func() {
		l, err := c2.AcquireWait(ctx, bob, "r")
		waitErr <- err
		got <- l
	}()
	// Release once bob is queued, so that it is the poll that hands over.
	for {
		ws, err := c1.Waiters(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 1 && ws[0].Holder == "bob" {
			break
		}
		select {
		case err := <-waitErr:
			t.Fatalf("bob's wait ended before alice released: %v", err)
		case <-time.After(10 * time.Millisecond): // polling the queue, not synchronising a result
		}
	}
	tok, _ := alice.Release(held)
	if ok, err := c1.Release(ctx, tok); err != nil || !ok {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if err := <-waitErr; err != nil {
		t.Fatalf("bob's wait: %v", err)
	}
	l := <-got
	if l.Token().Holder != "bob" || l.Token().Fence <= held.Token().Fence {
		t.Fatalf("bob got %+v after alice's fence %d", l.Token(), held.Token().Fence)
	}
	// The grant raised the floor: alice's stale token is refused.
	g := gate.New(d1, nil)
	tx, err := d1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Rollback(ctx, tx)
	if err := g.Commit(ctx, tx, held.Token()); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("alice's stale write: %v, want ErrStaleFence", err)
	}
}

// The clock-offset margin comes off every TTL the coordinator reports, on
// grants and renewals; options out of range are refused.
func TestClockOffsetMargin(t *testing.T) {
	ctx := context.Background()
	const offset = 400 * time.Millisecond
	d := open(t, "", &distributed.Options{MaxClockOffset: offset}, nil)
	if got := d.ClockPrecision(); got != offset+time.Microsecond {
		t.Fatalf("ClockPrecision = %v, want %v", got, offset+time.Microsecond)
	}
	c := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: 10 * time.Second})
	client, _ := lease.NewClient(&lease.ClientOptions{Holder: "h"})
	req, _ := client.BeginAcquire("r")
	out, err := c.Acquire(ctx, req)
	if err != nil || !out.OK {
		t.Fatalf("acquire = %+v, %v", out, err)
	}
	if ttl := out.Grant.TTL; ttl > 10*time.Second-offset || ttl < 9*time.Second-offset {
		t.Fatalf("granted TTL %v for a 10 s term with a %v offset", ttl, offset)
	}
	l, err := client.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	rreq, err := client.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	rn, err := c.Renew(ctx, rreq)
	if err != nil || !rn.OK || rn.Grant.TTL > 10*time.Second-offset {
		t.Fatalf("renew = %+v, %v; want a TTL at most %v", rn, err, 10*time.Second-offset)
	}

	pool := openPool(t, dbtest.PostgresSchemaURL(t), nil)
	for _, bad := range []time.Duration{-time.Nanosecond, 10 * time.Second} {
		if _, err := distributed.New(pool, &distributed.Options{MaxClockOffset: bad}); !errors.Is(err, distributed.ErrBadOptions) {
			t.Errorf("MaxClockOffset %v: %v, want ErrBadOptions", bad, err)
		}
	}
	if _, err := distributed.New(nil, nil); !errors.Is(err, distributed.ErrBadOptions) {
		t.Errorf("nil pool: %v, want ErrBadOptions", err)
	}
}

// On a pool of one connection, an acquisition and a batch renewal through
// OnConn run on the connection OnConn holds: they used to wait for a
// second one, which never came.
func TestOnConnNeedsNoSecondConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := open(t, dbtest.PostgresSchemaURL(t)+"&pool_max_conns=1", nil, nil)
	if n := d.MaxConns(); n != 1 {
		t.Fatalf("MaxConns = %d", n)
	}
	err := d.OnConn(ctx, func(ex sqlstore.Executor) error {
		res, err := ex.LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
			Resource: "r", Holder: "h", RequestID: "q", TTL: time.Minute, LockTimeout: time.Second,
		})
		if err != nil || res.Status != sqlstore.AcquireGranted {
			t.Fatalf("LeaseAcquire = %+v, %v", res, err)
		}
		rows, err := ex.LeaseRenewBatch(ctx, &sqlstore.LeaseRenewBatchParams{Renewals: []sqlstore.LeaseRenewParams{
			{Resource: "r", Holder: "h", Fence: res.Lease.Fence, TTL: time.Hour},
		}})
		if err != nil || len(rows) != 1 || !rows[0].Found {
			t.Fatalf("LeaseRenewBatch = %+v, %v", rows, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gate.Gate.Do on the profile runs a caller's transaction again when it
// fails with a serialization failure (here, fn's update of a row that
// another transaction changed after this one's snapshot): the second run
// commits, under the same fence.
func TestGateDoRetriesASerializationFailure(t *testing.T) {
	ctx := context.Background()
	d := open(t, "", nil, nil)
	pool := d.Pool()
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO items VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	g := gate.New(d, nil)
	tok := fence.Token{Resource: "r", Holder: "h", Fence: 1}
	attempts := 0
	err := g.Do(ctx, tok, func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		if attempts == 1 {
			// The gate's floor statement took the snapshot; another
			// transaction now changes the row and commits.
			if _, err := pool.Exec(ctx, `UPDATE items SET n = n + 10 WHERE id = 1`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE items SET n = n + 1 WHERE id = 1`)
		return err
	})
	if err != nil || attempts != 2 {
		t.Fatalf("Do = %v after %d attempts; want nil after 2", err, attempts)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT n FROM items WHERE id = 1`).Scan(&n); err != nil || n != 11 {
		t.Fatalf("n = %d, %v; want 11 (the other transaction's 10, this one's 1 once)", n, err)
	}
}
