package lease

import (
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
)

// newTestClient returns a client on a manual clock that steps 1ms per read.
func newTestClient(t *testing.T, opts ClientOptions) (*Client, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0, time.Millisecond)
	opts.Clock = clk
	if opts.Holder == "" {
		opts.Holder = "agent-a"
	}
	c, err := NewClient(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// grantFor plays the coordinator: a grant answering req with ttl and fence.
func grantFor(req *AcquireRequest, fence int64, ttl time.Duration) Grant {
	return Grant{Resource: req.Resource, Holder: req.Holder, Fence: fence, RequestID: req.RequestID, TTL: ttl}
}

func TestNewClientRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]ClientOptions{
		"empty holder":     {},
		"control holder":   {Holder: "a\nb"},
		"negative skew":    {Holder: "a", ClockSkew: -time.Millisecond},
		"negative ttl":     {Holder: "a", TTL: -time.Second},
		"1ns ttl":          {Holder: "a", TTL: time.Nanosecond},
		"skew above ttl":   {Holder: "a", TTL: time.Second, ClockSkew: time.Second},
		"invalid utf8":     {Holder: "\xff"},
		"huge holder name": {Holder: string(make([]byte, fence.MaxNameLen+1))},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := NewClient(&opts)
			if !errors.Is(err, fence.ErrInvalidInput) {
				t.Fatalf("NewClient(%+v) = %v, %v; want fence.ErrInvalidInput", opts, c, err)
			}
			t.Log(err)
		})
	}
	if c, err := NewClient(nil); !errors.Is(err, fence.ErrInvalidInput) {
		t.Fatalf("NewClient(nil) = %v, %v; want fence.ErrInvalidInput (no holder)", c, err)
	}
}

func TestBeginAcquire(t *testing.T) {
	c, clk := newTestClient(t, ClientOptions{TTL: time.Second})
	want := clk.Peek()
	req, err := c.BeginAcquire("deploy-slot")
	if err != nil {
		t.Fatal(err)
	}
	if req.Resource != "deploy-slot" || req.Holder != "agent-a" || req.TTL != time.Second || req.SentAt() != want {
		t.Errorf("request %+v, sent at %v (want %v)", req, req.SentAt(), want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(req.RequestID) {
		t.Errorf("request id %q is not 128 bits of hex", req.RequestID)
	}
	ids := map[string]bool{}
	for range 1000 {
		r, _ := c.BeginAcquire("deploy-slot")
		if ids[r.RequestID] {
			t.Fatalf("request id %q repeated", r.RequestID)
		}
		ids[r.RequestID] = true
	}
	for _, bad := range []string{"", "a\x00b", "\xfe"} {
		if _, err := c.BeginAcquire(bad); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("BeginAcquire(%q) error %v, want fence.ErrInvalidInput", bad, err)
		}
	}
}

// The deadline dates from the send instant, never from the reply's arrival:
// however long the round trip, it does not move.
func TestCompleteAcquireAnchorsAtSendTime(t *testing.T) {
	c, clk := newTestClient(t, ClientOptions{ClockSkew: 50 * time.Millisecond})
	req, _ := c.BeginAcquire("r")
	clk.Advance(300 * time.Millisecond) // a slow round trip
	l, err := c.CompleteAcquire(req, grantFor(req, 7, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if want := req.SentAt().Add(time.Second - 50*time.Millisecond); l.Deadline() != want {
		t.Errorf("deadline %v, want send instant + ttl - skew = %v", l.Deadline(), want)
	}
	if got := l.Token(); got != (fence.Token{Resource: "r", Holder: "agent-a", Fence: 7}) {
		t.Errorf("token %v", got)
	}
	// Each read steps the clock 1ms: the first Remaining read happens at
	// send + 1ms (BeginAcquire's step) + 300ms.
	if rem := l.Remaining(); rem != 950*time.Millisecond-301*time.Millisecond {
		t.Errorf("Remaining = %v", rem)
	}
	clk.AdvanceTo(l.Deadline().Add(-time.Millisecond))
	if l.Expired() {
		t.Error("expired a millisecond before its deadline")
	}
	if !l.Expired() { // this read is at the deadline
		t.Error("not expired at its deadline")
	}
	if l.Remaining() != 0 {
		t.Error("Remaining is not 0 after the deadline")
	}
}

func TestRequestsAreSingleUse(t *testing.T) {
	c, _ := newTestClient(t, ClientOptions{})
	req, _ := c.BeginAcquire("r")
	grant := grantFor(req, 1, time.Second)
	if _, err := c.CompleteAcquire(req, grant); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteAcquire(req, grant); !errors.Is(err, ErrRequestUsed) {
		t.Errorf("second CompleteAcquire: %v, want ErrRequestUsed", err)
	}

	// Concurrent completions of one request: exactly one wins.
	req, _ = c.BeginAcquire("r")
	grant = grantFor(req, 2, time.Second)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := c.CompleteAcquire(req, grant)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrRequestUsed):
				t.Errorf("CompleteAcquire: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent completions of one request succeeded, want 1", wins.Load())
	}
}

func TestCompleteAcquireRejectsAnotherRequestsGrant(t *testing.T) {
	c, _ := newTestClient(t, ClientOptions{})
	other, _ := NewClient(&ClientOptions{Holder: "agent-b"})
	req, _ := c.BeginAcquire("r")
	otherReq, _ := c.BeginAcquire("r")
	good := grantFor(req, 3, time.Second)
	for name, tc := range map[string]struct {
		mutate func(*Grant)
		want   error
	}{
		"other resource":   {func(g *Grant) { g.Resource = "s" }, ErrGrantMismatch},
		"other holder":     {func(g *Grant) { g.Holder = "agent-b" }, ErrGrantMismatch},
		"other request":    {func(g *Grant) { g.RequestID = otherReq.RequestID }, ErrGrantMismatch},
		"zero fence":       {func(g *Grant) { g.Fence = 0 }, fence.ErrInvalidInput},
		"negative ttl":     {func(g *Grant) { g.TTL = -time.Second }, fence.ErrInvalidInput},
		"empty request id": {func(g *Grant) { g.RequestID = "" }, ErrGrantMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			g := good
			tc.mutate(&g)
			if _, err := c.CompleteAcquire(req, g); !errors.Is(err, tc.want) {
				t.Fatalf("CompleteAcquire: %v, want %v", err, tc.want)
			} else {
				t.Log(err)
			}
		})
	}
	// A refused grant does not use the request up: the right one still works.
	if _, err := c.CompleteAcquire(req, good); err != nil {
		t.Fatalf("CompleteAcquire with the right grant after refusals: %v", err)
	}

	// A request begun by another client, or by nobody, is bad input.
	foreign, _ := other.BeginAcquire("r")
	if _, err := c.CompleteAcquire(foreign, grantFor(foreign, 1, time.Second)); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("completing another client's request: %v", err)
	}
	handMade := &AcquireRequest{Resource: "r", Holder: "agent-a", RequestID: "x"}
	if _, err := c.CompleteAcquire(handMade, grantFor(handMade, 1, time.Second)); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("completing a hand-made request: %v", err)
	}
	if _, err := c.CompleteAcquire(nil, good); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("completing a nil request: %v", err)
	}
}

