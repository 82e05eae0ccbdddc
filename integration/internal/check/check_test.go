package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/sqlstore"
)

// builder writes small histories by hand. Times are in milliseconds.
type builder struct {
	in  Input
	seq map[string]int
	id  int64
}

func newBuilder() *builder {
	return &builder{seq: map[string]int{}, in: Input{TTL: 250 * time.Millisecond}}
}

func ms(v int64) int64 { return v * int64(time.Millisecond) }

func (b *builder) op(typ, holder, res string, fence int64, call, ret int64, out history.Outcome) *history.Op {
	b.seq[holder]++
	o := history.Op{Call: ms(call)}
	o.Op = fmt.Sprintf("%s#%d", holder, b.seq[holder])
	o.Type, o.Holder, o.Agent, o.Proc, o.Resource, o.Fence = typ, holder, holder, holder, res, fence
	o.Outcome = out
	if ret > 0 {
		o.Return = ms(ret)
	} else {
		o.Outcome = history.Unknown
	}
	b.in.Ops = append(b.in.Ops, o)
	return &b.in.Ops[len(b.in.Ops)-1]
}

// grant is an acknowledged acquisition of fence, with its floor raise.
func (b *builder) grant(holder, res string, fence int64, call, ret int64) {
	o := b.op(history.Acquire, holder, res, 0, call, ret, history.OK)
	o.Granted, o.TTL, o.Request, o.Attempts = fence, int64(250*time.Millisecond), o.Op, 1
	b.raise(holder, res, fence)
}

func (b *builder) raise(holder, res string, fence int64) {
	b.id++
	b.in.Events = append(b.in.Events, workload.Event{ID: b.id, Kind: "raise", Resource: res, Fence: fence, Holder: holder})
}

// write is a write op; committed adds its row.
func (b *builder) write(holder, res string, fence int64, call, ret int64, out history.Outcome, committed bool) *history.Op {
	o := b.op(history.Write, holder, res, fence, call, ret, out)
	if committed {
		b.id++
		b.in.Events = append(b.in.Events, workload.Event{ID: b.id, Kind: "write", Resource: res, Fence: fence, Holder: holder, Agent: holder, OpID: o.Op})
	}
	return o
}

// observe gives the history an observer that saw every event commit in id
// order: each raise as a floor raise and a lease granted when its acquisition
// returned, each write row as a write.
func (b *builder) observe() {
	b.in.Commits = []observe.Commit{}
	for _, e := range b.in.Events {
		cm := observe.Commit{Pos: len(b.in.Commits), LSN: fmt.Sprintf("0/%X", e.ID)}
		switch e.Kind {
		case "write":
			cm.Marks = []observe.Mark{{Kind: observe.Write, Resource: e.Resource, Fence: e.Fence, Holder: e.Holder, OpID: e.OpID}}
		case "raise":
			l := observe.Mark{Kind: observe.Lease, Resource: e.Resource, Fence: e.Fence, Holder: e.Holder}
			for _, o := range b.in.Ops {
				if o.Type == history.Acquire && o.Granted == e.Fence {
					l.GrantedAt = time.Unix(0, o.Return)
					l.ExpiresAt = l.GrantedAt.Add(b.in.TTL)
				}
			}
			cm.Marks = []observe.Mark{{Kind: observe.Floor, Resource: e.Resource, Fence: e.Fence, Holder: e.Holder}, l}
		}
		b.in.Commits = append(b.in.Commits, cm)
	}
}

// commit adds an observed commit of marks.
func (b *builder) commit(marks ...observe.Mark) {
	b.in.Commits = append(b.in.Commits, observe.Commit{Pos: len(b.in.Commits), LSN: "0/FFFF", Marks: marks})
}

func (b *builder) refuse(holder, res string, fence, floor int64, call, ret int64) {
	seq := int64(len(b.in.Rejections) + 1)
	o := b.write(holder, res, fence, call, ret, history.Refused, false)
	o.RejSeq, o.Floor = seq, floor
	b.in.Rejections = append(b.in.Rejections, sqlstore.Rejection{Seq: seq, Resource: res, Fence: fence, Holder: holder, Floor: floor})
}

