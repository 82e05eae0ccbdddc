// Package check judges a history after the fact: what the agents observed
// (history.Op, client side) against what the database kept (the fg_events
// table and the rejection log), after every kill, cut and restart.
//
// Commit order is what logical decoding observed when the history has it
// (Input.Commits, Postgres): the server's own order of commits, whatever
// locks were or were not taken. A grant is then a fencegate_lease version
// with a new fence, or a floor raise. Without an observer (SQLite, whose
// single writer makes id order commit order) commit order is the order of
// fg_events ids, and grants are the raise rows. Grants are the
// coordinator's and, on resources whose fences come from outside it, the
// fences admitted with gate.Admit.
//
// The checks, each named in the violations it reports:
//
//   - lost-write: a write the client saw committed is not in the table.
//   - phantom-write: a row no client invoked, or whose write the client saw
//     refused or certainly failed; write-mismatch: a row that differs from
//     its invocation.
//   - fence-order: per resource, committed writes in commit order carry
//     non-decreasing fences.
//   - stale-after-grant: per resource, no write under fence N committed after
//     a grant above N committed.
//   - ungranted-fence: every committed write's fence was granted to its
//     writer for that resource.
//   - realtime-stale-write: no write under N committed if it was invoked after
//     a fence above N had been acknowledged to some client, granted,
//     admitted or written under (real time, from the wall clock every
//     process on the machine shares).
//   - released-superseded: a release of fence N invoked after a grant above
//     N on its resource was acknowledged frees nothing (the lease row is on
//     the newer fence).
//   - stale-not-refused, misread-refusal: such a stale write (or admission)
//     that failed is a refusal: it may fail for a fault its error names
//     (the connection, the server, a lock conflict), never with an error
//     that names none; and no error carrying a refusal's SQLSTATE (FG001,
//     FG002) is reported as anything but a refusal. Both are refusals the
//     library did not recognise, so nobody logged them.
//   - grant-order, duplicate-fence, lost-grant, phantom-grant: fences are
//     unique per grant and grow per resource; every acknowledged grant is in
//     the database after the restarts; every grant in the database was asked
//     for by a request that did not certainly fail.
//   - spent-request-granted: no acquisition invoked after an abandon of its
//     request returned (Executor.LeaseAbandon, history.Abandon) is granted:
//     the abandon spent the request.
//   - unlogged-refusal, phantom-rejection, refusal-not-stale: every refusal the
//     client saw with a log sequence number is in the rejection log, every
//     logged refusal was a write or admission that saw refusal (or never saw
//     its outcome), and every logged refusal is below its floor.
//   - overlapping-holders: no grant was acknowledged while the previous
//     holder could still believe it held the lease (unless it had released
//     it): until the later of its own deadline, as it reported it, and the
//     invocation of its last grant or renewal plus the term granted.
//   - deadline-after-expiry: no holder's own deadline ended after the
//     coordinator's expiry of the grant or renewal that set it (the
//     anchoring rule; both are read on the machine's one wall clock).
//   - renewal-shortened: no renewal ends a term earlier than it was: the
//     coordinator's expiry an acknowledged renewal reports is never before
//     one reported for the same lease by a grant or renewal that returned
//     before it was sent (a renewal asking for less than the time left
//     leaves the lease as it is).
//   - renewed-after-expiry, denied-by-expired: a lease that had certainly
//     expired at the coordinator (later than any grant or renewal could have
//     carried it) was never renewed, and never named as the holder that
//     blocks an acquisition.
//   - linearizability: the coordinator's and gate's operations on each
//     resource are linearizable against a lease register (see Model).
//   - clock-stepped-back: no operation returned before it was invoked (the
//     wall clock stepped back); such a history cannot be ordered, so
//     linearizability is then not judged.
//
// After a failover remedied with Coordinator.AdvanceFences (Input.AdvancedTo),
// also:
//
//   - fence-not-advanced: every fence the old primary granted, decoded
//     there (Input.OldPrimary), those the promoted standby never received
//     included, is below the lowest fence after the advance.
//
// With an observer (Postgres), also:
//
//   - observer-mismatch: the decoded writes are exactly the table's rows.
//
// With every version of the lease rows in commit order (decoded on
// Postgres, Input.LeaseLog on SQLite and MariaDB), also:
//
//   - granted-while-live: a lease is granted over a previous holder's only
//     once that lease has expired or been released, in database time.
//   - renewed-expired: a renewal extends only a lease still live in
//     database time (its new expiry minus the term is before the old one).
//   - renewal-shortened (also): no renewal version of a lease has an
//     expiry before the previous version's, two renewals that raced
//     included.
//   - lost-renewal: every acknowledged renewal is among the decoded ones.
package check

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/sqlstore"
)

