package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
)

// ClaimReport is the verdict on the claims of several resources and of
// paths (workload.Claims), judged per file: every target (a file's path
// resource, or a plain member) on its own.
type ClaimReport struct {
	Claims, Granted, Denied int // claim operations, by outcome
	Writes, Committed       int // claim-writes invoked; rows in fg_file_writes
	Refused                 int // claim-writes the gate refused
	Targets                 int // files and members written
	SetGrants               int // fences granted to claims in the database
	Violations              []Violation
}

// claimSlack is the tolerance of the live-overlap check for the rounding of
// the database's clock (microseconds on SQLite and MariaDB).
const claimSlack = time.Millisecond

// Claims judges the claim operations of ops (history.Claim, ClaimWrite,
// ClaimRelease) against writes, fg_file_writes per target in commit order:
//
//   - claim-overlap: two granted claims of different holders whose members
//     overlap (fence.Overlaps: they cover a file in common) were live at
//     once in the database's clock: one was granted (its expiry less its
//     term) while the other was certainly live (granted, not yet expired,
//     its release not yet invoked);
//   - file-order: the committed writes to a target do not have
//     non-decreasing fences in commit order;
//   - stale-file-write: a write under fence f committed, invoked after a
//     claim covering its target with a fence above f was granted and
//     acknowledged;
//   - set-atomic: a granted claim's token does not name exactly the members
//     asked for, or two granted claims that overlap share a fence;
//   - set-grant: in the database (leases: every version of the claims'
//     lease rows, and with commits the transactions that wrote them), the
//     members granted one fence are not exactly the members of a claim of
//     that holder (all or none), or, with commits, were not granted in one
//     transaction;
//   - claim-lost-write, claim-phantom-write: an acknowledged write with no
//     row, or a row of a write that was refused, failed or never invoked.
//
// Operations whose outcome is unknown are used only as what they certainly
// are: an unknown claim grants nothing the checks rely on.
func Claims(ops []history.Op, writes []workload.FileWrite, leases []observe.Mark, commits []observe.Commit) *ClaimReport {
	r := &ClaimReport{}
	defer func() {
		n, vs := setGrants(ops, leases, commits)
		r.SetGrants, r.Violations = n, append(r.Violations, vs...)
	}()
	byOp := map[string]history.Op{}
	var granted []history.Op
	relInv := map[string]int64{} // holder+fence: the first release's invocation
	for _, o := range ops {
		switch o.Type {
		case history.Claim:
			r.Claims++
			switch o.Outcome {
			case history.OK:
				r.Granted++
				granted = append(granted, o)
			case history.Denied:
				r.Denied++
			}
		case history.ClaimWrite:
			r.Writes++
			byOp[o.Op] = o
			if o.Outcome == history.Refused {
				r.Refused++
			}
		case history.ClaimRelease:
			k := fmt.Sprintf("%s#%d", o.Holder, o.Fence)
			if v, ok := relInv[k]; !ok || o.Call < v {
				relInv[k] = o.Call
			}
		}
	}
	violate := func(check, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Check: check, Detail: fmt.Sprintf(format, args...)})
	}
	overlap := func(a, b []string) bool {
		for _, x := range a {
			for _, y := range b {
				if fence.Overlaps(x, y) {
					return true
				}
			}
		}
		return false
	}

	// set-atomic, and the claims' lives.
	type life struct{ from, to int64 }
	lives := make([]life, len(granted))
	for i, g := range granted {
		if !slices.Equal(g.Covered, g.Members) || g.Granted <= 0 {
			violate("set-atomic", "%s: claim of %v granted fence %d to a token of %v", g.Op, g.Members, g.Granted, g.Covered)
		}
		lives[i] = life{g.Expires - g.TTL, g.Expires}
		if v, ok := relInv[fmt.Sprintf("%s#%d", g.Holder, g.Granted)]; ok && v < lives[i].to {
			lives[i].to = v
		}
	}
	for i, a := range granted {
		for j := i + 1; j < len(granted); j++ {
			b := granted[j]
			if !overlap(a.Members, b.Members) {
				continue
			}
			if a.Granted == b.Granted {
				violate("set-atomic", "%s and %s: overlapping claims %v and %v share fence %d", a.Op, b.Op, a.Members, b.Members, a.Granted)
			}
			if a.Holder == b.Holder || a.Expires == 0 || b.Expires == 0 {
				continue // a holder's own claims; or no expiry known
			}
			la, lb := lives[i], lives[j]
			slack := int64(claimSlack)
			if (la.from <= lb.from && lb.from < la.to-slack) || (lb.from <= la.from && la.from < lb.to-slack) {
				violate("claim-overlap", "%s (%s, fence %d, %v) and %s (%s, fence %d, %v) were live at once", a.Op, a.Holder, a.Granted, a.Members, b.Op, b.Holder, b.Granted, b.Members)
			}
		}
	}

	// Per target, in commit order.
	rows := map[string][]workload.FileWrite{}
	for _, w := range writes {
		rows[w.Target] = append(rows[w.Target], w)
	}
	r.Committed, r.Targets = len(writes), len(rows)
	seen := map[string]bool{}
	targets := make([]string, 0, len(rows))
	for t := range rows {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		ws := rows[t]
		sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
		for i, w := range ws {
			seen[w.OpID] = true
			o, ok := byOp[w.OpID]
			switch {
			case !ok:
				violate("claim-phantom-write", "row %s#%d (fence %d) of op %s, which was never invoked", t, w.Seq, w.Fence, w.OpID)
			case o.Outcome == history.Refused || o.Outcome == history.Fail:
				violate("claim-phantom-write", "row %s#%d of %s, which returned %s", t, w.Seq, w.OpID, o.Outcome)
			case o.Target != t || o.Fence != w.Fence:
				violate("claim-phantom-write", "row %s#%d (fence %d) of %s, which wrote %s under fence %d", t, w.Seq, w.Fence, w.OpID, o.Target, o.Fence)
			}
			if i > 0 && w.Fence < ws[i-1].Fence {
				violate("file-order", "%s: write %s under fence %d committed after %s under fence %d", t, w.OpID, w.Fence, ws[i-1].OpID, ws[i-1].Fence)
			}
			if !ok {
				continue
			}
			for _, g := range granted {
				if g.Granted > w.Fence && g.Return < o.Call && covers(g.Members, t) {
					violate("stale-file-write", "%s: write %s under fence %d committed, invoked after %s (%s) was granted fence %d", t, w.OpID, w.Fence, g.Op, g.Holder, g.Granted)
					break
				}
			}
		}
	}
	for _, o := range ops {
		if o.Type == history.ClaimWrite && o.Outcome == history.OK && !seen[o.Op] {
			violate("claim-lost-write", "%s: write to %s under fence %d acknowledged, no row", o.Op, o.Target, o.Fence)
		}
	}
	return r
}