// clean is a history that breaks no rule: a holds fence 1, stalls, b takes
// over with fence 2, a's late write is refused.
func clean() *builder {
	b := newBuilder()
	b.grant("a", "r", 1, 0, 1)
	b.write("a", "r", 1, 2, 3, history.OK, true)
	b.grant("b", "r", 2, 300, 301)
	b.write("b", "r", 2, 302, 303, history.OK, true)
	b.refuse("a", "r", 1, 2, 310, 311)
	b.op(history.Renew, "a", "r", 1, 312, 313, history.Expired)
	b.op(history.Release, "b", "r", 2, 320, 321, history.OK)
	return b
}

func TestCleanHistoryPasses(t *testing.T) {
	for _, observed := range []bool{false, true} {
		b := clean()
		if observed {
			b.observe()
		}
		r := Run(b.in)
		if r.Failed() {
			t.Fatalf("observed %v: violations in a clean history:\n%s", observed, r.Summary(5))
		}
		if r.Linearizable != porcupine.Ok {
			t.Fatalf("observed %v: linearizable = %s", observed, r.Linearizable)
		}
	}
}

// The hole the observer closes: a stale write took its id before a grant
// (as it does when the floor row's lock is missing and the write stalls
// between its INSERT and its COMMIT) and committed after it. Id order
// shows nothing wrong; the decoded commit order shows the stale write.
func TestObserverCatchesWhatIDOrderMisses(t *testing.T) {
	b := clean()
	b.grant("c", "s", 5, 400, 401)
	b.write("c", "s", 5, 402, 0, history.Unknown, true) // id below the next grant's
	b.grant("d", "s", 6, 700, 701)
	if r := Run(b.in); r.Failed() {
		t.Fatalf("id order: violations:\n%s", r.Summary(5))
	}
	b.observe()
	n := len(b.in.Commits)
	b.in.Commits[n-2], b.in.Commits[n-1] = b.in.Commits[n-1], b.in.Commits[n-2] // the write's commit came last
	r := Run(b.in)
	if r.ByCheck()["stale-after-grant"] != 1 {
		t.Fatalf("the observer did not report the stale write; violations:\n%s", r.Summary(5))
	}
	t.Log(r.Summary(1))
}