// Input is one history: what the clients saw and what the database kept.
type Input struct {
	Ops        []history.Op
	Events     []workload.Event // fg_events in id order
	Rejections []sqlstore.Rejection
	// Commits is the commit order logical decoding observed (Postgres), the
	// authority on order when set; nil means id order is commit order
	// (SQLite).
	Commits []observe.Commit
	// LeaseLog is every version of the lease rows in commit order, from a
	// trigger (SQLite, whose id order is commit order; MariaDB, whose ids
	// come from a counter row locked until commit). With Commits the
	// versions come from the decoded changes instead.
	LeaseLog []observe.Mark
	// OldPrimary is every commit decoded on the old primary of a failover
	// history, those its promoted standby never received included.
	OldPrimary []observe.Commit
	// Lost is the part of OldPrimary after the promoted standby's switch
	// point: the commits the failover lost. Such a commit may have been
	// seen: a client that cancels a synchronous commit's wait for its
	// standby (pgx does, when its context ends) makes Postgres end the wait
	// and show the commit on the primary alone. Only reads can then see it
	// (a refusal naming its floor, a denial naming its lease): any commit
	// after it that was acknowledged waited for the standby, and took it
	// there first. The model leaves those reads out (Report.LostReads).
	Lost []observe.Commit
	// AdvancedTo is the lowest fence a grant could carry after the fences
	// were advanced on the promoted standby (Coordinator.AdvanceFences);
	// 0 when they were not.
	AdvancedTo int64
	ClockSkew  time.Duration // the clients' lease.ClientOptions.ClockSkew
	// TTL is the term the coordinator granted (every request asked for it);
	// 0 skips the expiry checks.
	TTL time.Duration
	// Timeout bounds the linearizability search; 0 means 60s.
	Timeout time.Duration
	// VisualizeTo, when set, is where an HTML picture of a history that is
	// not linearizable goes.
	VisualizeTo string
}

// Violation is one broken rule.
type Violation struct {
	Check  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// Report is the checker's verdict on one history, with the figures that show
// what the history exercised.
type Report struct {
	Ops       int                                // client operations
	Outcomes  map[string]map[history.Outcome]int // by type, then outcome
	Via       map[string]int                     // writes by path: commit, do, batch, begin, bypass
	Late      map[history.Outcome]int            // renewals sent after the holder's own deadline, by outcome
	Waited    map[history.Outcome]int            // acquisitions that waited their turn in the queue, by outcome
	Committed int                                // write rows in the table
	Grants    int                                // raise rows (committed grants)
	Rejected  int                                // rejection log records
	Observed  int                                // transactions logical decoding observed; 0 without an observer
	Leases    int                                // lease versions judged in database time (decoded, or the lease log)
	// HandOvers are the hand-overs acknowledged; HandedOver those of them
	// that granted a waiter; HandedSeen the acquisitions that returned a
	// lease a hand-over granted.
	HandOvers, HandedOver, HandedSeen int

	RefusedUnlogged int // refusals the gate reported as not logged (the log write failed)
	LostReads       int // refusals and denials that named a grant the failover lost (Input.Lost)
	UnknownPresent  int // writes with unknown outcome that did commit
	UnknownAbsent   int // writes with unknown outcome that did not

	// Linearizable is porcupine's verdict: Ok, Illegal, or Unknown when the
	// search timed out.
	Linearizable porcupine.CheckResult
	LinearOps    int // operations given to porcupine
	// Visualization is the HTML picture of a history that is not
	// linearizable, when Input.VisualizeTo asked for one.
	Visualization string

	// Coord is what the elections and the semaphore exercised.
	Coord CoordReport

	Violations []Violation

	// Errors counts the errors agents saw, by operation type, outcome and
	// message (with numbers and names masked), to tell faults apart.
	Errors map[string]int
}

// Count returns how many operations of type typ ended with outcome out.
func (r *Report) Count(typ string, out history.Outcome) int { return r.Outcomes[typ][out] }

// Failed reports whether any rule was broken.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

// ByCheck counts violations per check.
func (r *Report) ByCheck() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Check]++
	}
	return m
}

// Summary describes the violations in a few lines, at most per check.
func (r *Report) Summary(perCheck int) string {
	var b strings.Builder
	shown := map[string]int{}
	for _, v := range r.Violations {
		if shown[v.Check] < perCheck {
			fmt.Fprintf(&b, "  %s\n", v)
		}
		shown[v.Check]++
	}
	for _, c := range slices.Sorted(maps.Keys(shown)) {
		if n := shown[c] - perCheck; n > 0 {
			fmt.Fprintf(&b, "  %s: … and %d more\n", c, n)
		}
	}
	return b.String()
}

type checker struct {
	in     Input
	r      *Report
	ops    map[string]*history.Op // by op id
	writes map[string]workload.Event
	// raises by resource, in commit order
	raises map[string][]workload.Event
	// leases are the lease rows' versions in commit order, when the
	// history has them (decoded, or the lease log)
	leases []leaseVersion
	sems   map[string]int // semaphores and their N, once asked (see semaphores)
	// handOvers are the hand-over operations by op id; handedDB the grants
	// the database shows in a committed hand-over's own transaction;
	// handedModel the grants the model takes from a hand-over (its client's
	// answer, or its decoded commit). See handover.go.
	handOvers   map[string]*handOver
	handedDB    map[grantKey]*handOver
	handedModel map[grantKey]*handOver
}

