package check

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
)

func at(v int64) time.Time { return time.Unix(0, ms(v)) }

// lead is an acknowledged term of election res: its acquisition (Elect),
// the grant's floor raise, and its lease version granted at call+1 for a
// term; the holder believes it leads until until.
func (b *builder) lead(holder, res string, fence int64, call, ret, until int64) *history.Op {
	o := b.op(history.Acquire, holder, res, 0, call, ret, history.OK)
	o.Granted, o.TTL, o.Request, o.Attempts, o.Elect, o.Hold, o.Wait = fence, int64(250*time.Millisecond), o.Op, 1, true, true, true
	o.Until = ms(until)
	b.raise(holder, res, fence)
	b.commit(observe.Mark{Kind: observe.Floor, Resource: res, Fence: fence, Holder: holder},
		observe.Mark{Kind: observe.Lease, Resource: res, Fence: fence, Holder: holder, GrantedAt: at(call + 1), ExpiresAt: at(call + 251)})
	return o
}

// resign is a term's release: its version with the expiry moved to then.
func (b *builder) resign(holder, res string, fence int64, when int64) {
	o := b.op(history.Release, holder, res, fence, when, when+1, history.Unknown)
	o.Hold, o.Elect = true, true
	b.commit(observe.Mark{Kind: observe.Lease, Resource: res, Fence: fence, Holder: holder, Released: true, GrantedAt: at(when - 100), ExpiresAt: at(when)})
}

// permit is a permit of semaphore sem (n permits) on slot, with its floor
// raise and lease version; answered false leaves its outcome unknown.
func (b *builder) permit(holder, sem, slot string, n int, fence int64, call int64, answered bool) {
	ret := call + 1
	if !answered {
		ret = 0
	}
	o := b.op(history.Permit, holder, sem, 0, call, ret, history.OK)
	o.Permits, o.Wait = n, true
	if answered {
		o.Granted, o.Slot = fence, slot
	}
	b.raise(holder, slot, fence)
	b.raise(holder, sem+"#line", fence+100)
	b.commit(observe.Mark{Kind: observe.Lease, Resource: sem + "#line", Fence: fence + 100, Holder: holder, GrantedAt: at(call), ExpiresAt: at(call + 1), Released: true},
		observe.Mark{Kind: observe.Floor, Resource: sem + "#line", Fence: fence + 100, Holder: holder})
	b.commit(observe.Mark{Kind: observe.Floor, Resource: slot, Fence: fence, Holder: holder},
		observe.Mark{Kind: observe.Lease, Resource: slot, Fence: fence, Holder: holder, GrantedAt: at(call + 1), ExpiresAt: at(call + 251)})
}

// observed is one leader an observer reported.
func (b *builder) observed(observer, res, leader string, fence, when int64) {
	o := b.op(history.Observe, observer, res, 0, when, when, history.OK)
	o.Granted, o.HeldBy = fence, leader
}

// electionClean: a leads e (fence 11) and resigns; b leads (fence 12), and
// a's late write under 11 is refused; x and y observe both; c and d hold
// the two permits of s, and e waits for one until d's lapsed.
func electionClean() *builder {
	b := newBuilder()
	b.in.Commits = []observe.Commit{}
	b.lead("a", "e", 11, 0, 2, 200)
	b.observed("x", "e", "a", 11, 3)
	b.observed("y", "e", "a", 11, 4)
	b.write("a", "e", 11, 5, 6, history.OK, true)
	b.commit(observe.Mark{Kind: observe.Write, Resource: "e", Fence: 11, Holder: "a", OpID: b.in.Ops[len(b.in.Ops)-1].Op})
	b.resign("a", "e", 11, 100)
	b.lead("b", "e", 12, 110, 112, 300)
	b.observed("x", "e", "b", 12, 113)
	b.observed("y", "e", "b", 12, 114)
	b.refuse("a", "e", 11, 12, 120, 121)
	b.permit("c", "s", "s#0", 2, 21, 0, true)
	b.permit("d", "s", "s#1", 2, 22, 10, true)
	b.permit("e", "s", "s#1", 2, 23, 400, false) // d's lapsed at 261
	return b
}

