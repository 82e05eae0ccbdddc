//go:build !linux

package bench

import "time"

// sleepUntil sleeps until t (at the Go timer's granularity).
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