// Each case breaks one rule; the checker must name it.
func TestEachCheckFires(t *testing.T) {
	cases := []struct {
		check string
		edit  func(b *builder)
	}{
		{"observer-mismatch", func(b *builder) {
			b.observe()
			b.commit(observe.Mark{Kind: observe.Write, Resource: "r", Fence: 2, Holder: "b", OpID: "b#9"})
		}},
		{"observer-mismatch", func(b *builder) {
			b.write("b", "r", 2, 330, 331, history.OK, true)
			b.observe()
			b.in.Commits = b.in.Commits[:len(b.in.Commits)-1]
		}},
		{"stale-after-grant", func(b *builder) {
			b.observe()
			b.commit(observe.Mark{Kind: observe.Floor, Resource: "r", Fence: 3, Holder: "c"})
			b.write("b", "r", 2, 330, 331, history.OK, true)
			b.commit(observe.Mark{Kind: observe.Write, Resource: "r", Fence: 2, Holder: "b", OpID: b.in.Events[len(b.in.Events)-1].OpID})
		}},
		{"granted-while-live", func(b *builder) {
			b.observe()
			last := b.in.Commits[2].Marks[1] // b's lease, fence 2, until 551
			l := observe.Mark{Kind: observe.Lease, Resource: "r", Fence: 3, Holder: "c", GrantedAt: last.ExpiresAt.Add(-time.Millisecond)}
			l.ExpiresAt = l.GrantedAt.Add(b.in.TTL)
			b.commit(l)
		}},
		{"renewed-expired", func(b *builder) {
			b.observe()
			last := b.in.Commits[2].Marks[1]
			last.ExpiresAt = last.ExpiresAt.Add(b.in.TTL + time.Millisecond) // renewed 1ms after it expired
			b.commit(last)
		}},
		{"renewed-expired", func(b *builder) {
			// SQLite: the lease log, in id order, shows b's lease renewed
			// 1ms after it expired.
			l := observe.Mark{Kind: observe.Lease, Resource: "r", Fence: 2, Holder: "b", GrantedAt: time.Unix(0, ms(301))}
			l.ExpiresAt = l.GrantedAt.Add(b.in.TTL)
			r := l
			r.ExpiresAt = l.ExpiresAt.Add(b.in.TTL + time.Millisecond)
			b.in.LeaseLog = []observe.Mark{l, r}
		}},
		{"lost-renewal", func(b *builder) {
			b.in.LeaseLog = []observe.Mark{}
			b.op(history.Renew, "b", "r", 2, 304, 305, history.OK).TTL = int64(250 * time.Millisecond)
		}},
		{"lost-renewal", func(b *builder) {
			b.observe()
			b.op(history.Renew, "b", "r", 2, 304, 305, history.OK).TTL = int64(250 * time.Millisecond)
		}},
		{"lost-write", func(b *builder) {
			b.write("b", "r", 2, 330, 331, history.OK, false)
		}},
		{"phantom-write", func(b *builder) {
			b.write("b", "r", 2, 330, 331, history.Fail, true)
		}},
		{"phantom-write", func(b *builder) {
			b.id++
			b.in.Events = append(b.in.Events, workload.Event{ID: b.id, Kind: "write", Resource: "r", Fence: 2, Holder: "b", OpID: "nobody#1"})
		}},
		{"write-mismatch", func(b *builder) {
			o := b.write("b", "r", 2, 330, 331, history.OK, true)
			b.in.Events[len(b.in.Events)-1].Fence = 3
			_ = o
		}},
		{"fence-order", func(b *builder) {
			b.write("a", "r", 1, 330, 331, history.Unknown, true) // fence 1 after fence 2's write
		}},
		{"stale-after-grant", func(b *builder) {
			b.grant("c", "s", 5, 400, 401)
			b.grant("d", "s", 6, 700, 701)
			b.write("c", "s", 5, 402, 0, history.Unknown, true) // committed after the grant of 6
		}},
		{"ungranted-fence", func(b *builder) {
			b.write("b", "r", 9, 330, 331, history.OK, true)
		}},
		{"realtime-stale-write", func(b *builder) {
			// a's write invoked after b's grant was acknowledged, and committed.
			b.grant("c", "s", 5, 400, 401)
			b.write("c", "s", 5, 402, 0, history.Unknown, false)
			b.op(history.Acquire, "d", "s", 0, 700, 701, history.OK).Granted = 6
			b.write("c", "s", 5, 710, 711, history.OK, true)
			b.raise("d", "s", 6)
		}},
		{"realtime-stale-write", func(b *builder) {
			// d's grant went unanswered, but its write under fence 6 was
			// acknowledged before c's write under 5 was invoked.
			b.grant("c", "s", 5, 400, 401)
			b.op(history.Acquire, "d", "s", 0, 700, 0, history.Unknown)
			b.raise("d", "s", 6)
			b.write("d", "s", 6, 702, 703, history.OK, true)
			b.write("c", "s", 5, 710, 711, history.OK, true)
		}},
		{"stale-not-refused", func(b *builder) {
			// a's write under 1, after b's grant of 2 was acknowledged,
			// failed with an error that names no fault: a refusal misread.
			o := b.write("a", "r", 1, 330, 331, history.Fail, false)
			o.Err, o.Cause = "fencegate: commit: not admitted", history.CauseOther
		}},
		{"stale-not-refused", func(b *builder) {
			o := b.admit("a", "r", 1, 330, 331, history.Fail, false)
			o.Err, o.Cause = "fencegate: admit: not admitted", history.CauseOther
		}},
		{"released-superseded", func(b *builder) {
			// a's late release of fence 1, after b's grant of 2 was
			// acknowledged, reported as freeing a lease.
			b.op(history.Release, "a", "r", 1, 330, 331, history.OK)
		}},
		{"misread-refusal", func(b *builder) {
			o := b.write("a", "r", 1, 330, 331, history.Fail, false)
			o.Err, o.Code, o.Cause = "ERROR: stale fence (SQLSTATE FG001)", "FG001", history.CauseServer
		}},
		{"fence-not-advanced", func(b *builder) {
			// The old primary granted fence 12, never replicated; the
			// advance on the promoted standby reached only 10.
			b.in.AdvancedTo = 10
			b.in.OldPrimary = []observe.Commit{{LSN: "0/10", Marks: []observe.Mark{{Kind: observe.Lease, Resource: "s", Fence: 12, Holder: "c"}}}}
		}},
		{"duplicate-fence", func(b *builder) {
			o := b.op(history.Acquire, "c", "s", 0, 400, 401, history.OK)
			o.Granted, o.Request = 2, "other"
		}},
		{"lost-grant", func(b *builder) {
			o := b.op(history.Acquire, "c", "s", 0, 400, 401, history.OK)
			o.Granted, o.Request = 7, "c1"
		}},
		{"phantom-grant", func(b *builder) {
			b.raise("nobody", "s", 8)
		}},
		{"spent-request-granted", func(b *builder) {
			// c abandons its request, sends it anyway, and is granted.
			b.op(history.Abandon, "c", "s", 0, 400, 401, history.OK).Request = "c/late"
			o := b.op(history.Acquire, "c", "s", 0, 402, 403, history.OK)
			o.Granted, o.Request, o.Attempts = 7, "c/late", 1
			b.raise("c", "s", 7)
		}},
		{"grant-order", func(b *builder) {
			b.grant("c", "r", 1, 700, 701) // fence 1 again, after 2
		}},
		{"unlogged-refusal", func(b *builder) {
			o := b.write("b", "r", 1, 330, 331, history.Refused, false)
			o.RejSeq = 99
		}},
		{"unlogged-refusal", func(b *builder) {
			// Refused with no log sequence number, and no word that the log failed.
			b.write("b", "r", 1, 330, 331, history.Refused, false)
		}},
		{"phantom-rejection", func(b *builder) {
			b.in.Rejections = append(b.in.Rejections, sqlstore.Rejection{Seq: 50, Resource: "r", Fence: 1, Holder: "z", Floor: 2})
		}},
		{"refusal-not-stale", func(b *builder) {
			b.refuse("b", "r", 2, 2, 330, 331)
		}},
		{"overlapping-holders", func(b *builder) {
			// c's lease (250ms from 400) still runs when d's grant is acknowledged.
			b.grant("c", "s", 5, 400, 401)
			b.grant("d", "s", 6, 500, 501)
		}},
		{"overlapping-holders", func(b *builder) {
			// c's term from its invocation (400 + 250ms) ends before d's grant,
			// but c itself said it held fence 5 until 800 (its send instant
			// was read after the invocation): that belief is what counts.
			b.grant("c", "s", 5, 400, 401)
			b.in.Ops[len(b.in.Ops)-1].Until = ms(800)
			b.grant("d", "s", 6, 700, 701)
		}},
		{"deadline-after-expiry", func(b *builder) {
			// c's deadline was anchored after the database stamped its grant:
			// it ends 3ms after the coordinator's expiry.
			b.grant("c", "s", 5, 400, 401)
			o := &b.in.Ops[len(b.in.Ops)-1]
			o.Expires, o.Until = ms(650), ms(653)
		}},
		{"renewal-shortened", func(b *builder) {
			// c's renewal reports an expiry 100ms before its grant's.
			b.grant("c", "s", 5, 400, 401)
			b.in.Ops[len(b.in.Ops)-1].Expires = ms(651)
			o := b.op(history.Renew, "c", "s", 5, 500, 501, history.OK)
			o.TTL, o.Expires = int64(50*time.Millisecond), ms(551)
		}},
		{"renewal-shortened", func(b *builder) {
			// The lease versions: b's lease (fence 2, until 551) renewed to
			// expire at 541.
			b.observe()
			last := b.in.Commits[2].Marks[1]
			last.ExpiresAt = last.ExpiresAt.Add(-10 * time.Millisecond)
			b.commit(last)
			b.op(history.Renew, "b", "r", 2, 304, 305, history.OK).TTL = int64(250 * time.Millisecond)
		}},
		{"renewed-after-expiry", func(b *builder) {
			// c's lease (250ms from 401 at the latest) renewed at 700.
			b.grant("c", "s", 5, 400, 401)
			b.op(history.Renew, "c", "s", 5, 700, 701, history.OK).TTL = int64(250 * time.Millisecond)
		}},
		{"denied-by-expired", func(b *builder) {
			b.grant("c", "s", 5, 400, 401)
			o := b.op(history.Acquire, "d", "s", 0, 700, 701, history.Denied)
			o.HeldBy, o.HeldFence = "c", 5
		}},
		{"linearizability", func(b *builder) {
			// a renews fence 1 after b's fence 2 was granted.
			b.op(history.Renew, "a", "r", 1, 400, 401, history.OK).TTL = int64(250 * time.Millisecond)
		}},
		{"linearizability", func(b *builder) {
			// A denial that names a released lease.
			o := b.op(history.Acquire, "c", "r", 0, 400, 401, history.Denied)
			o.HeldBy, o.HeldFence = "b", 2
		}},
		{"linearizability", func(b *builder) {
			// A refusal of the current fence.
			b.refuse("b", "r", 2, 3, 330, 331)
		}},
		{"clock-stepped-back", func(b *builder) {
			// The wall clock stepped back between a write's call and its
			// return: porcupine could not order it (its picture panicked).
			b.write("b", "r", 2, 331, 330, history.OK, true)
		}},
	}
	for _, c := range cases {
		t.Run(c.check, func(t *testing.T) {
			b := clean()
			c.edit(b)
			r := Run(b.in)
			if r.ByCheck()[c.check] == 0 {
				t.Fatalf("%s did not fire; violations:\n%s", c.check, r.Summary(5))
			}
		})
	}
}

