package distributed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/steps"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
)

// cachedSequence is the fence source the profile avoids: a sequence whose
// nodes each cache a block of values (CockroachDB's per-node cache,
// YugabyteDB's per-connection one), asked by turns, so that values come
// out of order: 1, 11, 2, 12, ... Blocks are taken outside any
// transaction, as nextval's are.
type cachedSequence struct {
	d     *distributed.Driver
	mu    sync.Mutex
	nodes [2]struct{ next, end int64 }
	turn  int
}

const blockSize = 10

func (s *cachedSequence) next(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := &s.nodes[s.turn]
	s.turn = 1 - s.turn
	if n.next == n.end {
		var last int64
		err := s.d.Pool().QueryRow(ctx,
			`UPDATE fencegate_counter SET value = value + $1 WHERE name = 'fence' RETURNING value`, blockSize).Scan(&last)
		if err != nil {
			return 0, err
		}
		n.next, n.end = last-blockSize+1, last+1
	}
	n.next++
	return n.next - 1, nil
}

// shuffled is the profile with its fences from a cachedSequence.
type shuffled struct {
	*distributed.Driver
	seq *cachedSequence
}

func (s shuffled) Executor() sqlstore.Executor {
	return shuffledEx{Executor: s.Driver.Executor(), s: s, inTx: s.InTx}
}

func (s shuffled) OnConn(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s shuffled) InTx(ctx context.Context, fn func(sqlstore.Executor) error) error {
	return s.Driver.InTx(ctx, func(ex sqlstore.Executor) error { return fn(shuffledEx{Executor: ex, s: s}) })
}

// shuffledEx runs the shared steps over its own FenceNext.
type shuffledEx struct {
	sqlstore.Executor
	s    shuffled
	inTx steps.InTx // nil in a transaction
}

func (e shuffledEx) FenceNext(ctx context.Context) (int64, error) { return e.s.seq.next(ctx) }

func (e shuffledEx) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	return steps.Acquire(ctx, e, e.inTx, p)
}

// With fences from a cached sequence, values come out of order, which the
// conformance suite's check of successive fences sees; the coordinator
// still never grants a fence below the floor (it answers ErrFloorAhead and
// writes nothing), so the fault costs liveness, not safety: the reason the
// profile takes fences from a counter row in the granting transaction.
func TestCachedSequenceCostsLivenessNotSafety(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.PostgresSchemaURL(t)
	seq := &cachedSequence{d: open(t, url, nil, nil)}

	var fences []int64
	for range 3 {
		f, err := seq.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, f)
	}
	if fences[2] > fences[1] {
		t.Fatalf("the cached sequence handed out %v, in order: the fault is not there", fences)
	}

	s := shuffled{Driver: open(t, url, nil, nil), seq: seq}
	c := lease.NewCoordinator(s, &lease.CoordinatorOptions{TTL: time.Minute})
	client, _ := lease.NewClient(&lease.ClientOptions{Holder: "h"})
	var granted []int64
	ahead := 0
	for range 20 {
		req, _ := client.BeginAcquire("r")
		out, err := c.Acquire(ctx, req)
		if errors.Is(err, lease.ErrFloorAhead) {
			ahead++
			continue
		}
		if err != nil || !out.OK {
			t.Fatalf("acquire = %+v, %v", out, err)
		}
		granted = append(granted, out.Grant.Fence)
		l, _ := client.CompleteAcquire(req, out.Grant)
		tok, _ := client.Release(l)
		if _, err := c.Release(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(granted); i++ {
		if granted[i] <= granted[i-1] {
			t.Errorf("fence %d granted after %d", granted[i], granted[i-1])
		}
	}
	if ahead == 0 {
		t.Errorf("no acquisition met a floor ahead of its fence (granted %v): the shuffled source went unnoticed", granted)
	}
	t.Logf("granted %v; %d refused as ErrFloorAhead", granted, ahead)
}