// A renewal keeps the fence and dates the new deadline from the renewal's
// own send instant.
func TestRenewalKeepsFenceAndAnchorsAtItsSendTime(t *testing.T) {
	c, clk := newTestClient(t, ClientOptions{ClockSkew: 10 * time.Millisecond})
	req, _ := c.BeginAcquire("r")
	l, _ := c.CompleteAcquire(req, grantFor(req, 5, time.Second))
	token := l.Token()

	clk.Advance(400 * time.Millisecond)
	rreq, err := c.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	if rreq.Resource != "r" || rreq.Holder != "agent-a" || rreq.Fence != 5 || rreq.RequestID == req.RequestID {
		t.Errorf("renew request %+v", rreq)
	}
	clk.Advance(200 * time.Millisecond) // the reply is slow
	rgrant := Grant{Resource: "r", Holder: "agent-a", Fence: 5, RequestID: rreq.RequestID, TTL: time.Second}
	renewed, err := c.CompleteRenewal(rreq, rgrant)
	if err != nil {
		t.Fatal(err)
	}
	if renewed != l || l.Token() != token {
		t.Error("renewal changed the lease's identity or token")
	}
	if want := rreq.SentAt().Add(time.Second - 10*time.Millisecond); l.Deadline() != want {
		t.Errorf("renewed deadline %v, want renewal send + ttl - skew = %v", l.Deadline(), want)
	}
	if l.Grant().RequestID != rreq.RequestID {
		t.Error("Grant() does not return the renewal's grant")
	}
	if _, err := c.CompleteRenewal(rreq, rgrant); !errors.Is(err, ErrRequestUsed) {
		t.Errorf("second CompleteRenewal: %v, want ErrRequestUsed", err)
	}

	rreq, _ = c.BeginRenewal(l)
	wrongFence := Grant{Resource: "r", Holder: "agent-a", Fence: 6, RequestID: rreq.RequestID, TTL: time.Second}
	if _, err := c.CompleteRenewal(rreq, wrongFence); !errors.Is(err, ErrGrantMismatch) {
		t.Errorf("renewal grant with another fence: %v, want ErrGrantMismatch", err)
	}
	wrongRequest := Grant{Resource: "r", Holder: "agent-a", Fence: 5, RequestID: req.RequestID, TTL: time.Second}
	if _, err := c.CompleteRenewal(rreq, wrongRequest); !errors.Is(err, ErrGrantMismatch) {
		t.Errorf("renewal completed with the acquisition's grant: %v, want ErrGrantMismatch", err)
	}
	if _, err := c.CompleteRenewal(&RenewRequest{}, wrongRequest); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("hand-made renew request: %v, want fence.ErrInvalidInput", err)
	}
}

func TestReleaseOnTheHolderSide(t *testing.T) {
	c, _ := newTestClient(t, ClientOptions{})
	req, _ := c.BeginAcquire("r")
	l, _ := c.CompleteAcquire(req, grantFor(req, 9, time.Hour))
	inFlight, _ := c.BeginRenewal(l)

	token, err := c.Release(l)
	if err != nil || token != l.Token() {
		t.Fatalf("Release = %v, %v", token, err)
	}
	if !l.Expired() || l.Remaining() != 0 {
		t.Error("a released lease does not report expired")
	}
	if _, err := c.BeginRenewal(l); !errors.Is(err, ErrReleased) {
		t.Errorf("BeginRenewal after release: %v, want ErrReleased", err)
	}
	grant := Grant{Resource: "r", Holder: "agent-a", Fence: 9, RequestID: inFlight.RequestID, TTL: time.Hour}
	if _, err := c.CompleteRenewal(inFlight, grant); !errors.Is(err, ErrReleased) {
		t.Errorf("completing a renewal that was in flight at release: %v, want ErrReleased", err)
	}
	if _, err := c.Release(l); err != nil {
		t.Errorf("second Release: %v", err)
	}
	other, _ := NewClient(&ClientOptions{Holder: "agent-b"})
	if _, err := other.Release(l); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("releasing another client's lease: %v", err)
	}
	if _, err := other.BeginRenewal(l); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("renewing another client's lease: %v", err)
	}
}
