package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
)

// claimHistory builds claim histories by hand; times are in milliseconds.
type claimHistory struct {
	ops     []history.Op
	writes  []workload.FileWrite
	seq     map[string]int64
	leases  []observe.Mark
	commits []observe.Commit
}

// granted records the grant of fence to holder of members in the
// database: one lease version per member, in one transaction.
func (h *claimHistory) granted(holder string, fence int64, members ...string) {
	c := observe.Commit{Pos: len(h.commits)}
	for _, m := range members {
		c.Marks = append(c.Marks, observe.Mark{Kind: observe.Lease, Resource: m, Fence: fence, Holder: holder})
	}
	h.commits = append(h.commits, c)
}

const claimTTL = 100 * time.Millisecond

// claim is a granted claim of members, acknowledged at ret, granted at
// granted in the database's clock, released (invoked) at rel unless 0.
func (h *claimHistory) claim(holder string, fence, call, granted, ret, rel int64, members ...string) *history.Op {
	o := history.Op{Record: history.Record{Op: fmt.Sprintf("%s#c%d", holder, fence), Type: history.Claim, Holder: holder, Members: members,
		Outcome: history.OK, Granted: fence, Covered: members, TTL: int64(claimTTL), Expires: ms(granted) + int64(claimTTL)}, Call: ms(call), Return: ms(ret)}
	i := len(h.ops)
	h.ops = append(h.ops, o)
	h.granted(holder, fence, members...)
	if rel > 0 {
		h.ops = append(h.ops, history.Op{Record: history.Record{Op: o.Op + "/rel", Type: history.ClaimRelease, Holder: holder, Members: members, Fence: fence, Outcome: history.OK}, Call: ms(rel), Return: ms(rel + 1)})
	}
	return &h.ops[i] // valid until the next append
}

// write is a write under fence to target invoked at call with outcome out;
// committed ones get the target's next row.
func (h *claimHistory) write(holder string, fence int64, target string, call int64, out history.Outcome, committed bool) {
	id := fmt.Sprintf("%s#w%d", holder, len(h.ops))
	h.ops = append(h.ops, history.Op{Record: history.Record{Op: id, Type: history.ClaimWrite, Holder: holder, Fence: fence, Target: target, Outcome: out}, Call: ms(call), Return: ms(call + 1)})
	if committed {
		if h.seq == nil {
			h.seq = map[string]int64{}
		}
		h.seq[target]++
		h.writes = append(h.writes, workload.FileWrite{Target: target, Seq: h.seq[target], Fence: fence, OpID: id})
	}
}

func claimChecks(r *ClaimReport) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Check]++
	}
	return m
}

// good: a on d/ then b on d/a after a released; c on the sibling d/b
// meanwhile; a set claim alongside.
func goodClaims() *claimHistory {
	h := &claimHistory{}
	h.claim("a", 1, 0, 1, 2, 50, "path:d/")
	h.write("a", 1, "path:d/a", 10, history.OK, true)
	h.write("a", 1, "path:d/b", 20, history.OK, true)
	h.claim("b", 2, 55, 56, 57, 90, "path:d/a")
	h.claim("c", 3, 60, 61, 62, 95, "path:d/b", "path:e/x")
	h.write("b", 2, "path:d/a", 70, history.OK, true)
	h.write("c", 3, "path:d/b", 71, history.OK, true)
	h.write("c", 3, "path:e/x", 72, history.OK, true)
	h.claim("d", 4, 0, 1, 2, 40, "r1", "r2", "r3")
	h.write("d", 4, "r2", 5, history.OK, true)
	// a stale write refused: nothing committed
	h.write("a", 1, "path:d/a", 80, history.Refused, false)
	return h
}

func TestClaimsClean(t *testing.T) {
	h := goodClaims()
	r := Claims(h.ops, h.writes, h.leases, h.commits)
	if len(r.Violations) > 0 {
		t.Fatalf("violations on a good history: %v", r.Violations)
	}
	if r.Granted != 4 || r.Committed != 6 || r.Refused != 1 || r.Targets != 4 || r.SetGrants != 4 {
		t.Fatalf("figures: %s", r.Summary())
	}
}