// Run checks a history.
func Run(in Input) *Report {
	c := &checker{
		in:     in,
		r:      &Report{Outcomes: map[string]map[history.Outcome]int{}, Via: map[string]int{}, Late: map[history.Outcome]int{}, Waited: map[history.Outcome]int{}, Errors: map[string]int{}},
		ops:    map[string]*history.Op{},
		writes: map[string]workload.Event{},
		raises: map[string][]workload.Event{},
	}
	for i := range in.Ops {
		o := &in.Ops[i]
		c.ops[o.Op] = o
		if c.r.Outcomes[o.Type] == nil {
			c.r.Outcomes[o.Type] = map[history.Outcome]int{}
		}
		c.r.Outcomes[o.Type][o.Outcome]++
		if o.Type == history.Write { // hand-overs' paths are in Outcomes[history.HandOver]
			c.r.Via[o.Via]++
		}
		if o.Late {
			c.r.Late[o.Outcome]++
		}
		if o.Wait {
			c.r.Waited[o.Outcome]++
		}
		if o.Err != "" {
			c.r.Errors[fmt.Sprintf("%s/%s: %s", o.Type, o.Outcome, maskError(o.Err))]++
		}
	}
	c.r.Ops = len(in.Ops)
	c.r.Rejected = len(in.Rejections)
	c.r.Observed = len(in.Commits)
	for _, e := range in.Events {
		switch e.Kind {
		case "write":
			c.r.Committed++
			c.writes[e.OpID] = e
		case "raise":
			c.r.Grants++
			c.raises[e.Resource] = append(c.raises[e.Resource], e)
		}
	}
	c.collectHandOvers()
	c.writesMatchClients()
	c.advanced()
	c.commitOrder()
	c.grants()
	c.spentRequests()
	c.handOverChecks()
	c.realTime()
	c.rejections()
	c.holderWindows()
	c.deadlines()
	c.renewalTerms()
	c.expiry()
	c.linearizable()
	c.coordination()
	return c.r
}

var (
	maskQuoted = regexp.MustCompile(`"[^"]*"`)
	maskNumber = regexp.MustCompile(`[0-9]+`)
)

// maskError makes errors that differ only in names and numbers equal.
func maskError(msg string) string {
	msg = maskQuoted.ReplaceAllString(msg, `"…"`)
	msg = maskNumber.ReplaceAllString(msg, "N")
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	return msg
}

// TopErrors lists the n most frequent errors with their counts.
func (r *Report) TopErrors(n int) string {
	keys := slices.SortedFunc(maps.Keys(r.Errors), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.Errors[b], r.Errors[a]), strings.Compare(a, b))
	})
	var b strings.Builder
	for i, k := range keys {
		if i == n {
			fmt.Fprintf(&b, "  … and %d more kinds\n", len(keys)-n)
			break
		}
		fmt.Fprintf(&b, "  %5d× %s\n", r.Errors[k], k)
	}
	return b.String()
}

func (c *checker) violate(check, format string, args ...any) {
	c.r.Violations = append(c.r.Violations, Violation{Check: check, Detail: fmt.Sprintf(format, args...)})
}

// writesMatchClients: nothing acknowledged is lost, nothing refused or
// failed committed, nothing committed that nobody wrote.
func (c *checker) writesMatchClients() {
	for _, o := range c.in.Ops {
		if !isWrite(&o) {
			continue
		}
		_, present := c.writes[o.Op]
		switch o.Outcome {
		case history.OK:
			if !present {
				c.violate("lost-write", "%s: write under fence %d on %s was acknowledged but is not in the table", o.Op, o.Fence, o.Resource)
			}
		case history.Refused, history.Fail:
			if present {
				c.violate("phantom-write", "%s: write under fence %d on %s was reported %s (%s) but committed", o.Op, o.Fence, o.Resource, o.Outcome, o.Err)
			}
		case history.Unknown:
			if present {
				c.r.UnknownPresent++
			} else {
				c.r.UnknownAbsent++
			}
		}
		if o.Outcome == history.Refused && o.LogFailed {
			c.r.RefusedUnlogged++
		}
	}
	for _, e := range c.in.Events {
		if e.Kind != "write" {
			continue
		}
		o := c.ops[e.OpID]
		switch {
		case o == nil:
			c.violate("phantom-write", "row %d (%s, fence %d, %s) has op id %q that no client invoked", e.ID, e.Resource, e.Fence, e.Holder, e.OpID)
		case !isWrite(o) || o.Resource != e.Resource || o.Fence != e.Fence || o.Holder != e.Holder || o.Agent != e.Agent:
			c.violate("write-mismatch", "row %d (%s, fence %d, %s, %s) does not match its invocation %+v", e.ID, e.Resource, e.Fence, e.Holder, e.Agent, o.Record)
		}
	}
}

// mark is one write or grant, in commit order.
type mark struct {
	write bool
	e     workload.Event
	at    string // where in commit order: "id 7", "commit #12 at 0/1A2B3C4"
}