// Fences the old primary granted below the advanced fence pass; Grants
// counts a lease's renewals and release as one grant.
func TestAdvancedAboveTheOldPrimary(t *testing.T) {
	b := clean()
	b.in.AdvancedTo = 13
	l := observe.Mark{Kind: observe.Lease, Resource: "s", Fence: 12, Holder: "c"}
	b.in.OldPrimary = []observe.Commit{{LSN: "0/10", Marks: []observe.Mark{l}}, {LSN: "0/11", Marks: []observe.Mark{l}}}
	if r := Run(b.in); r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
	if n := Grants(b.in.OldPrimary); n != 1 {
		t.Fatalf("Grants = %d, want 1", n)
	}
}

// A stale write may fail for a fault its error names, and a write that
// was not stale may fail for any reason: neither is a misread refusal.
func TestStaleFailureForAFaultPasses(t *testing.T) {
	b := clean()
	for _, cause := range []string{history.CauseConn, history.CauseBusy, history.CauseServer} {
		o := b.write("a", "r", 1, 330, 331, history.Fail, false)
		o.Err, o.Cause = "a fault", cause
	}
	o := b.write("b", "r", 2, 332, 333, history.Fail, false) // the current fence
	o.Err, o.Cause = "?", history.CauseOther
	o = b.write("a", "r", 1, 250, 251, history.Fail, false) // before b's grant returned
	o.Err, o.Cause = "?", history.CauseOther
	if r := Run(b.in); r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
}