func TestElectionCleanHistoryPasses(t *testing.T) {
	r := Run(electionClean().in)
	if r.Failed() {
		t.Fatalf("violations in a clean history:\n%s", r.Summary(5))
	}
	c := r.Coord
	if c.Terms != 2 || c.Leaders != 2 || c.DeposedRefused != 1 || c.Permits != 2 || c.MaxInUse != 2 || c.MaxDemand != 1 || c.ObserverPairs != 1 || c.IdenticalPairs != 1 {
		t.Fatalf("figures: %+v", c)
	}
}

// Demand counts a permit from its wait to its release's return: three
// participants at once when e asks while c and d still hold theirs.
func TestPermitDemand(t *testing.T) {
	b := electionClean()
	for _, h := range []struct {
		holder, slot string
		fence        int64
	}{{"c", "s#0", 21}, {"d", "s#1", 22}} {
		b.op(history.Release, h.holder, h.slot, h.fence, 420, 421, history.Unknown)
	}
	if r := Run(b.in); r.Failed() || r.Coord.MaxDemand != 3 {
		t.Fatalf("most at once %d, want 3; violations:\n%s", r.Coord.MaxDemand, r.Summary(5))
	}
}

// Each case breaks one rule of the elections and semaphores; the checker
// must name it.
func TestEachElectionCheckFires(t *testing.T) {
	cases := []struct {
		name, check string
		edit        func(b *builder)
	}{
		{"granted before the last term's expiry", "leader-overlap", func(b *builder) {
			b.lead("c", "e", 13, 150, 152, 350) // b's term (12) runs to 361
		}},
		{"a leader believed past the next grant", "leader-overlap", func(b *builder) {
			// a's term was released (by its keeper, say) while a, which
			// never resigned, believed it led until 200; b was granted at 111.
			for i, o := range b.in.Ops {
				if o.Type == history.Release && o.Holder == "a" {
					b.in.Ops = append(b.in.Ops[:i], b.in.Ops[i+1:]...)
					break
				}
			}
		}},
		{"three permits of two live", "permits-over-n", func(b *builder) {
			b.permit("f", "s", "s#2", 2, 24, 20, false) // s#0 and s#1 live until 251 and 261
		}},
		{"a permit the database never granted", "lost-permit", func(b *builder) {
			o := b.op(history.Permit, "g", "s", 0, 500, 501, history.OK)
			o.Permits, o.Granted, o.Slot = 2, 99, "s#0"
		}},
		{"a permit on a slot above N", "lost-permit", func(b *builder) {
			for i := range b.in.Ops {
				if o := &b.in.Ops[i]; o.Type == history.Permit && o.Holder == "d" {
					o.Slot = "s#7"
				}
			}
		}},
		{"an observer going back", "observe-order", func(b *builder) {
			b.observed("x", "e", "a", 11, 130)
		}},
		{"an observer reporting a leader that never led", "observe-phantom", func(b *builder) {
			b.observed("y", "e", "c", 12, 140)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := electionClean()
			c.edit(b)
			r := Run(b.in)
			if r.ByCheck()[c.check] == 0 {
				t.Fatalf("%s did not fire; violations:\n%s", c.check, r.Summary(5))
			}
		})
	}
}

// Observers that missed a term between two reports are counted, not
// judged: Observe coalesces what it had no chance to read.
func TestCoalescedTermsAreCounted(t *testing.T) {
	b := electionClean()
	b.resign("b", "e", 12, 200)
	b.lead("c", "e", 13, 210, 212, 400)
	b.observed("x", "e", "c", 13, 213) // y, stopped, never saw c
	b.resign("c", "e", 13, 300)
	b.lead("d", "e", 14, 310, 312, 500)
	b.observed("x", "e", "d", 14, 313)
	b.observed("y", "e", "d", 14, 314)
	r := Run(b.in)
	if r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
	if c := r.Coord; c.Coalesced != 1 || c.ObserverPairs != 1 || c.IdenticalPairs != 0 {
		t.Fatalf("figures: %+v", c)
	}
}