// commitOrder walks each resource's writes and grants in commit order: the
// observed one when there is an observer, else id order.
func (c *checker) commitOrder() {
	granted := map[[2]string]bool{} // (resource, fence:holder)
	for _, e := range c.in.Events {
		if e.Kind == "raise" {
			granted[[2]string{e.Resource, fmt.Sprintf("%d:%s", e.Fence, e.Holder)}] = true
		}
	}
	for _, e := range c.in.Events {
		if e.Kind == "write" && !granted[[2]string{e.Resource, fmt.Sprintf("%d:%s", e.Fence, e.Holder)}] {
			c.violate("ungranted-fence", "%s: write %s committed under fence %d, which was never granted to %s for it", e.Resource, e.OpID, e.Fence, e.Holder)
		}
	}
	var order []mark
	var leases []leaseVersion
	if c.in.Commits == nil {
		for _, e := range c.in.Events {
			order = append(order, mark{write: e.Kind == "write", e: e, at: fmt.Sprintf("id %d", e.ID)})
		}
		for i, m := range c.in.LeaseLog {
			leases = append(leases, leaseVersion{m, fmt.Sprintf("lease log #%d", i+1)})
		}
	} else {
		order, leases = c.observed()
	}
	if c.in.Commits != nil || c.in.LeaseLog != nil {
		c.r.Leases = len(leases)
		c.leases = leases
		c.leaseLives(leases)
	}
	lastWrite := map[string]mark{}
	lastGrant := map[string]mark{}
	for _, m := range order {
		e := m.e
		if !m.write {
			if g, ok := lastGrant[e.Resource]; !ok || e.Fence > g.e.Fence {
				lastGrant[e.Resource] = m
			}
			continue
		}
		if w, ok := lastWrite[e.Resource]; ok && e.Fence < w.e.Fence {
			c.violate("fence-order", "%s: write %s under fence %d committed (%s) after write %s under fence %d (%s)",
				e.Resource, e.OpID, e.Fence, m.at, w.e.OpID, w.e.Fence, w.at)
		}
		if g, ok := lastGrant[e.Resource]; ok && e.Fence < g.e.Fence {
			c.violate("stale-after-grant", "%s: write %s under fence %d committed (%s) after the grant of fence %d to %s (%s)",
				e.Resource, e.OpID, e.Fence, m.at, g.e.Fence, g.e.Holder, g.at)
		}
		if w, ok := lastWrite[e.Resource]; !ok || e.Fence >= w.e.Fence {
			lastWrite[e.Resource] = m
		}
	}
}

// observed turns the decoded commits into writes and grants in commit
// order, with every lease version, and checks that the observer saw every
// row.
func (c *checker) observed() ([]mark, []leaseVersion) {
	var order []mark
	var leases []leaseVersion
	seen := map[string]bool{}
	granted := map[string]int64{} // the fence of the last lease version, per resource
	for _, cm := range c.in.Commits {
		at := fmt.Sprintf("commit #%d at %s", cm.Pos, cm.LSN)
		for _, m := range cm.Marks {
			e := workload.Event{Kind: "raise", Resource: m.Resource, Fence: m.Fence, Holder: m.Holder, OpID: m.OpID}
			switch m.Kind {
			case observe.Write:
				seen[m.OpID] = true
				if _, ok := c.writes[m.OpID]; !ok {
					c.violate("observer-mismatch", "%s: write %s under fence %d was decoded (%s) but is not in the table", m.Resource, m.OpID, m.Fence, at)
				}
				e.Kind = "write"
				order = append(order, mark{write: true, e: e, at: at})
			case observe.Floor:
				order = append(order, mark{e: e, at: at})
			case observe.Lease:
				leases = append(leases, leaseVersion{m, at})
				if f, ok := granted[m.Resource]; !ok || f != m.Fence {
					order = append(order, mark{e: e, at: at}) // a new fence: a grant
				}
				granted[m.Resource] = m.Fence
			}
		}
	}
	for _, e := range c.in.Events {
		if e.Kind == "write" && !seen[e.OpID] {
			c.violate("observer-mismatch", "%s: row %d (write %s under fence %d) is in the table but logical decoding never saw it commit", e.Resource, e.ID, e.OpID, e.Fence)
		}
	}
	return order, leases
}

// leaseVersion is one committed version of a lease row, and where it is in
// commit order.
type leaseVersion struct {
	m  observe.Mark
	at string
}

// leaseLives follows each lease's versions in commit order and checks its
// life in database time: granted over another only once that one is over,
// renewed only while live, and every acknowledged renewal committed.
func (c *checker) leaseLives(versions []leaseVersion) {
	type leaseKey struct {
		res, holder string
		fence       int64
	}
	renewals := map[leaseKey]int{}
	prev := map[string]observe.Mark{} // the last version per resource
	for _, v := range versions {
		m, at := v.m, v.at
		p, had := prev[m.Resource]
		prev[m.Resource] = m
		if had && p.Fence == m.Fence && p.Holder == m.Holder {
			// A release, or a renewal: the only change that leaves the
			// same lease unreleased. Its expiry is its statement's clock
			// plus the term, or the old one when that is later: two
			// renewals that raced, or one asking for less than the time
			// left, never end the term earlier.
			if !m.Released {
				if !p.Released && m.ExpiresAt.Before(p.ExpiresAt) {
					c.violate("renewal-shortened", "%s: %s's lease with fence %d was renewed (%s) to expire at %v database time, %v before the expiry it had",
						m.Resource, m.Holder, m.Fence, at, m.ExpiresAt.Format(time.StampMicro), p.ExpiresAt.Sub(m.ExpiresAt))
				}
				renewals[leaseKey{m.Resource, m.Holder, m.Fence}]++
				if now := m.ExpiresAt.Add(-c.in.TTL); p.Released || c.in.TTL > 0 && !now.Before(p.ExpiresAt) {
					c.violate("renewed-expired", "%s: %s's lease with fence %d was renewed (%s) at %v database time, %v after it expired (released: %v)",
						m.Resource, m.Holder, m.Fence, at, now.Format(time.StampMicro), now.Sub(p.ExpiresAt), p.Released)
				}
			}
			continue
		}
		if had && !p.Released && m.GrantedAt.Before(p.ExpiresAt) && !c.handedOverLive(p, m) {
			c.violate("granted-while-live", "%s: fence %d granted to %s (%s) at %v database time, %v before %s's lease with fence %d expired",
				m.Resource, m.Fence, m.Holder, at, m.GrantedAt.Format(time.StampMicro), p.ExpiresAt.Sub(m.GrantedAt), p.Holder, p.Fence)
		}
	}
	for _, o := range c.in.Ops {
		if o.Type == history.Renew && o.Outcome == history.OK {
			k := leaseKey{o.Resource, o.Holder, o.Fence}
			if renewals[k] == 0 {
				c.violate("lost-renewal", "%s: %s's renewal of fence %d was acknowledged but never committed", o.Resource, o.Holder, o.Fence)
				continue
			}
			renewals[k]--
		}
	}
}