func TestClaimsFire(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		also        string // a check that must fire too: the same fault seen twice
		edit        func(h *claimHistory)
	}{
		{"directory live while a file below it is granted", "claim-overlap", "", func(h *claimHistory) {
			h.claim("x", 9, 20, 21, 22, 30, "path:d/c") // a holds d/ until 50
		}},
		{"overlapping sets live at once", "claim-overlap", "", func(h *claimHistory) {
			h.claim("x", 9, 10, 11, 12, 30, "r3", "r9") // d holds r1..r3 until 40
		}},
		{"a file's writes out of fence order", "file-order", "", func(h *claimHistory) {
			// invoked before c's claim of e/x, committed after c's write
			h.write("q", 2, "path:e/x", 50, history.Unknown, true)
		}},
		{"a write committed after a higher claim of its file was granted", "stale-file-write", "", func(h *claimHistory) {
			h.claim("y", 10, 200, 201, 202, 0, "path:e/")
			h.write("c", 3, "path:e/x", 210, history.OK, true)
		}},
		{"a set granted to a token of other members", "set-atomic", "", func(h *claimHistory) {
			o := h.claim("z", 11, 300, 301, 302, 310, "s1", "s2")
			o.Covered = []string{"s1"}
		}},
		{"two overlapping claims under one fence", "set-atomic", "set-grant", func(h *claimHistory) {
			h.claim("z", 4, 300, 301, 302, 310, "r1", "s2") // d's fence
			h.commits = h.commits[:len(h.commits)-1]        // as the history alone says
		}},
		{"a set granted in part", "set-grant", "", func(h *claimHistory) {
			h.commits[len(h.commits)-1].Marks = h.commits[len(h.commits)-1].Marks[:1]
		}},
		{"a set granted in two transactions", "set-grant", "", func(h *claimHistory) {
			h.claim("z", 12, 300, 301, 302, 310, "s1", "s2")
			c := &h.commits[len(h.commits)-1]
			h.commits = append(h.commits, observe.Commit{Pos: len(h.commits), Marks: c.Marks[1:]})
			c.Marks = c.Marks[:1]
		}},
		{"a grant of members nobody claimed as one", "set-grant", "", func(h *claimHistory) {
			h.ops = append(h.ops, history.Op{Record: history.Record{Op: "u#1", Type: history.Claim, Holder: "u", Members: []string{"s1", "s2"}, Outcome: history.Unknown}})
			h.granted("u", 13, "s1")
		}},
		{"an acknowledged write with no row", "claim-lost-write", "", func(h *claimHistory) {
			h.write("b", 2, "path:d/a", 75, history.OK, false)
		}},
		{"a refused write's row", "claim-phantom-write", "", func(h *claimHistory) {
			h.write("b", 2, "path:d/a", 75, history.Refused, true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodClaims()
			tc.edit(h)
			got := claimChecks(Claims(h.ops, h.writes, h.leases, h.commits))
			delete(got, tc.also)
			if got[tc.check] == 0 || len(got) != 1 {
				t.Fatalf("want %s alone, got %v", tc.check, got)
			}
		})
	}
}

// Siblings do not overlap: claims of d/a and d/b live at once are fine,
// and so are their writes under unrelated fences.
func TestClaimsSiblings(t *testing.T) {
	h := &claimHistory{}
	h.claim("a", 5, 0, 1, 2, 50, "path:d/a")
	h.claim("b", 6, 0, 3, 4, 50, "path:d/b")
	h.write("b", 6, "path:d/b", 10, history.OK, true)
	h.write("a", 5, "path:d/a", 11, history.OK, true)
	if r := Claims(h.ops, h.writes, h.leases, h.commits); len(r.Violations) > 0 {
		t.Fatalf("siblings judged overlapping: %v", r.Violations)
	}
}