// covers reports whether a claim of members covers writes to target: a
// member is target, or a directory above it.
func covers(members []string, target string) bool {
	for _, m := range members {
		if m == target || (fence.IsDir(m) && strings.HasPrefix(target, m)) {
			return true
		}
	}
	return false
}

// Summary is one line of the report's figures.
func (r *ClaimReport) Summary() string {
	return fmt.Sprintf("claims %d (granted %d, denied %d; %d grants in the database), writes %d (committed %d, refused %d) to %d targets, violations %d",
		r.Claims, r.Granted, r.Denied, r.SetGrants, r.Writes, r.Committed, r.Refused, r.Targets, len(r.Violations))
}

// setGrants is the set-grant check. A claim's generation of a member is the
// first version of the member's lease row with its fence; the claim
// resources are those some claim operation named.
func setGrants(ops []history.Op, leases []observe.Mark, commits []observe.Commit) (int, []Violation) {
	var out []Violation
	claimed := map[string]bool{}
	asked := map[string][]string{} // holder: the member lists it claimed, joined
	byFence := map[int64]history.Op{}
	for _, o := range ops {
		if o.Type != history.Claim {
			continue
		}
		for _, m := range o.Members {
			claimed[m] = true
		}
		asked[o.Holder] = append(asked[o.Holder], strings.Join(o.Members, "\n"))
		if o.Outcome == history.OK {
			byFence[o.Granted] = o
		}
	}
	type gen struct {
		holder  string
		members []string
		commits map[int]bool
	}
	gens := map[int64]*gen{}
	first := map[string]bool{} // resource#fence seen
	add := func(m observe.Mark, pos int) {
		if m.Kind != observe.Lease || !claimed[m.Resource] || m.Fence == 0 {
			return
		}
		k := fmt.Sprintf("%s#%d", m.Resource, m.Fence)
		if first[k] {
			return
		}
		first[k] = true
		g := gens[m.Fence]
		if g == nil {
			g = &gen{holder: m.Holder, commits: map[int]bool{}}
			gens[m.Fence] = g
		}
		if g.holder != m.Holder {
			out = append(out, Violation{"set-grant", fmt.Sprintf("fence %d granted to %s and to %s", m.Fence, g.holder, m.Holder)})
		}
		g.members = append(g.members, m.Resource)
		g.commits[pos] = true
	}
	for _, m := range leases {
		add(m, -1)
	}
	for _, c := range commits {
		for _, m := range c.Marks {
			add(m, c.Pos)
		}
	}
	fences := make([]int64, 0, len(gens))
	for f := range gens {
		fences = append(fences, f)
	}
	slices.Sort(fences)
	for _, f := range fences {
		g := gens[f]
		slices.Sort(g.members)
		joined := strings.Join(g.members, "\n")
		if o, ok := byFence[f]; ok && !slices.Equal(o.Members, g.members) {
			out = append(out, Violation{"set-grant", fmt.Sprintf("fence %d: %s claimed %v, the database granted %v", f, o.Op, o.Members, g.members)})
		} else if !ok && !slices.Contains(asked[g.holder], joined) {
			out = append(out, Violation{"set-grant", fmt.Sprintf("fence %d: %s granted %v, which it never claimed as one", f, g.holder, g.members)})
		}
		if len(commits) > 0 && len(g.commits) > 1 {
			out = append(out, Violation{"set-grant", fmt.Sprintf("fence %d: %v granted in %d transactions", f, g.members, len(g.commits))})
		}
	}
	return len(gens), out
}