// advanced: after a failover remedied with Coordinator.AdvanceFences, every
// fence the coordinator granted before it, replicated or lost with the old
// primary, is below the lowest fence it can grant after it.
func (c *checker) advanced() {
	if c.in.AdvancedTo == 0 {
		return
	}
	for _, cm := range c.in.OldPrimary {
		for _, m := range cm.Marks {
			if m.Kind == observe.Lease && m.Fence >= c.in.AdvancedTo {
				c.violate("fence-not-advanced", "%s: fence %d granted to %s on the old primary (commit at %s) is not below %d, the lowest fence after the advance",
					m.Resource, m.Fence, m.Holder, cm.LSN, c.in.AdvancedTo)
			}
		}
	}
}

// Grants counts the grants in commits: lease versions with a fence new to
// their resource there.
func Grants(commits []observe.Commit) int {
	n := 0
	last := map[string]int64{}
	for _, cm := range commits {
		for _, m := range cm.Marks {
			if m.Kind == observe.Lease && last[m.Resource] != m.Fence {
				n++
				last[m.Resource] = m.Fence
			}
		}
	}
	return n
}

// grants: unique, growing, durable, and asked for.
func (c *checker) grants() {
	byFence := map[int64]workload.Event{}
	for _, res := range slices.Sorted(maps.Keys(c.raises)) {
		var last int64
		for _, e := range c.raises[res] {
			if e.Fence <= last {
				c.violate("grant-order", "%s: grant of fence %d to %s (id %d) committed after a grant of fence %d", res, e.Fence, e.Holder, e.ID, last)
			}
			last = max(last, e.Fence)
			if prev, ok := byFence[e.Fence]; ok {
				c.violate("duplicate-fence", "fence %d granted twice: to %s on %s (id %d) and to %s on %s (id %d)",
					e.Fence, prev.Holder, prev.Resource, prev.ID, e.Holder, e.Resource, e.ID)
			}
			byFence[e.Fence] = e
		}
	}
	ackedBy := map[int64]*history.Op{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		fence, ok := grantOf(o)
		if !ok {
			continue
		}
		if prev, ok := ackedBy[fence]; ok && (prev.Request != o.Request || o.Request == "") {
			c.violate("duplicate-fence", "fence %d acknowledged to two requests: %s (%s) and %s (%s)", fence, prev.Op, prev.Holder, o.Op, o.Holder)
		}
		ackedBy[fence] = o
		if e, ok := byFence[fence]; !ok || e.Resource != o.Resource || e.Holder != o.Holder {
			c.violate("lost-grant", "%s: %s of fence %d on %s to %s was acknowledged but is not in the database", o.Op, o.Type, fence, o.Resource, o.Holder)
		}
	}
	// A hand-over's grant, as its client was told it, is in the database,
	// and its fence was acknowledged to nobody else.
	for _, id := range sortedKeys(c.handOvers) {
		o := c.handOvers[id].op
		if o.Outcome != history.OK || o.To == "" {
			continue
		}
		if e, ok := byFence[o.Granted]; !ok || e.Resource != o.Resource || e.Holder != o.To {
			c.violate("lost-grant", "%s: %s's hand-over of fence %d on %s was acknowledged to have granted fence %d to %s, which is not in the database",
				o.Op, o.Holder, o.Fence, o.Resource, o.Granted, o.To)
		}
		if a := ackedBy[o.Granted]; a != nil && (a.Resource != o.Resource || a.Holder != o.To) {
			c.violate("duplicate-fence", "fence %d acknowledged to two holders: handed to %s by %s, and %s (%s)", o.Granted, o.To, o.Op, a.Op, a.Holder)
		}
	}
	// Every committed grant answers a request (or an admission) that did
	// not certainly fail, or is a hand-over's.
	asked := map[[2]string][]*history.Op{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type == history.Acquire || o.Type == history.Admit {
			k := [2]string{o.Resource, o.Holder}
			asked[k] = append(asked[k], o)
		}
	}
	for _, e := range byFence {
		if a := ackedBy[e.Fence]; a != nil || c.handedExplains(grantKey{e.Resource, e.Holder, e.Fence}) {
			continue
		}
		ok := false
		for _, o := range asked[[2]string{e.Resource, e.Holder}] {
			if o.Outcome == history.Unknown || o.Attempts > 1 {
				ok = true
			}
		}
		if !ok && c.permitAsked(e) {
			ok = true // a semaphore's slot or line, asked for by a permit's wait
		}
		if !ok {
			c.violate("phantom-grant", "fence %d on %s was granted to %s, which never asked or saw every request fail, and no hand-over granted it", e.Fence, e.Resource, e.Holder)
		}
	}
}

