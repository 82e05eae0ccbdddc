package lease

import (
	"fmt"
	"sync"

	"github.com/fencegate/fencegate/clock"
)

// checkedClock reads a clock.Clock and panics if it goes backwards. The read and
// the comparison happen under one lock, so concurrent readers cannot report
// a false regression.
type checkedClock struct {
	mu    sync.Mutex
	clock clock.Clock
	last  clock.Instant
	read  bool
}

func (c *checkedClock) Now() clock.Instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.read && now.Before(c.last) {
		panic(fmt.Sprintf("fencegate: the holder's clock went backwards from %v to %v; deadlines computed from it would be wrong", c.last, now))
	}
	c.last, c.read = now, true
	return now
}
