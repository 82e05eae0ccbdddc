package check

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
)

// Hand-overs (history.HandOver: handover.Do, handover.CommitBatch)
// are one transaction that commits the holder's last write, its release
// and, when the resource's first live waiter takes it, a grant to that
// waiter under a new fence. The grant is caused by the holder's operation,
// not by any request of the grantee: the waiter's AcquireWait only learns of
// it afterwards. So:
//
//   - the grant happens at the hand-over's linearization point, inside the
//     holder's call (the model's "handover"); the waiter's acquisition that
//     returns the handed fence is an observation of it ("handed"), which
//     needs no request of its own to explain it;
//   - the write, the release and the grant are one step: a hand-over that
//     certainly failed did none of them, one whose outcome is unknown did
//     all or none, and its write's row, in the table or not, says which;
//   - in the database its grant is in its write's transaction: the same
//     decoded commit (Postgres), or the next row after its write in id
//     order (SQLite, MariaDB, whose writers take ids one transaction at a
//     time): hand-over-not-atomic otherwise;
//   - what its client was told (Freed, To, Granted) is what its transaction
//     did, as far as the database shows it: hand-over-mismatch otherwise;
//     and the fence handed is above the holder's (hand-over-fence);
//   - a grant over a live lease (granted-while-live) is legal only as the
//     grant of a hand-over of that lease found in that lease's own
//     transaction; a grant in the database explained by no hand-over and no
//     request of its grantee is a phantom-grant.
type handOver struct {
	op        *history.Op
	committed bool // its write's row is in the table: its transaction committed
	// db is what its transaction did to the lease, when the database shows
	// it (its write's decoded commit, or the next row in id order).
	db *txLease
}

// txLease is what one transaction did to a lease row, as the database
// shows it.
type txLease struct {
	to       string // the holder of a new generation it granted; "" for none
	fence    int64
	released bool // the lease's own version, released, is in it (decoded only)
	exact    bool // a decoded commit: every lease version it made is known
	at       string
}

// grantKey is one grant: a generation of a resource's lease.
type grantKey struct {
	res, holder string
	fence       int64
}

// isWrite reports whether o is a fenced write: a write, or a hand-over,
// whose first effect is one.
func isWrite(o *history.Op) bool { return o.Type == history.Write || o.Type == history.HandOver }

// collectHandOvers finds each hand-over's transaction in the database and
// what it granted.
func (c *checker) collectHandOvers() {
	c.handOvers = map[string]*handOver{}
	c.handedDB = map[grantKey]*handOver{}
	c.handedModel = map[grantKey]*handOver{}
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if o.Type != history.HandOver {
			continue
		}
		_, committed := c.writes[o.Op]
		c.handOvers[o.Op] = &handOver{op: o, committed: committed}
		if o.Outcome == history.OK {
			c.r.HandOvers++
			if o.To != "" {
				c.r.HandedOver++
			}
		}
	}
	switch {
	case c.in.Commits != nil:
		for _, cm := range c.in.Commits {
			for _, m := range cm.Marks {
				h := c.handOvers[m.OpID]
				if m.Kind != observe.Write || h == nil {
					continue
				}
				t := &txLease{exact: true, at: fmt.Sprintf("commit #%d at %s", cm.Pos, cm.LSN)}
				for _, l := range cm.Marks {
					if l.Kind != observe.Lease || l.Resource != h.op.Resource {
						continue
					}
					if l.Fence != h.op.Fence {
						t.to, t.fence = l.Holder, l.Fence
					} else if l.Released {
						t.released = true
					}
				}
				h.db = t
			}
		}
	case c.in.LeaseLog != nil:
		// One writer at a time (SQLite), or ids under a counter row locked
		// until commit (MariaDB): a transaction's rows are consecutive in id
		// order, and a grant after its write would be the next row. The
		// next row may also be the next transaction's grant after a plain
		// release; the lease log tells them apart (a released version
		// between), see follows.
		follows := c.leaseFollows()
		for i, e := range c.in.Events {
			h := c.handOvers[e.OpID]
			if e.Kind != "write" || h == nil {
				continue
			}
			t := &txLease{at: fmt.Sprintf("id %d", e.ID)}
			if i+1 < len(c.in.Events) {
				n := c.in.Events[i+1]
				k := grantKey{n.Resource, n.Holder, n.Fence}
				if n.Kind == "raise" && n.Resource == e.Resource && n.Fence != e.Fence && follows[k] == (grantKey{e.Resource, e.Holder, e.Fence}) {
					t.to, t.fence = n.Holder, n.Fence
				}
			}
			h.db = t
		}
	}
	for _, h := range c.handOvers {
		o := h.op
		switch {
		case o.Outcome == history.OK && o.To != "":
			c.handedModel[grantKey{o.Resource, o.To, o.Granted}] = h
		case o.Outcome == history.Unknown && h.committed && h.db != nil && h.db.exact && h.db.to != "":
			c.handedModel[grantKey{o.Resource, h.db.to, h.db.fence}] = h
		}
		if h.committed && h.db != nil && h.db.to != "" {
			c.handedDB[grantKey{o.Resource, h.db.to, h.db.fence}] = h
		}
	}
}