// spentRequests: a request spent by an abandon that returned is never
// granted by a sending invoked after that.
func (c *checker) spentRequests() {
	spent := map[string]*history.Op{} // request id → its earliest abandon that returned OK
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type == history.Abandon && o.Outcome == history.OK {
			if p := spent[o.Request]; p == nil || o.Return < p.Return {
				spent[o.Request] = o
			}
		}
	}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if a := spent[o.Request]; a != nil && o.Type == history.Acquire && o.Outcome == history.OK && o.Call > a.Return {
			c.violate("spent-request-granted", "%s: %s's request %s was granted fence %d (%s), after %s had spent it",
				o.Resource, o.Holder, o.Request, o.Granted, o.Op, a.Op)
		}
	}
}

// grantOf returns the fence an operation was acknowledged to have granted:
// an acquisition's, or a fence from outside admitted with gate.Admit.
func grantOf(o *history.Op) (int64, bool) {
	switch {
	case o.Outcome != history.OK:
	case o.Type == history.Acquire:
		return o.Granted, true
	case o.Type == history.Admit:
		return o.Fence, true
	}
	return 0, false
}

// ack is an acknowledged fence on a resource: a grant, an admission, or a
// write committed under it. From its return on, the floor is at least the
// fence.
type ack struct {
	at    int64
	fence int64
	op    string
}

// acked lists, per resource, the acknowledged fences in order of return,
// each carrying the highest fence acknowledged up to then.
func (c *checker) acked() map[string][]ack {
	acks := map[string][]ack{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		fence, ok := grantOf(o)
		if !ok && isWrite(o) && o.Outcome == history.OK {
			fence, ok = o.Fence, true
		}
		if ok {
			acks[o.Resource] = append(acks[o.Resource], ack{o.Return, fence, o.Op})
		}
		if o.Type == history.HandOver && o.Outcome == history.OK && o.To != "" {
			acks[o.Resource] = append(acks[o.Resource], ack{o.Return, o.Granted, o.Op}) // the floor is at the handed fence
		}
	}
	for res, as := range acks {
		sort.Slice(as, func(i, j int) bool { return as[i].at < as[j].at })
		for i := 1; i < len(as); i++ { // prefix maximum of the fence
			if as[i].fence < as[i-1].fence {
				as[i].fence, as[i].op = as[i-1].fence, as[i-1].op
			}
		}
		acks[res] = as
	}
	return acks
}

// above returns the highest fence acknowledged on res before at, if any is
// above fence.
func above(acks map[string][]ack, res string, fence, at int64) (ack, bool) {
	as := acks[res]
	i := sort.Search(len(as), func(i int) bool { return as[i].at >= at }) - 1
	if i >= 0 && as[i].fence > fence {
		return as[i], true
	}
	return ack{}, false
}

// realTime: a write invoked after a higher fence was acknowledged (granted,
// admitted, or written under) must not commit.
func (c *checker) realTime() {
	acks := c.acked()
	for _, e := range c.in.Events {
		o := c.ops[e.OpID]
		if e.Kind != "write" || o == nil {
			continue
		}
		if a, ok := above(acks, e.Resource, e.Fence, o.Call); ok {
			c.violate("realtime-stale-write", "%s: write %s under fence %d was invoked %v after %s's fence %d was acknowledged, and committed",
				e.Resource, e.OpID, e.Fence, time.Duration(o.Call-a.at), a.op, a.fence)
		}
	}
	c.staleFailures(acks)
	c.staleReleases()
}

// staleReleases: a release of fence N invoked after a grant above N on its
// resource was acknowledged finds the lease row on that newer fence, and
// must free nothing.
func (c *checker) staleReleases() {
	grants := map[string][]ack{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if fence, ok := grantOf(o); ok && o.Type == history.Acquire {
			grants[o.Resource] = append(grants[o.Resource], ack{o.Return, fence, o.Op})
		}
		if o.Type == history.HandOver && o.Outcome == history.OK && o.To != "" {
			grants[o.Resource] = append(grants[o.Resource], ack{o.Return, o.Granted, o.Op})
		}
	}
	for res, as := range grants {
		sort.Slice(as, func(i, j int) bool { return as[i].at < as[j].at })
		for i := 1; i < len(as); i++ {
			if as[i].fence < as[i-1].fence {
				as[i].fence, as[i].op = as[i-1].fence, as[i-1].op
			}
		}
		grants[res] = as
	}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type != history.Release || o.Outcome != history.OK {
			continue
		}
		if a, ok := above(grants, o.Resource, o.Fence, o.Call); ok {
			c.violate("released-superseded", "%s: %s's release of fence %d on %s, invoked %v after %s's grant of fence %d was acknowledged, freed a lease",
				o.Op, o.Holder, o.Fence, o.Resource, time.Duration(o.Call-a.at), a.op, a.fence)
		}
	}
}

// refusalCodes are the SQLSTATEs fencegate raises for a refused fence
// (Postgres's pipelined fence statement): stale, and never issued.
var refusalCodes = map[string]bool{"FG001": true, "FG002": true}

