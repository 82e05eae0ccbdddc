package check

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
)

// handOver is a hand-over op of holder's lease with fence. committed adds
// its write's row and, when to is set, the grant's raise row right after it
// (its transaction's rows, consecutive in id order).
func (b *builder) handOver(holder, res string, fence int64, call, ret int64, out history.Outcome, committed bool, to string, granted int64) *history.Op {
	o := b.op(history.HandOver, holder, res, fence, call, ret, out)
	o.Via = "do"
	if out == history.OK {
		o.Freed, o.To, o.Granted = true, to, granted
	}
	if committed {
		b.id++
		b.in.Events = append(b.in.Events, workload.Event{ID: b.id, Kind: "write", Resource: res, Fence: fence, Holder: holder, Agent: holder, OpID: o.Op})
		if to != "" {
			b.raise(to, res, granted)
		}
	}
	return o
}

// waited is a waiter's AcquireWait that returned fence (a lease a hand-over
// granted it, or its own acquisition's), with no raise of its own.
func (b *builder) waited(holder, res string, fence int64, call, ret int64) *history.Op {
	o := b.op(history.Acquire, holder, res, 0, call, ret, history.OK)
	o.Granted, o.TTL, o.Request, o.Attempts, o.Wait = fence, int64(250*time.Millisecond), o.Op+"/wait", 1, true
	return o
}

// at is a database time in milliseconds, on the builder's clock.
func dbAt(v int64) time.Time { return time.Unix(0, ms(v)) }

func leaseMark(holder, res string, fence int64, granted, expires int64, released bool) observe.Mark {
	return observe.Mark{Kind: observe.Lease, Resource: res, Holder: holder, Fence: fence, GrantedAt: dbAt(granted), ExpiresAt: dbAt(expires), Released: released}
}

// handOverHistory is a hand-over that breaks no rule: a holds fence 1 and
// writes; b waits its turn from 5 ms on (its last touch at 8 ms); a's last
// write hands r to b with fence 2 (10-12 ms); b's AcquireWait returns that
// lease at 30 ms and b writes under it; a's late write is refused; c, which
// wanted r too, is denied by b; b releases.
func handOverHistory() *builder {
	b := newBuilder()
	b.grant("a", "r", 1, 0, 1)
	b.write("a", "r", 1, 2, 3, history.OK, true)
	b.waited("b", "r", 2, 5, 30)
	b.handOver("a", "r", 1, 10, 12, history.OK, true, "b", 2)
	b.write("b", "r", 2, 31, 32, history.OK, true)
	b.refuse("a", "r", 1, 2, 40, 41)
	deny := b.op(history.Acquire, "c", "r", 0, 42, 43, history.Denied)
	deny.HeldBy, deny.HeldFence = "b", 2
	b.op(history.Release, "b", "r", 2, 50, 51, history.OK)
	return b
}

// leaseLog gives the history the lease log SQLite and MariaDB keep: a's
// grant, the hand-over's generation for b dated from b's last touch (8 ms,
// before a's lease would have expired), and b's release.
func leaseLogOf(b *builder) {
	b.in.LeaseLog = []observe.Mark{
		leaseMark("a", "r", 1, 0, 250, false),
		leaseMark("b", "r", 2, 8, 258, false),
		leaseMark("b", "r", 2, 8, 51, true),
	}
}

// observeHandOver gives the history the commits logical decoding would
// see: a's grant, its write, the hand-over's write with b's generation and
// the floor raised to it in one commit, b's write, b's release.
func observeHandOver(b *builder) {
	ev := b.in.Events
	write := func(e workload.Event) observe.Mark {
		return observe.Mark{Kind: observe.Write, Resource: e.Resource, Fence: e.Fence, Holder: e.Holder, OpID: e.OpID}
	}
	floor := func(holder string, fence int64) observe.Mark {
		return observe.Mark{Kind: observe.Floor, Resource: "r", Fence: fence, Holder: holder}
	}
	b.in.Commits = []observe.Commit{}
	b.commit(floor("a", 1), leaseMark("a", "r", 1, 0, 250, false))
	b.commit(write(ev[1]))
	b.commit(write(ev[2]), leaseMark("b", "r", 2, 8, 258, false), floor("b", 2))
	b.commit(write(ev[4]))
	b.commit(leaseMark("b", "r", 2, 8, 51, true))
	for i := range b.in.Commits {
		b.in.Commits[i].Pos, b.in.Commits[i].LSN = i, fmt.Sprintf("0/%X", i+1)
	}
}

