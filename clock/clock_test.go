package clock

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestInstantArithmetic(t *testing.T) {
	a := Instant{time.Second}
	b := a.Add(500 * time.Millisecond)
	if got := b.Sub(a); got != 500*time.Millisecond {
		t.Errorf("b.Sub(a) = %v, want 500ms", got)
	}
	if !a.Before(b) || b.Before(a) || !b.After(a) || a.After(b) || a.Before(a) || a.After(a) {
		t.Error("Before/After disagree with the readings")
	}
	if got := b.String(); got != "T+1.5s" {
		t.Errorf("String = %q", got)
	}
}

func TestDBTime(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)
	a, b := DBTime{base}, DBTime{base.Add(time.Second)}
	if b.Sub(a) != time.Second || !a.Before(b) || !b.After(a) || a.IsZero() || !(DBTime{}).IsZero() {
		t.Error("DBTime comparisons are wrong")
	}
	if got := a.String(); got != "2025-01-02T03:04:05.123456Z" {
		t.Errorf("String = %q", got)
	}
	if !a.Time().Equal(base) {
		t.Errorf("Time = %v", a.Time())
	}

	// A timestamp survives a trip through its text form, as JSON carries it.
	text, err := a.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var back DBTime
	if err := back.UnmarshalText(text); err != nil {
		t.Fatal(err)
	}
	if back != a {
		t.Errorf("text round trip: %s decoded to %v, want %v", text, back, a)
	}
	if err := back.UnmarshalText([]byte("yesterday")); err == nil {
		t.Error("decoded a malformed timestamp")
	}
	if got := NewDBTime(base); got != a {
		t.Errorf("NewDBTime(%v) = %v, want %v", base, got, a)
	}
}

func TestManualStepsPerRead(t *testing.T) {
	c := NewManual(10*time.Millisecond, time.Millisecond)
	if got := c.Peek(); got != (Instant{10 * time.Millisecond}) {
		t.Fatalf("Peek = %v", got)
	}
	first, second := c.Now(), c.Now()
	if second.Sub(first) != time.Millisecond {
		t.Errorf("consecutive reads %v, %v: want one step apart", first, second)
	}
	c.Advance(time.Second)
	if got := c.Now().Sub(second); got != time.Second+time.Millisecond {
		t.Errorf("after Advance(1s) the clock moved %v, want 1.001s", got)
	}
	c.AdvanceTo(Instant{5 * time.Second})
	if got := c.Now(); got != (Instant{5 * time.Second}) {
		t.Errorf("after AdvanceTo(5s) Now = %v", got)
	}
}

func TestManualConcurrentReadsAreDistinct(t *testing.T) {
	c := NewManual(0, time.Nanosecond)
	const goroutines, reads = 8, 1000
	var mu sync.Mutex
	seen := make(map[Instant]bool)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			last := Instant{-1}
			for range reads {
				now := c.Now()
				if !now.After(last) {
					t.Errorf("reads went %v then %v", last, now)
				}
				last = now
				mu.Lock()
				seen[now] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != goroutines*reads {
		t.Errorf("%d distinct readings from %d reads", len(seen), goroutines*reads)
	}
}

func TestManualMisuseFailsLoudly(t *testing.T) {
	for name, misuse := range map[string]func(){
		"negative start":     func() { NewManual(-time.Second, 0) },
		"negative step":      func() { NewManual(0, -time.Millisecond) },
		"negative Advance":   func() { NewManual(0, 0).Advance(-time.Nanosecond) },
		"AdvanceTo the past": func() { c := NewManual(time.Second, 0); c.AdvanceTo(Instant{0}) },
	} {
		t.Run(name, func(t *testing.T) {
			msg := mustPanic(t, misuse)
			if !strings.Contains(msg, "backwards") && !strings.Contains(msg, "already reads") {
				t.Errorf("panic %q does not say what is wrong", msg)
			}
		})
	}
}

func TestSystemClockIsMonotonic(t *testing.T) {
	c := System()
	last := c.Now()
	for range 10000 {
		now := c.Now()
		if now.Before(last) {
			t.Fatalf("System went from %v to %v", last, now)
		}
		last = now
	}
}

// The system clock keeps up with the wall clock's steps forward and
// ignores its steps backward: each reading is at least the time since the
// origin on both clocks, never below the reading before, and a step back
// and forth again is not counted twice.
func TestSystemClockCountsStepsForwardOnly(t *testing.T) {
	c := &steppedClock{}
	ms := time.Millisecond
	for _, r := range []struct {
		name       string
		wall, mono time.Duration
		want       time.Duration
	}{
		{"origin", 0, 0, 0},
		{"both clocks run", 10 * ms, 10 * ms, 10 * ms},
		{"the wall clock steps 5ms forward", 25 * ms, 20 * ms, 25 * ms},
		{"the wall clock steps 30ms back", 0, 30 * ms, 35 * ms},
		{"and 30ms forward again", 45 * ms, 40 * ms, 45 * ms},
		{"a paused VM: the monotonic clock stood still for 2s", 2055 * ms, 50 * ms, 2055 * ms},
		{"a preemption between the two readings: the wall clock looks 3ms behind", 2062 * ms, 60 * ms, 2065 * ms},
	} {
		got := c.read(r.wall, r.mono)
		if got != (Instant{r.want}) {
			t.Errorf("%s: wall +%v, monotonic +%v: read %v, want %v", r.name, r.wall, r.mono, got, Instant{r.want})
		}
		if got.d < r.wall || got.d < r.mono {
			t.Errorf("%s: read %v, behind the wall clock (+%v) or the monotonic one (+%v)", r.name, got, r.wall, r.mono)
		}
	}
}

// Readings from many goroutines, while the wall clock keeps stepping
// forward, never run backwards on any one of them (run with -race).
func TestSteppedClockIsMonotonicUnderConcurrency(t *testing.T) {
	c := &steppedClock{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			last := Instant{}
			for i := range 2000 {
				mono := time.Duration(i) * time.Microsecond
				wall := mono + time.Duration((i*(g+1))%97)*time.Microsecond // steps forward and back
				now := c.read(wall, mono)
				if now.Before(last) {
					t.Errorf("goroutine %d: read %v after %v", g, now, last)
					return
				}
				last = now
			}
		})
	}
	wg.Wait()
}

func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("did not panic")
		}
		msg, _ = r.(string)
	}()
	f()
	return ""
}

// The system clock's cost beside the monotonic clock alone, which it was
// before it kept up with the wall clock's steps: go test -bench SystemClock ./clock.
func BenchmarkSystemClock(b *testing.B) {
	b.Run("monotonic-alone", func(b *testing.B) {
		origin := time.Now()
		for b.Loop() {
			_ = Instant{time.Since(origin)}
		}
	})
	b.Run("System", func(b *testing.B) {
		c := System()
		for b.Loop() {
			_ = c.Now()
		}
	})
	b.Run("System-parallel", func(b *testing.B) {
		c := System()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = c.Now()
			}
		})
	})
}