// staleFailures: a write or admission invoked after a higher fence on its
// resource was acknowledged met a floor above its fence, and the gate's
// answer to that is a refusal, logged. It may still fail for a fault (the
// connection, the server, a lock), but a failure whose error names none
// is a refusal the library did not recognise: nothing was logged and the
// writer was not told. And an error carrying a refusal's SQLSTATE is a
// refusal, whatever the client took it for.
func (c *checker) staleFailures(acks map[string][]ack) {
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if !isWrite(o) && o.Type != history.Admit {
			continue
		}
		if refusalCodes[o.Code] && o.Outcome != history.Refused {
			c.violate("misread-refusal", "%s: %s under fence %d on %s failed with SQLSTATE %s, a refusal, but was reported %s: %s",
				o.Op, o.Type, o.Fence, o.Resource, o.Code, o.Outcome, o.Err)
			continue
		}
		if o.Outcome != history.Fail || o.Cause != history.CauseOther {
			continue
		}
		if a, ok := above(acks, o.Resource, o.Fence, o.Call); ok {
			c.violate("stale-not-refused", "%s: %s under fence %d on %s, invoked %v after %s's fence %d was acknowledged, failed with an error that names no fault and is no refusal: %s",
				o.Op, o.Type, o.Fence, o.Resource, time.Duration(o.Call-a.at), a.op, a.fence, o.Err)
		}
	}
}

func (c *checker) rejections() {
	bySeq := map[int64]sqlstore.Rejection{}
	for _, r := range c.in.Rejections {
		bySeq[r.Seq] = r
		if r.Fence >= r.Floor {
			c.violate("refusal-not-stale", "rejection #%d: fence %d from %s on %s refused with floor %d (not issued: %v)", r.Seq, r.Fence, r.Holder, r.Resource, r.Floor, r.NotIssued)
		}
	}
	type key struct {
		res, holder string
		fence       int64
	}
	candidates := map[key]int{}
	for _, o := range c.in.Ops {
		if !isWrite(&o) && o.Type != history.Admit {
			continue
		}
		if o.Outcome == history.Refused || o.Outcome == history.Unknown {
			candidates[key{o.Resource, o.Holder, o.Fence}]++
		}
		if o.Outcome == history.Refused && o.RejSeq == 0 && !o.LogFailed {
			c.violate("unlogged-refusal", "%s: refusal of fence %d on %s came with no log sequence number and no logging error", o.Op, o.Fence, o.Resource)
		}
		if o.Outcome != history.Refused || o.RejSeq == 0 {
			continue
		}
		r, ok := bySeq[o.RejSeq]
		if !ok || r.Resource != o.Resource || r.Holder != o.Holder || r.Fence != o.Fence {
			c.violate("unlogged-refusal", "%s: refusal of fence %d on %s reported as rejection #%d, which the log does not hold (%+v)", o.Op, o.Fence, o.Resource, o.RejSeq, r)
		}
	}
	for _, r := range c.in.Rejections {
		k := key{r.Resource, r.Holder, r.Fence}
		if candidates[k] == 0 {
			c.violate("phantom-rejection", "rejection #%d (fence %d from %s on %s) matches no write or admission that was refused or unanswered", r.Seq, r.Fence, r.Holder, r.Resource)
			continue
		}
		candidates[k]--
	}
}

// holderWindows: the previous holder's window (invocation + granted term, or
// the deadline the holder itself reported if later, both covered by the
// coordinator's expiry) ends before the next grant is acknowledged, unless it
// released first.
func (c *checker) holderWindows() {
	type window struct {
		op      *history.Op
		believe int64 // invocation + granted term or the reported deadline, as late as any renewal pushed it
	}
	type lkey struct {
		res, holder string
		fence       int64
	}
	wins := map[lkey]*window{}
	perRes := map[string][]*window{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type == history.Acquire && o.Outcome == history.OK {
			w := &window{op: o, believe: max(o.Call+o.TTL-int64(c.in.ClockSkew), o.Until)}
			wins[lkey{o.Resource, o.Holder, o.Granted}] = w
			perRes[o.Resource] = append(perRes[o.Resource], w)
		}
	}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		w := wins[lkey{o.Resource, o.Holder, o.Fence}]
		if w == nil {
			continue
		}
		switch {
		case o.Type == history.Renew && o.Outcome == history.OK:
			w.believe = max(w.believe, o.Call+o.TTL-int64(c.in.ClockSkew), o.Until)
		}
	}
	for i := range c.in.Ops { // a release (or a hand-over) ends the belief when it is sent
		o := &c.in.Ops[i]
		w := wins[lkey{o.Resource, o.Holder, o.Fence}]
		if w != nil && (o.Type == history.Release || o.Type == history.HandOver) && (o.Outcome == history.OK || o.Outcome == history.Unknown) {
			w.believe = min(w.believe, o.Call)
		}
	}
	for res, ws := range perRes {
		slices.SortFunc(ws, func(a, b *window) int { return cmp.Compare(a.op.Granted, b.op.Granted) })
		var next *window // the later grant acknowledged first
		for i := len(ws) - 1; i >= 0; i-- {
			w := ws[i]
			if next != nil && next.op.Return < w.believe {
				c.violate("overlapping-holders", "%s: %s believed it held fence %d until %v after %s's grant of fence %d was acknowledged",
					res, w.op.Holder, w.op.Granted, time.Duration(w.believe-next.op.Return), next.op.Holder, next.op.Granted)
			}
			if next == nil || w.op.Return < next.op.Return {
				next = w
			}
		}
	}
}