// leaseFollows maps each new generation in the lease log to the lease
// whose unreleased version it directly follows, on its resource.
func (c *checker) leaseFollows() map[grantKey]grantKey {
	out := map[grantKey]grantKey{}
	prev := map[string]observe.Mark{}
	for _, m := range c.in.LeaseLog {
		p, had := prev[m.Resource]
		prev[m.Resource] = m
		if had && !p.Released && (p.Fence != m.Fence || p.Holder != m.Holder) {
			out[grantKey{m.Resource, m.Holder, m.Fence}] = grantKey{p.Resource, p.Holder, p.Fence}
		}
	}
	return out
}

// handedOverLive reports whether the generation m, granted over p's live
// lease, is the grant of a hand-over of p found in p's hand-over's own
// transaction.
func (c *checker) handedOverLive(p, m observe.Mark) bool {
	h := c.handedDB[grantKey{m.Resource, m.Holder, m.Fence}]
	return h != nil && h.op.Holder == p.Holder && h.op.Fence == p.Fence
}

// handOverChecks: each hand-over's grant is in its write's transaction,
// above its fence, and what its client was told.
func (c *checker) handOverChecks() {
	for _, id := range sortedKeys(c.handOvers) {
		h := c.handOvers[id]
		o := h.op
		if o.Outcome == history.OK && o.To != "" && o.Granted <= o.Fence {
			c.violate("hand-over-fence", "%s: %s's hand-over of fence %d on %s handed fence %d to %s, not above its own",
				o.Op, o.Holder, o.Fence, o.Resource, o.Granted, o.To)
		}
		if h.db != nil && h.db.to != "" && h.committed && h.db.fence <= o.Fence {
			c.violate("hand-over-fence", "%s: %s's hand-over of fence %d on %s granted fence %d to %s in its transaction (%s), not above its own",
				o.Op, o.Holder, o.Fence, o.Resource, h.db.fence, h.db.to, h.db.at)
		}
		if !h.committed || h.db == nil {
			// A lost write is lost-write's, and a grant that a hand-over
			// whose write did not commit made anyway is explained by
			// nothing (phantom-grant, granted-while-live); without an
			// observer or a lease log the database cannot say what its
			// transaction did.
			continue
		}
		t := h.db
		switch {
		case o.Outcome == history.OK && o.To != "" && t.to == "":
			c.violate("hand-over-not-atomic", "%s: %s's hand-over of fence %d on %s was told it granted fence %d to %s, but its write's transaction (%s) granted nothing",
				o.Op, o.Holder, o.Fence, o.Resource, o.Granted, o.To, t.at)
		case o.Outcome == history.OK && o.To != "" && (t.to != o.To || t.fence != o.Granted):
			c.violate("hand-over-mismatch", "%s: %s's hand-over of fence %d on %s was told it granted fence %d to %s, but its transaction (%s) granted fence %d to %s",
				o.Op, o.Holder, o.Fence, o.Resource, o.Granted, o.To, t.at, t.fence, t.to)
		case o.Outcome == history.OK && o.To == "" && t.to != "" && t.exact:
			c.violate("hand-over-mismatch", "%s: %s's hand-over of fence %d on %s was told it granted nothing, but its transaction (%s) granted fence %d to %s",
				o.Op, o.Holder, o.Fence, o.Resource, t.at, t.fence, t.to)
		case o.Outcome == history.OK && o.Freed && o.To == "" && t.exact && !t.released:
			c.violate("hand-over-not-atomic", "%s: %s's hand-over of fence %d on %s was told it released the lease, but its write's transaction (%s) did not",
				o.Op, o.Holder, o.Fence, o.Resource, t.at)
		case o.Outcome == history.OK && !o.Freed && t.exact && (t.released || t.to != ""):
			c.violate("hand-over-mismatch", "%s: %s's hand-over of fence %d on %s was told its lease was not live, but its transaction (%s) released or handed it",
				o.Op, o.Holder, o.Fence, o.Resource, t.at)
		}
	}
}

// handedExplains reports whether a hand-over explains the grant k in the
// database: its client was told it, or it is in a committed hand-over's
// transaction.
func (c *checker) handedExplains(k grantKey) bool {
	return c.handedModel[k] != nil || c.handedDB[k] != nil
}

// handedBy returns the hand-over that the model takes the grant k from.
func (c *checker) handedBy(k grantKey) *handOver { return c.handedModel[k] }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