// admit is gate.Admit of a fence from outside the coordinator; admitted adds
// its floor raise.
func (b *builder) admit(holder, res string, fence int64, call, ret int64, out history.Outcome, admitted bool) *history.Op {
	o := b.op(history.Admit, holder, res, fence, call, ret, out)
	if admitted {
		b.raise(holder, res, fence)
	}
	return o
}

// Fences admitted with gate.Admit are grants: a clean history of them
// passes, and a write under an older one committed after a newer one was
// admitted is stale, in id order and in observed order.
func TestAdmittedFencesAreGrants(t *testing.T) {
	const x = 1_000_000_000
	ext := func() *builder {
		b := clean()
		b.admit("c", "ext", x+1, 400, 401, history.OK, true)
		b.write("c", "ext", x+1, 402, 403, history.OK, true)
		b.admit("d", "ext", x+2, 500, 501, history.OK, true)
		b.refuse("c", "ext", x+1, x+2, 510, 511)
		b.write("d", "ext", x+2, 520, 521, history.OK, true)
		o := b.admit("c", "ext", x+1, 530, 531, history.Refused, false) // a late reassignment, refused
		o.RejSeq, o.Floor = int64(len(b.in.Rejections)+1), x+2
		b.in.Rejections = append(b.in.Rejections, sqlstore.Rejection{Seq: o.RejSeq, Resource: "ext", Fence: x + 1, Holder: "c", Floor: x + 2})
		b.admit("e", "ext", x+3, 540, 0, history.Unknown, true) // reply lost, admitted
		b.write("e", "ext", x+3, 550, 551, history.OK, true)
		return b
	}
	for _, observed := range []bool{false, true} {
		b := ext()
		if observed {
			b.observe()
		}
		if r := Run(b.in); r.Failed() {
			t.Fatalf("observed %v: violations in a clean history:\n%s", observed, r.Summary(5))
		}
		b = ext()
		b.write("d", "ext", x+2, 560, 561, history.OK, true) // after x+3 was admitted
		if observed {
			b.observe()
		}
		if r := Run(b.in); r.ByCheck()["stale-after-grant"] == 0 {
			t.Fatalf("observed %v: a stale write after an admission was not reported:\n%s", observed, r.Summary(5))
		}
	}
	b := ext()
	b.admit("f", "ext", x+4, 600, 601, history.OK, false)
	if r := Run(b.in); r.ByCheck()["lost-grant"] == 0 {
		t.Fatalf("a lost admission was not reported:\n%s", r.Summary(5))
	}
}