// deadlineMargin covers the reading of a holder's deadline on the wall
// clock: the monotonic clock it is kept on and the wall clock may drift
// apart by a slewing NTP, by at most ~500 ppm of the term.
const deadlineMargin = 500 * time.Microsecond

// deadlines: a holder's own deadline never ends after the coordinator's
// expiry of the grant or renewal that set it (the anchoring rule: the
// deadline dates from an instant no later than the database's stamp of the
// grant). Both clocks are this machine's wall clock. Unlike
// overlapping-holders this needs no successor, and it sees a deadline that
// runs late by less than a round trip.
func (c *checker) deadlines() {
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if (o.Type != history.Acquire && o.Type != history.Renew) || o.Outcome != history.OK || o.Until == 0 || o.Expires == 0 {
			continue
		}
		if over := o.Until - o.Expires; over > int64(deadlineMargin) {
			c.violate("deadline-after-expiry", "%s: %s's %s %s set its deadline %v after the coordinator's expiry of fence %d",
				o.Resource, o.Holder, o.Type, o.Op, time.Duration(over), max(o.Granted, o.Fence))
		}
	}
}

// renewalTerms: the coordinator's expiry an acknowledged renewal reports
// is never before one reported for its lease by a grant or renewal that
// returned before the renewal was sent. (Two sent at once are ordered only
// by the database: the lease rows' versions judge them.)
func (c *checker) renewalTerms() {
	type lkey struct {
		res, holder string
		fence       int64
	}
	known := map[lkey][]*history.Op{} // acknowledged grants and renewals that report an expiry
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Outcome != history.OK || o.Expires == 0 {
			continue
		}
		switch o.Type {
		case history.Acquire:
			k := lkey{o.Resource, o.Holder, o.Granted}
			known[k] = append(known[k], o)
		case history.Renew:
			k := lkey{o.Resource, o.Holder, o.Fence}
			known[k] = append(known[k], o)
		}
	}
	for i := range c.in.Ops {
		q := &c.in.Ops[i]
		if q.Type != history.Renew || q.Outcome != history.OK || q.Expires == 0 {
			continue
		}
		for _, p := range known[lkey{q.Resource, q.Holder, q.Fence}] {
			if p.Return < q.Call && p.Expires > q.Expires {
				c.violate("renewal-shortened", "%s: %s's renewal %s of fence %d reported the coordinator's expiry %v before the one %s had reported",
					q.Resource, q.Holder, q.Op, q.Fence, time.Duration(p.Expires-q.Expires), p.Op)
				break
			}
		}
	}
}

// expiryMargin covers the database clock's resolution (SQLite: a
// millisecond) when comparing its expiry with the agents' clock.
const expiryMargin = 2 * time.Millisecond

// expiry: the coordinator's expiry for a lease is at most ttl after the
// return of the last grant or renewal that may have taken effect. After
// that, the lease must be treated as expired: never renewed, never named in
// a denial. Leases held through lease.Hold (whose renewals the agent does not
// see) and grants no agent saw are skipped.
func (c *checker) expiry() {
	if c.in.TTL <= 0 {
		return
	}
	type lkey struct {
		res, holder string
		fence       int64
	}
	type extension struct {
		op  *history.Op
		end int64 // latest possible expiry it set; never if it may still be pending
	}
	ext := map[lkey][]extension{}
	skip := map[lkey]bool{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		var k lkey
		switch {
		case o.Type == history.Acquire && o.Outcome == history.OK:
			k = lkey{o.Resource, o.Holder, o.Granted}
			skip[k] = skip[k] || o.Hold
		case o.Type == history.Renew && (o.Outcome == history.OK || o.Outcome == history.Unknown):
			k = lkey{o.Resource, o.Holder, o.Fence}
		default:
			continue
		}
		end := int64(never)
		if o.Returned() {
			end = o.Return + int64(c.in.TTL)
		}
		ext[k] = append(ext[k], extension{o, end})
	}
	// latest is the latest expiry the lease may have had when q was
	// processed: what every extension invoked before q returned may have set.
	latest := func(k lkey, q *history.Op) (int64, bool) {
		es, ok := ext[k]
		if !ok || skip[k] {
			return 0, false
		}
		var end int64
		for _, e := range es {
			if e.op != q && e.op.Call < q.Return {
				end = max(end, e.end)
			}
		}
		return end, end != never
	}
	for i := range c.in.Ops {
		q := &c.in.Ops[i]
		switch {
		case q.Type == history.Renew && q.Outcome == history.OK:
			if end, ok := latest(lkey{q.Resource, q.Holder, q.Fence}, q); ok && q.Call > end+int64(expiryMargin) {
				c.violate("renewed-after-expiry", "%s: %s's lease with fence %d was renewed by a request sent %v after it had certainly expired",
					q.Resource, q.Holder, q.Fence, time.Duration(q.Call-end))
			}
		case q.Type == history.Acquire && q.Outcome == history.Denied:
			if end, ok := latest(lkey{q.Resource, q.HeldBy, q.HeldFence}, q); ok && q.Call > end+int64(expiryMargin) {
				c.violate("denied-by-expired", "%s: %s was denied by %s's lease with fence %d, which had certainly expired %v before the request was sent",
					q.Resource, q.Holder, q.HeldBy, q.HeldFence, time.Duration(q.Call-end))
			}
		}
	}
}
