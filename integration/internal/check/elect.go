package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
)

// The checks of elections (elect.Elector) and semaphores (semaphore.Semaphore).
// An election is a lease resource like any other, so every check above
// applies to its terms and to the leaders' writes (a deposed leader's write
// that committed after the next term's grant is stale-after-grant; one
// invoked after it was acknowledged, realtime-stale-write). A semaphore's
// slots ("name#i") and line ("name#line") are granted inside
// Semaphore.Acquire, unseen, so its slots are left out of the lease
// register's linearizability and judged here instead. With the lease rows'
// versions (decoded, or the lease log):
//
//   - leader-overlap: an election's terms never overlap in the database's
//     clock: each term, from its grant to the expiry of its last version
//     (a release moves the expiry to the release's instant), ends before
//     the next one is granted; and no leader believed it led (until its
//     own deadline at its grant, on the wall clock the database shares on
//     this machine, or its resignation) after the next term's grant.
//   - permits-over-n: at every grant of a slot, at most N of the
//     semaphore's slots are live in the database's clock, the new one
//     included (N is the largest any participant used).
//
// Without them, and always:
//
//   - lost-permit: every acknowledged permit is a grant in the database, of
//     a slot below N.
//   - observe-order, observe-phantom: each observer (an incarnation of an
//     agent's Elector.Observe) reports leaders in strictly increasing fence
//     order, each a grant of that election to that holder in the database.
//
// Observers that saw the same leaders over the fences both covered are
// counted in CoordReport, not judged: Observe coalesces the terms it had
// no chance to read (a stopped or cut observer misses whole terms).

// CoordReport is what the elections and the semaphore exercised.
type CoordReport struct {
	Terms          int // election grants in the database's lease versions
	Leaders        int // campaigns acknowledged leading
	LeaderWrites   int // writes under a term's token, by outcome below
	DeposedRefused int // of them, refused: the writer's term was over
	Observers      int // observer incarnations
	Observations   int // leaders reported
	// ObserverPairs are pairs of observers of one election whose fence
	// ranges overlap; IdenticalPairs those that reported the same leaders
	// over the overlap. Coalesced is how many terms in the database,
	// within an observer's range, it did not report.
	ObserverPairs, IdenticalPairs, Coalesced int
	Permits                                  int // permits acknowledged
	PermitsRefused                           int // writes under a permit refused: its slot was taken over
	MaxInUse                                 int // the most slots live at a grant, in the database's clock
	// MaxDemand is the most participants that were asking for a permit or
	// holding one at once (from a wait's invocation to its release's
	// return): above N, acquirers contended.
	MaxDemand int
}

// semaphores are the semaphores in the history, with the largest N any
// participant used.
func (c *checker) semaphores() map[string]int {
	if c.sems == nil {
		c.sems = map[string]int{}
		for _, o := range c.in.Ops {
			if o.Type == history.Permit {
				c.sems[o.Resource] = max(c.sems[o.Resource], o.Permits)
			}
		}
	}
	return c.sems
}

