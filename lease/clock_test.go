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
