package bench

import (
	"syscall"
	"time"
)

// sleepUntil blocks the calling thread in nanosleep until t. Go's timers
// wake at the netpoller's millisecond granularity (a 0.5 ms time.Sleep
// takes about 1.1 ms on Linux), which would double the proxy's delay; the
// kernel's high-resolution timer overshoots by tens of microseconds.
func sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
