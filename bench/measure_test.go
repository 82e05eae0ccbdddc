package bench

import (
	"context"
	"sync"
	"testing"
)

// Warm runs warmOps ops in each worker, under that worker's key, and
// Interleave warms a Rewarm variant again before each of its runs.
func TestWarm(t *testing.T) {
	var mu sync.Mutex
	byKey := map[int]int{}
	op := func(_ context.Context, key int) error {
		mu.Lock()
		defer mu.Unlock()
		byKey[key]++
		return nil
	}
	Warm(context.Background(), op, 3, func(w int) int { return 10 + w })
	if len(byKey) != 3 || byKey[10] != warmOps || byKey[11] != warmOps || byKey[12] != warmOps {
		t.Fatalf("ops by key %v; want %d under each of keys 10, 11 and 12", byKey, warmOps)
	}
}

// Interleave warms a Rewarm variant before each timed run, and a plain
// one only before the first round: the warm-ups are told apart from the
// timed ops by a Run that lasts no time, whose workers stop before their
// first op.
func TestInterleaveRewarms(t *testing.T) {
	counts := map[string]int{}
	var mu sync.Mutex
	counted := func(name string) Op {
		return func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			counts[name]++
			return nil
		}
	}
	vs := []Variant{{Name: "plain", Op: counted("plain")}, {Name: "rewarm", Op: counted("rewarm"), Rewarm: true}}
	Interleave(context.Background(), vs, 2, OneKey, 0, 3, func(string) {})
	// A Run of 0 may still start an op or so per worker before it sees the
	// stop; the rewarmed variant runs at least 3 rounds × 2 workers ×
	// warmOps more.
	if extra := counts["rewarm"] - counts["plain"]; extra < 3*2*warmOps-4*2 {
		t.Fatalf("ops %v: the Rewarm variant ran %d more than the plain one; want about %d (a warm-up before each round)", counts, extra, 3*2*warmOps)
	}
}