// The three ways the database shows a history (id order alone, the lease
// log, the decoded commits), each applied to a builder.
var handOverViews = []struct {
	name  string
	apply func(b *builder)
}{
	{"id order", func(*builder) {}},
	{"lease log", leaseLogOf},
	{"observed", observeHandOver},
}

func TestHandOverPasses(t *testing.T) {
	for _, v := range handOverViews {
		b := handOverHistory()
		v.apply(b)
		r := Run(b.in)
		if r.Failed() {
			t.Errorf("%s: violations in a clean hand-over:\n%s", v.name, r.Summary(5))
		}
		if r.Linearizable != porcupine.Ok {
			t.Errorf("%s: linearizable = %s", v.name, r.Linearizable)
		}
		if r.HandOvers != 1 || r.HandedOver != 1 || r.HandedSeen != 1 {
			t.Errorf("%s: hand-overs %d, to a waiter %d, seen by it %d; want 1 each", v.name, r.HandOvers, r.HandedOver, r.HandedSeen)
		}
	}
}

// A hand-over whose outcome its holder never saw did all of it, when its
// write is in the table; nothing, when it is not (the waiter then took the
// resource with an acquisition of its own, after a's lease ran out).
func TestUnknownHandOverIsAllOrNothing(t *testing.T) {
	for _, v := range handOverViews {
		b := handOverHistory()
		h := &b.in.Ops[3]
		h.Outcome, h.Return, h.Freed, h.To, h.Granted = history.Unknown, 0, false, "", 0
		v.apply(b)
		if r := Run(b.in); r.Failed() || r.Linearizable != porcupine.Ok {
			t.Errorf("%s: an unanswered hand-over that committed: %s, violations:\n%s", v.name, r.Linearizable, r.Summary(5))
		}
	}
	b := newBuilder()
	b.grant("a", "r", 1, 0, 1)
	b.op(history.Acquire, "b", "r", 0, 5, 0, history.Unknown).Wait = true
	b.handOver("a", "r", 1, 10, 0, history.Unknown, false, "", 0)
	b.grant("c", "r", 2, 300, 301) // after a's lease expired
	b.write("c", "r", 2, 302, 303, history.OK, true)
	if r := Run(b.in); r.Failed() || r.Linearizable != porcupine.Ok {
		t.Errorf("an unanswered hand-over that did not commit: %s, violations:\n%s", r.Linearizable, r.Summary(5))
	}
	// It did not commit, so it released nothing either: a's lease is a's
	// until it expires, and a grant to b over it at 20 ms is explained by
	// nothing but b's unanswered wait.
	b = newBuilder()
	b.grant("a", "r", 1, 0, 1)
	b.op(history.Acquire, "b", "r", 0, 5, 0, history.Unknown).Wait = true
	b.handOver("a", "r", 1, 10, 0, history.Unknown, false, "", 0)
	b.raise("b", "r", 2)
	b.in.LeaseLog = []observe.Mark{leaseMark("a", "r", 1, 0, 250, false), leaseMark("b", "r", 2, 8, 258, false)}
	if r := Run(b.in); r.ByCheck()["granted-while-live"] == 0 {
		t.Errorf("a grant over a live lease whose hand-over did not commit was not reported: %v", r.ByCheck())
	}
}

