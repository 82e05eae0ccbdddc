package clock_test

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/clock"
)

// A manual clock makes "check, then act" take time: every reading moves it
// a step on, so a deadline can fall between the check and the write.
func ExampleManual() {
	c := clock.NewManual(0, 10*time.Millisecond)
	deadline := c.Now().Add(time.Second) // a lease dated from its request

	c.Advance(985 * time.Millisecond) // the holder stalls
	check := c.Now()
	fmt.Println("check at", check, "before the deadline:", check.Before(deadline))
	write := c.Now()
	fmt.Println("write at", write, "before the deadline:", write.Before(deadline))
	// Output:
	// check at T+995ms before the deadline: true
	// write at T+1.005s before the deadline: false
}

// A timestamp the database took keeps its microseconds, in UTC.
func ExampleDBTime() {
	granted := clock.NewDBTime(time.Date(2026, 12, 5, 12, 0, 0, 123456000, time.UTC))
	expires := clock.NewDBTime(granted.Time().Add(30 * time.Second))
	fmt.Println(expires, expires.Sub(granted))
	// Output:
	// 2026-12-05T12:00:30.123456Z 30s
}
