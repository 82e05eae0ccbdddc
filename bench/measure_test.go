package bench

import (
	"context"
	"sync"
	"testing"
)

// Warm runs warmOps ops in each worker, under that worker's key.
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
