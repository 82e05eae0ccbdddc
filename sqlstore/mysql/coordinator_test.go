package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// Sixteen first acquisitions of a new resource at once: one is granted and
// the rest are told who holds it. The driver's READ COMMITTED transactions
// take no gap locks, so none of them deadlocks into ErrBusy.
func TestFirstAcquisitionsRace(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	coord := lease.NewCoordinator(d, nil)
	start := make(chan struct{})
	var wg sync.WaitGroup
	outs := make([]lease.AcquireOutcome, 16)
	errs := make([]error, 16)
	for i := range outs {
		wg.Go(func() {
			<-start
			outs[i], errs[i] = coord.Acquire(ctx, &lease.AcquireRequest{
				Resource: "new", Holder: fmt.Sprintf("h%d", i), RequestID: fmt.Sprintf("r%d", i), TTL: time.Minute,
			})
		})
	}
	close(start)
	wg.Wait()
	granted := 0
	for i, out := range outs {
		switch {
		case errs[i] != nil:
			t.Errorf("acquisition %d: %v", i, errs[i])
		case out.OK:
			granted++
			if out.Grant.Fence != 1 || out.Grant.TTL <= 0 || out.Grant.TTL > time.Minute {
				t.Errorf("grant %+v", out.Grant)
			}
		case out.HeldBy == "" || out.Fence != 1:
			t.Errorf("denial %+v", out)
		}
	}
	if granted != 1 {
		t.Fatalf("%d grants, want 1", granted)
	}
}

// In co-located mode the grant raises the floor, waiting for the old
// holder's write transaction on the floor row at most LockTimeout; then it
// is refused as busy and nothing is granted.
func TestAcquireWaitsForTheOldWriter(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	coord := lease.NewCoordinator(d, &lease.CoordinatorOptions{LockTimeout: time.Second})
	out, err := coord.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "old", RequestID: "q1", TTL: 20 * time.Millisecond})
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	g := gate.New(d, nil)
	tx, _ := inTx(t, d)
	if err := g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "old", Fence: out.Grant.Fence}); err != nil {
		t.Fatal(err)
	}
	// The old lease expires while its writer holds the floor row.
	for {
		st, err := coord.Status(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err = coord.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "new", RequestID: "q2", TTL: time.Minute})
	if !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("Acquire past the old writer = %v, want ErrBusy", err)
	}
	if st, err := coord.Status(ctx, "r"); err != nil || st.Holder != "old" {
		t.Fatalf("status after a busy acquisition = %+v, %v; want the old lease", st, err)
	}
}