// Each case breaks a hand-over's rule; one of the checks named must fire.
func TestHandOverChecksFire(t *testing.T) {
	cases := []struct {
		name   string
		checks []string
		build  func() *builder
	}{
		{"the grant to b committed while a's hand-over was refused", []string{"granted-while-live", "overlapping-holders"}, func() *builder {
			// The hand-over's grant in a transaction of its own, ahead of
			// the write: the floor it raised refuses the write.
			b := newBuilder()
			b.grant("a", "r", 1, 0, 1)
			b.waited("b", "r", 2, 5, 30)
			b.raise("b", "r", 2)
			o := b.handOver("a", "r", 1, 10, 12, history.Refused, false, "", 0)
			o.RejSeq, o.Floor = 0, 2
			o.LogFailed = true
			b.in.LeaseLog = []observe.Mark{leaseMark("a", "r", 1, 0, 250, false), leaseMark("b", "r", 2, 8, 258, false)}
			return b
		}},
		{"the grant to b survived a's rolled-back write", []string{"granted-while-live", "overlapping-holders"}, func() *builder {
			b := newBuilder()
			b.grant("a", "r", 1, 0, 1)
			b.waited("b", "r", 2, 5, 30)
			b.raise("b", "r", 2)
			o := b.handOver("a", "r", 1, 10, 12, history.Fail, false, "", 0)
			o.Cause = history.CauseAbort
			b.observe()
			b.in.Commits[1].Marks[1] = leaseMark("b", "r", 2, 8, 258, false)
			b.in.Commits[0].Marks[1] = leaseMark("a", "r", 1, 0, 250, false)
			return b
		}},
		{"the write and the grant in two transactions (decoded)", []string{"hand-over-not-atomic"}, func() *builder {
			b := handOverHistory()
			observeHandOver(b)
			cm := &b.in.Commits[2]
			b.in.Commits = slices.Insert(b.in.Commits, 3, observe.Commit{Pos: 3, LSN: "0/FF", Marks: cm.Marks[1:]})
			cm.Marks = cm.Marks[:1]
			return b
		}},
		{"the write and the grant in two transactions (id order)", []string{"hand-over-not-atomic", "granted-while-live"}, func() *builder {
			b := handOverHistory()
			leaseLogOf(b)
			// Another transaction's row between the write's and the grant's.
			b.grant("d", "s", 9, 11, 11)
			ev := b.in.Events
			b.in.Events = slices.Insert(ev[:len(ev)-1], 3, ev[len(ev)-1])
			for i := range b.in.Events {
				b.in.Events[i].ID = int64(i + 1)
			}
			return b
		}},
		{"b handed a fence not above a's", []string{"hand-over-fence", "grant-order", "linearizability"}, func() *builder {
			b := newBuilder()
			b.grant("a", "r", 5, 0, 1)
			b.waited("b", "r", 3, 5, 30)
			b.handOver("a", "r", 5, 10, 12, history.OK, true, "b", 3)
			b.write("b", "r", 3, 31, 32, history.OK, true)
			return b
		}},
		{"b's wait returned a fence no hand-over reported, over a's live lease", []string{"granted-while-live", "overlapping-holders"}, func() *builder {
			b := newBuilder()
			b.grant("a", "r", 1, 0, 1)
			b.write("a", "r", 1, 2, 3, history.OK, true)
			b.waited("b", "r", 2, 5, 30)
			b.raise("b", "r", 2)
			b.write("b", "r", 2, 31, 32, history.OK, true)
			b.in.LeaseLog = []observe.Mark{leaseMark("a", "r", 1, 0, 250, false), leaseMark("b", "r", 2, 8, 258, false)}
			return b
		}},
		{"a hand-over told of a grant the database does not hold", []string{"lost-grant"}, func() *builder {
			b := handOverHistory()
			b.in.Events = slices.Delete(b.in.Events, 3, 4) // b's raise
			return b
		}},
		{"a hand-over told it handed r to b, its transaction granted c", []string{"hand-over-mismatch", "linearizability"}, func() *builder {
			b := handOverHistory()
			observeHandOver(b)
			b.in.Commits[2].Marks[1].Holder = "c"
			return b
		}},
		{"b wrote under the handed fence before the hand-over was invoked", []string{"linearizability"}, func() *builder {
			b := newBuilder()
			b.grant("a", "r", 1, 0, 1)
			b.waited("b", "r", 2, 5, 30)
			b.write("b", "r", 2, 6, 7, history.OK, true)
			b.handOver("a", "r", 1, 10, 12, history.OK, true, "b", 2)
			return b
		}},
		{"a grant nobody asked for and no hand-over made", []string{"phantom-grant"}, func() *builder {
			b := newBuilder()
			b.grant("a", "r", 1, 0, 1)
			b.handOver("a", "r", 1, 10, 12, history.Fail, false, "", 0).Cause = history.CauseAbort
			b.raise("b", "r", 2)
			return b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(tc.build().in)
			by := r.ByCheck()
			if !slices.ContainsFunc(tc.checks, func(c string) bool { return by[c] > 0 }) {
				t.Fatalf("none of %v fired; violations %v:\n%s", tc.checks, by, r.Summary(3))
			}
			t.Logf("%v\n%s", by, r.Summary(1))
		})
	}
}
