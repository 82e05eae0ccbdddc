package lease

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
)

// A grant survives a trip through JSON, timestamps included.
func TestGrantJSONKeepsTimestamps(t *testing.T) {
	a := clock.NewDBTime(time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC))
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
	errs := regexp.MustCompile(`mixclocks\.go:\d+:\d+: cannot use .* as clock\.(Instant|DBTime) value`).FindAllString(string(out), -1)
	if len(errs) != 4 {
		t.Fatalf("want 4 clock-domain type errors, got %d:\n%s", len(errs), out)
	}
}

// backwardsClock reads its instants from a list, which may run backwards.
type backwardsClock struct {
	mu    sync.Mutex
	reads []clock.Instant
}

func (c *backwardsClock) Now() clock.Instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.reads[0]
	c.reads = c.reads[1:]
	return i
}

// A Client whose clock reads backwards panics rather than compute a deadline
// that could outlast the coordinator's.
func TestClientPanicsOnClockGoingBackwards(t *testing.T) {
	clk := &backwardsClock{reads: []clock.Instant{at(time.Second), at(time.Second), at(999 * time.Millisecond)}}
	c, err := NewClient(&ClientOptions{Holder: "a", Clock: clk})
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

// A lease ends when its holder's clock reads past its deadline, although the
// process did not run meanwhile: a machine suspended (or a VM paused) for 2s
// wakes with its lease's 1s gone, because the system clock counts the wall
// clock's step forward as time that passed (clock's
// TestSystemClockCountsStepsForwardOnly).
func TestALeaseEndsWhenTheWallClockStepsPastIt(t *testing.T) {
	clk := clock.NewManual(0, 0)
	client := newClient(t, "h", ClientOptions{Clock: clk})
	req, err := client.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	l, err := client.CompleteAcquire(req, Grant{Resource: "r", Holder: "h", Fence: 1, RequestID: req.RequestID, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(100 * time.Millisecond)
	if got := l.Remaining(); got != 900*time.Millisecond {
		t.Fatalf("remaining %v before the pause, want 900ms", got)
	}
	clk.Advance(2 * time.Second) // the pause, as the system clock reads it on waking
	if !l.Expired() {
		t.Fatalf("the lease survived a 2s pause with %v left", l.Remaining())
	}
}

// at is the instant d after a clock's origin.
func at(d time.Duration) clock.Instant { return clock.Instant{}.Add(d) }

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
