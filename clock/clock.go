package clock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Instant is a reading of the holder's clock: how far the clock has run since
// its origin. Instants exist only on the holder's side; the coordinator's
// times are DBTime. The two are different types on purpose: a deadline can be
// compared with a holder reading, and an expiry with a database reading, but
// subtracting one from the other does not compile.
//
// Instants from different clocks share no origin; comparing them means
// nothing. A lease.Client reads only its own clock. The zero Instant is a
// clock's origin.
type Instant struct {
	d time.Duration // since the clock's origin
}

// Add returns the instant d after i (before i if d is negative).
func (i Instant) Add(d time.Duration) Instant { return Instant{i.d + d} }

// Sub returns the time from j to i.
func (i Instant) Sub(j Instant) time.Duration { return i.d - j.d }

// Before reports whether i is earlier than j.
func (i Instant) Before(j Instant) bool { return i.d < j.d }

// After reports whether i is later than j.
func (i Instant) After(j Instant) bool { return i.d > j.d }

// String formats i as the time since the clock's origin, such as "T+1.5s".
func (i Instant) String() string { return "T+" + i.d.String() }

// DBTime is a reading of the coordinator's clock: a timestamp taken by the
// database (clock_timestamp() on Postgres). It is for logs and for the
// coordinator's own comparisons; a holder must not compare it with its own
// clock, which is why it has no conversion to Instant.
type DBTime struct {
	t time.Time
}

// NewDBTime returns t, a timestamp the database took, as a reading of the
// coordinator's clock. It drops t's monotonic reading: the database's clock
// is its wall clock.
func NewDBTime(t time.Time) DBTime { return DBTime{t.Round(0)} }

// Time returns the timestamp as a time.Time, for logs and display. It carries
// no monotonic reading: it is the database's wall clock.
func (t DBTime) Time() time.Time { return t.t }

// IsZero reports whether t is unset.
func (t DBTime) IsZero() bool { return t.t.IsZero() }

// Sub returns the time from u to t, both in the database's clock.
func (t DBTime) Sub(u DBTime) time.Duration { return t.t.Sub(u.t) }

// Before reports whether t is earlier than u.
func (t DBTime) Before(u DBTime) bool { return t.t.Before(u.t) }

// After reports whether t is later than u.
func (t DBTime) After(u DBTime) bool { return t.t.After(u.t) }

// String formats t in RFC 3339 with microseconds, in UTC.
func (t DBTime) String() string { return t.t.UTC().Format(dbTimeLayout) }

// dbTimeLayout is RFC 3339 with the databases' microsecond resolution.
const dbTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// MarshalText encodes t as String does, so that a Grant or Status sent over
// a wire (JSON) keeps its timestamps.
func (t DBTime) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText decodes an RFC 3339 timestamp.
func (t *DBTime) UnmarshalText(b []byte) error {
	parsed, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return fmt.Errorf("fencegate: decode DBTime: %w", err)
	}
	t.t = parsed.UTC()
	return nil
}

// Clock is the holder's clock. It must be monotonic: a reading is never
// earlier than the one before. A lease.Client panics if its clock goes
// backwards, because every deadline it computed would then be wrong in the
// unsafe direction.
type Clock interface {
	Now() Instant
}

// System returns the process's clock: its monotonic clock, moved
// forward by every step forward of the wall clock. A step backward (NTP
// correcting a fast clock, an operator's date command) is ignored: it cannot
// lengthen a lease. A step forward is counted as time that passed, because
// it is often the only trace of time that did: a suspended machine or a
// paused and resumed VM stops the monotonic clock (Linux's CLOCK_MONOTONIC
// does not count suspend), and the wall clock is set right when it wakes,
// while the database's clock ran on. Counting the step ends a lease early on
// a clock that was set wrong, never late. Between steps only the rate at
// which the machine's clock runs matters, and lease.ClientOptions.ClockSkew
// bounds how far that rate may differ from the database's.
//
// Every System clock in a process reads the same clock, from one origin.
func System() Clock { return systemClock{} }

// SystemAt returns the reading System gives at t, a reading of
// time.Now (it must carry the monotonic clock). It is for a caller that
// needs the holder's clock and the wall clock at one instant, to put a
// lease's deadline on the wall clock: two calls would put a preemption
// between the two readings.
func SystemAt(t time.Time) Instant { return system.at(t) }

type systemClock struct{}

func (systemClock) Now() Instant { return system.at(time.Now()) }

// system is the process's one System clock. It is process-wide state, like
// the monotonic clock it reads: readings of every System clock compare.
var system = &steppedClock{origin: time.Now()}

// steppedClock is a monotonic clock that also keeps up with the wall clock:
// each reading is the monotonic time since origin plus the furthest the
// wall clock has ever been seen running ahead of it. That is never below
// either clock's time since origin, and never goes backwards.
//
// time.Now reads the wall clock first, then the monotonic clock, so a
// preemption between the two makes the wall clock look behind, which is
// ignored; only origin's own reading can make the clock run ahead, by that
// reading's gap (nanoseconds), in the safe direction.
type steppedClock struct {
	origin time.Time
	ahead  atomic.Int64 // ns; the furthest the wall clock ran ahead of the monotonic one
}

func (c *steppedClock) at(t time.Time) Instant {
	return c.read(t.Round(0).Sub(c.origin.Round(0)), t.Sub(c.origin))
}

// read returns the reading for the wall clock's and the monotonic clock's
// times since origin.
func (c *steppedClock) read(wall, mono time.Duration) Instant {
	ahead := int64(wall - mono)
	for {
		seen := c.ahead.Load()
		if ahead <= seen {
			return Instant{mono + time.Duration(seen)}
		}
		if c.ahead.CompareAndSwap(seen, ahead) {
			return Instant{mono + time.Duration(ahead)}
		}
	}
}

// Manual is a Clock for tests that moves only when told: by Advance, and
// by a fixed step after every reading. The step makes "check, then act" take
// time on the holder's clock, as it does in production, so a test can put a
// deadline between a lease check and the write that trusted it.
//
// It is safe for concurrent use. Misuse panics rather than letting a test
// pass on a clock that ran backwards.
type Manual struct {
	mu   sync.Mutex
	now  time.Duration
	step time.Duration
}

// NewManual returns a clock that reads start first and advances by
// stepPerRead after every reading. It panics if either is negative.
func NewManual(start, stepPerRead time.Duration) *Manual {
	if start < 0 || stepPerRead < 0 {
		panic(fmt.Sprintf("fencegate: clock.NewManual(%v, %v): negative durations would run the clock backwards", start, stepPerRead))
	}
	return &Manual{now: start, step: stepPerRead}
}

// Now returns the current instant, then advances the clock by the step.
func (c *Manual) Now() Instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := Instant{c.now}
	c.now += c.step
	return i
}

// Peek returns the instant the next Now will return, without advancing.
func (c *Manual) Peek() Instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Instant{c.now}
}

// Advance moves the clock forward by d. It panics if d is negative: a clock
// that runs backwards would make expired leases look valid.
func (c *Manual) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("fencegate: clock.Manual.Advance(%v): a clock must not run backwards", d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d
}

// AdvanceTo moves the clock forward to i. It panics if i is earlier than the
// clock's current reading.
func (c *Manual) AdvanceTo(i Instant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i.d < c.now {
		panic(fmt.Sprintf("fencegate: clock.Manual.AdvanceTo(%v): the clock already reads %v", i, Instant{c.now}))
	}
	c.now = i.d
}
