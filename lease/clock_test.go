package lease

import (
	"encoding/json"
	"os/exec"
	"regexp"
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

	// A grant survives a trip through JSON, timestamps included.
	g := Grant{Resource: "r", Holder: "h", Fence: 3, RequestID: "id", TTL: time.Second, CoordinatorExpiresAt: a}
	b2, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back Grant
	if err := json.Unmarshal(b2, &back); err != nil {
		t.Fatal(err)
	}
	if back != g {
		t.Errorf("JSON round trip: %s decoded to %+v, want %+v", b2, back, g)
	}
	if err := json.Unmarshal([]byte(`{"CoordinatorExpiresAt":"yesterday"}`), &back); err == nil {
		t.Error("decoded a malformed timestamp")
	}
}

// The rule: holder instants and coordinator timestamps are distinct
// types, so mixing them does not compile. testdata/mixclocks tries four ways.
func TestClockDomainsDoNotMix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package with the go tool")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	out, err := exec.Command(goTool, "build", "-o", "/dev/null", "./testdata/mixclocks").CombinedOutput()
	if err == nil {
		t.Fatal("testdata/mixclocks compiled, but it subtracts a DBTime from an Instant")
	}
	errs := regexp.MustCompile(`mixclocks\.go:\d+:\d+: cannot use .* as lease\.(Instant|DBTime) value`).FindAllString(string(out), -1)
	if len(errs) != 4 {
		t.Fatalf("want 4 clock-domain type errors, got %d:\n%s", len(errs), out)
	}
}

func TestManualClockStepsPerRead(t *testing.T) {
	c := NewManualClock(10*time.Millisecond, time.Millisecond)
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

func TestManualClockConcurrentReadsAreDistinct(t *testing.T) {
	c := NewManualClock(0, time.Nanosecond)
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

func TestManualClockMisuseFailsLoudly(t *testing.T) {
	for name, misuse := range map[string]func(){
		"negative start":     func() { NewManualClock(-time.Second, 0) },
		"negative step":      func() { NewManualClock(0, -time.Millisecond) },
		"negative Advance":   func() { NewManualClock(0, 0).Advance(-time.Nanosecond) },
		"AdvanceTo the past": func() { c := NewManualClock(time.Second, 0); c.AdvanceTo(Instant{0}) },
	} {
		t.Run(name, func(t *testing.T) {
			msg := mustPanic(t, misuse)
			if !strings.Contains(msg, "backwards") && !strings.Contains(msg, "already reads") {
				t.Errorf("panic %q does not say what is wrong", msg)
			}
		})
	}
}

// backwardsClock reads its instants from a list, which may run backwards.
type backwardsClock struct {
	mu    sync.Mutex
	reads []Instant
}

func (c *backwardsClock) Now() Instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.reads[0]
	c.reads = c.reads[1:]
	return i
}

// A Client whose clock reads backwards panics rather than compute a deadline
// that could outlast the coordinator's.
func TestClientPanicsOnClockGoingBackwards(t *testing.T) {
	clock := &backwardsClock{reads: []Instant{{time.Second}, {time.Second}, {999 * time.Millisecond}}}
	c, err := NewClient(&ClientOptions{Holder: "a", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // equal readings are fine
		if _, err := c.BeginAcquire("r"); err != nil {
			t.Fatal(err)
		}
	}
	msg := mustPanic(t, func() { _, _ = c.BeginAcquire("r") })
	if !strings.Contains(msg, "went backwards from T+1s to T+999ms") {
		t.Errorf("panic message %q", msg)
	}
}

func TestSystemClockIsMonotonic(t *testing.T) {
	c := SystemClock()
	last := c.Now()
	for range 10000 {
		now := c.Now()
		if now.Before(last) {
			t.Fatalf("SystemClock went from %v to %v", last, now)
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

// A lease on the system clock ends when a forward step of the wall clock
// says its time is up, although the monotonic clock stood still: a machine
// suspended (or a VM paused) for 2s wakes with its lease's 1s gone.
func TestALeaseEndsWhenTheWallClockStepsPastIt(t *testing.T) {
	c := &steppedClock{}
	var wall, mono time.Duration
	clk := clockFunc(func() Instant { return c.read(wall, mono) })
	client := newClient(t, "h", ClientOptions{Clock: clk})
	req, err := client.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	l, err := client.CompleteAcquire(req, Grant{Resource: "r", Holder: "h", Fence: 1, RequestID: req.RequestID, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wall, mono = 100*time.Millisecond, 100*time.Millisecond
	if got := l.Remaining(); got != 900*time.Millisecond {
		t.Fatalf("remaining %v before the pause, want 900ms", got)
	}
	wall += 2 * time.Second // the pause: only the wall clock was set right
	if !l.Expired() {
		t.Fatalf("the lease survived a 2s pause with %v left", l.Remaining())
	}
}

type clockFunc func() Instant

func (f clockFunc) Now() Instant { return f() }

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
// before it kept up with the wall clock's steps: go test -bench SystemClock.
func BenchmarkSystemClock(b *testing.B) {
	b.Run("monotonic-alone", func(b *testing.B) {
		origin := time.Now()
		for b.Loop() {
			_ = Instant{time.Since(origin)}
		}
	})
	b.Run("SystemClock", func(b *testing.B) {
		c := SystemClock()
		for b.Loop() {
			_ = c.Now()
		}
	})
	b.Run("SystemClock-parallel", func(b *testing.B) {
		c := SystemClock()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = c.Now()
			}
		})
	})
}