// semaphoreOf returns the semaphore res is a slot or the line of, or "".
func (c *checker) semaphoreOf(res string) string {
	name, rest, ok := cutLast(res, "#")
	if !ok {
		return ""
	}
	if _, ok := c.semaphores()[name]; !ok {
		return ""
	}
	if rest == "line" {
		return name
	}
	if _, err := strconv.Atoi(rest); err == nil {
		return name
	}
	return ""
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// permitAsked reports whether a grant no acquisition acknowledged is a
// semaphore's (a slot or its line), asked for by one of its holder's waits
// for a permit, whatever that wait's outcome.
func (c *checker) permitAsked(e workload.Event) bool {
	sem := c.semaphoreOf(e.Resource)
	if sem == "" {
		return false
	}
	for _, o := range c.in.Ops {
		if o.Type != history.Permit || o.Resource != sem || o.Holder != e.Holder {
			continue
		}
		// Any wait: Semaphore.Acquire may take a slot and give it back
		// unhanded (permits of a larger N live, or the count of them
		// failed) before it fails or takes another.
		return true
	}
	return false
}

func (c *checker) coordination() {
	elections := map[string]bool{}
	for _, o := range c.in.Ops {
		switch {
		case o.Type == history.Acquire && o.Elect:
			elections[o.Resource] = true
			if o.Outcome == history.OK {
				c.r.Coord.Leaders++
			}
		case o.Type == history.Permit && o.Outcome == history.OK:
			c.r.Coord.Permits++
		}
	}
	for _, o := range c.in.Ops {
		if o.Type != history.Write {
			continue
		}
		switch {
		case elections[o.Resource]:
			c.r.Coord.LeaderWrites++
			if o.Outcome == history.Refused {
				c.r.Coord.DeposedRefused++
			}
		case c.semaphoreOf(o.Resource) != "" && o.Outcome == history.Refused:
			c.r.Coord.PermitsRefused++
		}
	}
	terms := c.leaderTerms(elections)
	c.permitsInUse()
	c.r.Coord.MaxDemand = c.permitDemand()
	c.observations(elections, terms)
}

// term is one generation of an election's lease in the database.
type term struct {
	fence      int64
	holder     string
	start, end time.Time // database clock: granted, and its last version's expiry
	at         string    // where its grant is in commit order
}

// leaderTerms checks that an election's terms never overlap, in the
// database's clock and in what each leader believed at its grant, and
// returns them per election in fence order.
func (c *checker) leaderTerms(elections map[string]bool) map[string][]term {
	terms := map[string][]term{}
	for _, v := range c.leases {
		m := v.m
		if !elections[m.Resource] {
			continue
		}
		ts := terms[m.Resource]
		if n := len(ts); n > 0 && ts[n-1].fence == m.Fence && ts[n-1].holder == m.Holder {
			ts[n-1].end = m.ExpiresAt // a renewal, or the release
			continue
		}
		terms[m.Resource] = append(ts, term{fence: m.Fence, holder: m.Holder, start: m.GrantedAt, end: m.ExpiresAt, at: v.at})
	}
	for _, res := range slices.Sorted(maps.Keys(terms)) {
		ts := terms[res]
		c.r.Coord.Terms += len(ts)
		var last term // the term that ends latest so far
		for i, t := range ts {
			if i > 0 && t.start.Before(last.end) {
				c.violate("leader-overlap", "%s: %s's term (fence %d, %s) began at %v database time, %v before %s's term (fence %d) ended",
					res, t.holder, t.fence, t.at, t.start.Format(time.StampMicro), last.end.Sub(t.start), last.holder, last.fence)
			}
			if i == 0 || t.end.After(last.end) {
				last = t
			}
		}
	}
	resigned := map[string]int64{} // resource/fence → when its resignation was invoked
	for _, o := range c.in.Ops {
		if o.Type == history.Release && o.Elect {
			k := fmt.Sprintf("%s/%d", o.Resource, o.Fence)
			if r, ok := resigned[k]; !ok || o.Call < r {
				resigned[k] = o.Call
			}
		}
	}
	for _, o := range c.in.Ops {
		if o.Type != history.Acquire || !o.Elect || o.Outcome != history.OK || o.Until == 0 {
			continue
		}
		believed := o.Until
		if r, ok := resigned[fmt.Sprintf("%s/%d", o.Resource, o.Granted)]; ok {
			believed = min(believed, r) // Resign cancels the term's context before it releases
		}
		for _, t := range terms[o.Resource] {
			if t.fence > o.Granted {
				if until := time.Unix(0, believed); until.After(t.start) {
					c.violate("leader-overlap", "%s: %s believed its term (fence %d) lasted until %v, %v after %s's term (fence %d) began in the database",
						o.Resource, o.Holder, o.Granted, until.Format(time.StampMicro), until.Sub(t.start), t.holder, t.fence)
				}
				break
			}
		}
	}
	return terms
}

// permitsInUse checks that no more than N slots of a semaphore are live at
// any grant of one, and that every acknowledged permit was granted.
func (c *checker) permitsInUse() {
	sems := c.semaphores()
	if len(sems) == 0 {
		return
	}
	current := map[string]map[string]observe.Mark{} // semaphore → slot → its last version
	for _, v := range c.leases {
		m := v.m
		sem := c.semaphoreOf(m.Resource)
		if sem == "" || m.Resource == sem+"#line" {
			continue
		}
		slots := current[sem]
		if slots == nil {
			slots = map[string]observe.Mark{}
			current[sem] = slots
		}
		p, had := slots[m.Resource]
		slots[m.Resource] = m
		if had && p.Fence == m.Fence && p.Holder == m.Holder {
			continue // a renewal or the release
		}
		live := 0
		for _, s := range slots {
			if !s.Released && s.ExpiresAt.After(m.GrantedAt) {
				live++
			}
		}
		c.r.Coord.MaxInUse = max(c.r.Coord.MaxInUse, live)
		if live > sems[sem] {
			c.violate("permits-over-n", "%s: %s granted to %s (fence %d, %s) at %v database time, with %d permits live, more than N = %d",
				sem, m.Resource, m.Holder, m.Fence, v.at, m.GrantedAt.Format(time.StampMicro), live, sems[sem])
		}
	}
	for _, o := range c.in.Ops {
		if o.Type != history.Permit || o.Outcome != history.OK {
			continue
		}
		_, rest, _ := cutLast(o.Slot, "#")
		i, err := strconv.Atoi(rest)
		if c.semaphoreOf(o.Slot) != o.Resource || err != nil || i < 0 || i >= sems[o.Resource] {
			c.violate("lost-permit", "%s: %s's permit (fence %d) names slot %q, not one of 0..%d", o.Resource, o.Holder, o.Granted, o.Slot, sems[o.Resource]-1)
			continue
		}
		if !c.raised(o.Slot, o.Holder, o.Granted) {
			c.violate("lost-permit", "%s: %s's permit on %s (fence %d) was acknowledged but is not in the database", o.Resource, o.Holder, o.Slot, o.Granted)
		}
	}
}

// permitDemand returns the most permit cycles under way at once: each from
// its wait's invocation to the return of its permit's release (to the
// wait's return when no permit was acknowledged; to the release's
// invocation when it never returned).
func (c *checker) permitDemand() int {
	type edge struct {
		at    int64
		delta int
	}
	released := map[string]int64{} // slot/holder/fence → its release's end
	for _, o := range c.in.Ops {
		if o.Type == history.Release && c.semaphoreOf(o.Resource) != "" {
			released[fmt.Sprintf("%s/%s/%d", o.Resource, o.Holder, o.Fence)] = max(o.Call, o.Return)
		}
	}
	var edges []edge
	for _, o := range c.in.Ops {
		if o.Type != history.Permit {
			continue
		}
		end := max(o.Call, o.Return)
		if r, ok := released[fmt.Sprintf("%s/%s/%d", o.Slot, o.Holder, o.Granted)]; ok && o.Outcome == history.OK {
			end = max(end, r)
		}
		edges = append(edges, edge{o.Call, 1}, edge{end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(b.delta, a.delta)) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// observations checks each observer's sequence of leaders and counts how
// the observers agree.
func (c *checker) observations(elections map[string]bool, terms map[string][]term) {
	seqs := map[string]map[string][]*history.Op{} // election → observer → its reports in order
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type != history.Observe {
			continue
		}
		observer, _, _ := strings.Cut(o.Op, "#")
		if seqs[o.Resource] == nil {
			seqs[o.Resource] = map[string][]*history.Op{}
		}
		seqs[o.Resource][observer] = append(seqs[o.Resource][observer], o)
		c.r.Coord.Observations++
	}
	for _, res := range slices.Sorted(maps.Keys(seqs)) {
		byObs := seqs[res]
		c.r.Coord.Observers += len(byObs)
		names := slices.Sorted(maps.Keys(byObs))
		for _, name := range names {
			var last int64
			for _, o := range byObs[name] {
				if o.Granted <= last {
					c.violate("observe-order", "%s: observer %s reported fence %d (%s) after fence %d", res, name, o.Granted, o.HeldBy, last)
				}
				last = max(last, o.Granted)
				if !c.raised(res, o.HeldBy, o.Granted) {
					c.violate("observe-phantom", "%s: observer %s reported %s leading with fence %d, which the database never granted it", res, name, o.HeldBy, o.Granted)
				}
			}
			if seq := byObs[name]; len(seq) > 0 {
				lo, hi := seq[0].Granted, seq[len(seq)-1].Granted
				for _, t := range terms[res] {
					if t.fence > lo && t.fence < hi && !slices.ContainsFunc(seq, func(o *history.Op) bool { return o.Granted == t.fence }) {
						c.r.Coord.Coalesced++
					}
				}
			}
		}
		for i, a := range names {
			for _, b := range names[i+1:] {
				sa, sb := byObs[a], byObs[b]
				lo := max(sa[0].Granted, sb[0].Granted)
				hi := min(sa[len(sa)-1].Granted, sb[len(sb)-1].Granted)
				if lo > hi {
					continue
				}
				c.r.Coord.ObserverPairs++
				within := func(s []*history.Op) string {
					var b strings.Builder
					for _, o := range s {
						if o.Granted >= lo && o.Granted <= hi {
							fmt.Fprintf(&b, "%d:%s ", o.Granted, o.HeldBy)
						}
					}
					return b.String()
				}
				if within(sa) == within(sb) {
					c.r.Coord.IdenticalPairs++
				}
			}
		}
	}
}