// An acquisition whose reply was lost, but whose grant is in the database,
// enters the model as a grant: writes under it must be accepted.
func TestUnansweredGrantIsAGrant(t *testing.T) {
	b := clean()
	o := b.op(history.Acquire, "c", "r", 0, 400, 0, history.Unknown)
	o.Request = "lost"
	b.raise("c", "r", 3)
	b.refuse("b", "r", 2, 3, 800, 801)
	r := Run(b.in)
	if r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
}

// A release whose reply was lost may or may not have freed the lease.
func TestUnansweredReleaseBranches(t *testing.T) {
	b := newBuilder()
	b.grant("a", "r", 1, 0, 1)
	b.op(history.Release, "a", "r", 1, 10, 0, history.Unknown)
	d := b.op(history.Acquire, "b", "r", 0, 20, 21, history.Denied) // not released (yet)
	d.HeldBy, d.HeldFence = "a", 1
	b.grant("c", "r", 2, 400, 401)
	if r := Run(b.in); r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
}

// A deadline that ends at the coordinator's expiry, or within the margin of
// the clocks' reading, breaks no rule.
func TestDeadlineAtExpiryPasses(t *testing.T) {
	b := clean()
	b.grant("c", "s", 5, 400, 401)
	o := &b.in.Ops[len(b.in.Ops)-1]
	o.Expires, o.Until = ms(650), ms(650)+int64(deadlineMargin)
	if r := Run(b.in); r.ByCheck()["deadline-after-expiry"] != 0 {
		t.Fatalf("a deadline at the expiry was reported:\n%s", r.Summary(5))
	}
}

// A grant the old primary showed before its standby had it (a cancelled
// synchronous commit), then lost in the failover, can be seen only by
// reads: a refusal under its floor and a denial naming it. Without the
// lost commits such reads are not linearizable; with them they are left
// out of the model, and counted.
func TestFailoverLostGrantReads(t *testing.T) {
	history1 := func() *builder {
		b := newBuilder()
		b.grant("a", "r", 1, 0, 1)
		b.write("a", "r", 1, 2, 3, history.OK, true)
		b.op(history.Acquire, "b", "r", 0, 5, 0, history.Unknown) // granted 2 on the old primary, lost
		b.refuse("a", "r", 1, 2, 10, 20)
		b.in.Ops[len(b.in.Ops)-1].FloorBy = "b"
		d := b.op(history.Acquire, "c", "r", 0, 12, 13, history.Denied)
		d.HeldBy, d.HeldFence = "b", 2
		b.grant("c", "r", 3, 300, 301) // on the promoted standby
		b.write("c", "r", 3, 302, 303, history.OK, true)
		return b
	}
	b := history1()
	if r := Run(b.in); r.ByCheck()["linearizability"] == 0 {
		t.Fatalf("reads of a grant no database kept passed without the lost commits: %v\n%s", r.ByCheck(), r.Summary(3))
	}
	b = history1()
	b.in.Lost = []observe.Commit{{LSN: "0/FF", Marks: []observe.Mark{{Kind: observe.Lease, Resource: "r", Holder: "b", Fence: 2}}}}
	r := Run(b.in)
	if r.Failed() || r.LostReads != 2 {
		t.Fatalf("with the lost commits: %d reads left out (want 2), violations:\n%s", r.LostReads, r.Summary(3))
	}
}

// A spent request's sending refused, and a sending that raced the abandon
// (invoked before the abandon returned) granted: neither breaks the rule.
func TestSpentRequestRefusedPasses(t *testing.T) {
	b := clean()
	b.op(history.Abandon, "c", "s", 0, 400, 401, history.OK).Request = "c/late"
	b.op(history.Acquire, "c", "s", 0, 402, 403, history.Fail).Request = "c/late"
	b.op(history.Abandon, "d", "t", 0, 500, 503, history.OK).Request = "d/raced"
	o := b.op(history.Acquire, "d", "t", 0, 502, 504, history.OK)
	o.Granted, o.Request, o.Attempts = 7, "d/raced", 1
	b.raise("d", "t", 7)
	if r := Run(b.in); r.Failed() {
		t.Fatalf("violations:\n%s", r.Summary(5))
	}
}
