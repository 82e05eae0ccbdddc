package check

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/integration/internal/observe"
)

// The lease register: the state of one resource as the coordinator and the
// gate together present it. It has no clock. Expiry happens in database time
// and the model cannot see it, so the model never demands that a lease
// expire or forbids it: a grant may supersede any earlier one, and a renewal
// may answer "expired" at any moment. What it does demand:
//
//   - a grant's fence is above every fence granted before it on the resource
//     (or is the same grant, answered again to a retry of its request);
//   - a denial names the current generation: its holder and fence, not
//     released;
//   - a renewal that succeeds renews the current, unreleased generation;
//   - a release that frees a lease frees the current generation;
//   - a write is admitted only under the current generation's fence (the
//     gate's floor is the latest grant's fence, raised in the granting
//     transaction) and refused only under a lower one.
//
// A fence from outside the coordinator that gate.Admit admitted is a grant
// (with no holder to deny others), and one it refused is a refusal.
//
// A hand-over is one step: its write under the current generation's fence,
// and the release of that generation ("write-release"), or its release and
// a grant to the waiter it was handed to, above every fence before
// ("handover"): the grant happens inside the holder's call, whatever the
// waiter was doing. The waiter's acquisition that returns the handed lease
// caused nothing: it observes that generation ("handed": the current one,
// granted by that hand-over), at some moment of its own call. A hand-over
// whose lease was not live is its write alone. One refused is a refusal;
// one that certainly failed did nothing, its write included. One whose
// outcome is unknown did all or nothing: nothing when its write's row is
// not in the table; when it is, what its decoded commit shows, or, without
// one, its write and perhaps the release ("write-release?"; a grant it made
// then enters as one no client saw, below).
//
// Operations whose outcome the client never saw enter as follows: a write
// whose row is in the table is admitted (with no known return); an
// acquisition or admission the database shows granted is a grant; a release may or may not
// have freed the lease (the model branches); anything else unanswered had no
// effect the model could see, and is left out.
type registerState struct {
	Fence    int64
	Holder   string
	Request  string
	Released bool
}

type modelInput struct {
	Kind    string // "grant", "deny", "renew", "release", "release?", "write", "refuse", "handover", "write-release", "write-release?", "handed"
	Holder  string
	Request string // grant: its request; handover, handed: the hand-over's op id
	Fence   int64  // grant, handed: granted; deny: the holder's fence named; others: the token's
	To      string // handover: the waiter handed the resource
	Granted int64  // handover: the fence it was handed
}

// Model is the lease register as a porcupine model, one partition per
// resource (its ops carry the resource in Metadata).
var Model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byRes := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			r := op.Metadata.(string)
			if _, ok := byRes[r]; !ok {
				order = append(order, r)
			}
			byRes[r] = append(byRes[r], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, r := range order {
			out = append(out, byRes[r])
		}
		return out
	},
	Init: func() []any { return []any{registerState{}} },
	Step: func(state, input, _ any) []any {
		s, in := state.(registerState), input.(modelInput)
		current := s.Fence == in.Fence && s.Holder == in.Holder && !s.Released
		switch in.Kind {
		case "grant":
			if in.Fence > s.Fence {
				return []any{registerState{Fence: in.Fence, Holder: in.Holder, Request: in.Request}}
			}
			if in.Fence == s.Fence && in.Holder == s.Holder && in.Request == s.Request {
				return []any{s} // a retry answered with the same grant
			}
		case "deny":
			if current {
				return []any{s}
			}
		case "renew":
			if current {
				return []any{s}
			}
		case "release":
			if current {
				s.Released = true
				return []any{s}
			}
		case "release?":
			if current {
				r := s
				r.Released = true
				return []any{s, r}
			}
			return []any{s}
		case "write":
			if in.Fence == s.Fence {
				return []any{s}
			}
		case "refuse":
			if in.Fence < s.Fence {
				return []any{s}
			}
		case "handover":
			if current && in.Granted > s.Fence {
				return []any{registerState{Fence: in.Granted, Holder: in.To, Request: in.Request}}
			}
		case "write-release":
			if current {
				s.Released = true
				return []any{s}
			}
		case "write-release?":
			if current {
				r := s
				r.Released = true
				return []any{s, r}
			}
			if in.Fence == s.Fence {
				return []any{s}
			}
		case "handed":
			if s.Fence == in.Fence && s.Holder == in.Holder && s.Request == in.Request {
				return []any{s}
			}
		}
		return nil
	},
	DescribeOperation: func(input, _ any) string {
		in := input.(modelInput)
		if in.Kind == "handover" {
			return fmt.Sprintf("handover(%d, %s → %d, %s)", in.Fence, in.Holder, in.Granted, in.To)
		}
		return fmt.Sprintf("%s(%d, %s)", in.Kind, in.Fence, in.Holder)
	},
	DescribeState: func(state any) string {
		s := state.(registerState)
		return fmt.Sprintf("{fence %d, %s, released %v}", s.Fence, s.Holder, s.Released)
	},
}

const never = math.MaxInt64 // the return time of an operation that never returned

// raised reports whether the database holds a raise of res's floor to fence
// for holder.
func (c *checker) raised(res, holder string, fence int64) bool {
	for _, e := range c.raises[res] {
		if e.Fence == fence && e.Holder == holder {
			return true
		}
	}
	return false
}

// lostGrants are the grants only the commits a failover lost made
// (Input.Lost): their lease versions, less the generations the database
// kept (a renewal or a release of one is not a grant of its own).
func (c *checker) lostGrants() map[grantKey]bool {
	out := map[grantKey]bool{}
	for _, cm := range c.in.Lost {
		for _, m := range cm.Marks {
			if m.Kind == observe.Lease && !c.raised(m.Resource, m.Holder, m.Fence) {
				out[grantKey{m.Resource, m.Holder, m.Fence}] = true
			}
		}
	}
	return out
}

// namesLost reports whether o is a read of a grant in lost: a refusal
// under the floor it raised, or a denial naming its lease.
func namesLost(o *history.Op, lost map[grantKey]bool) bool {
	switch o.Outcome {
	case history.Refused:
		return lost[grantKey{o.Resource, o.FloorBy, o.Floor}]
	case history.Denied:
		return lost[grantKey{o.Resource, o.HeldBy, o.HeldFence}]
	}
	return false
}

// linearizable builds the register history and asks porcupine.
func (c *checker) linearizable() {
	var ops []porcupine.Operation
	clients := map[string]int{} // agent → porcupine client id, for visualizations
	client := func(agent string) int {
		id, ok := clients[agent]
		if !ok {
			id = len(clients)
			clients[agent] = id
		}
		return id
	}
	add := func(o *history.Op, in modelInput, ret int64) {
		if c.semaphoreOf(o.Resource) != "" {
			return // a permit's slot: granted unseen, judged by the semaphore's checks
		}
		if ret == 0 {
			ret = never
		}
		ops = append(ops, porcupine.Operation{ClientId: client(o.Agent), Input: in, Call: o.Call, Return: ret, Metadata: o.Resource})
	}
	ackedFences := map[int64]bool{}
	lost := c.lostGrants()
	for i := range c.in.Ops {
		o := &c.in.Ops[i]
		if namesLost(o, lost) {
			c.r.LostReads++
			continue
		}
		switch o.Type {
		case history.Acquire:
			switch o.Outcome {
			case history.OK:
				ackedFences[o.Granted] = true
				if h := c.handedBy(grantKey{o.Resource, o.Holder, o.Granted}); h != nil {
					// A waiter's acquisition returning a hand-over's grant.
					c.r.HandedSeen++
					add(o, modelInput{Kind: "handed", Holder: o.Holder, Request: h.op.Op, Fence: o.Granted}, o.Return)
					break
				}
				add(o, modelInput{Kind: "grant", Holder: o.Holder, Request: o.Request, Fence: o.Granted}, o.Return)
			case history.Denied:
				add(o, modelInput{Kind: "deny", Holder: o.HeldBy, Fence: o.HeldFence}, o.Return)
			}
		case history.Renew:
			if o.Outcome == history.OK {
				add(o, modelInput{Kind: "renew", Holder: o.Holder, Fence: o.Fence}, o.Return)
			}
		case history.Release:
			switch o.Outcome {
			case history.OK:
				add(o, modelInput{Kind: "release", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case history.Unknown:
				add(o, modelInput{Kind: "release?", Holder: o.Holder, Fence: o.Fence}, o.Return)
			}
		case history.Admit:
			switch {
			case o.Outcome == history.OK:
				ackedFences[o.Fence] = true
				add(o, modelInput{Kind: "grant", Holder: o.Holder, Request: o.Op, Fence: o.Fence}, o.Return)
			case o.Outcome == history.Refused:
				add(o, modelInput{Kind: "refuse", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case o.Outcome == history.Unknown && c.raised(o.Resource, o.Holder, o.Fence):
				ackedFences[o.Fence] = true
				add(o, modelInput{Kind: "grant", Holder: o.Holder, Request: o.Op, Fence: o.Fence}, 0)
			}
		case history.Write:
			_, present := c.writes[o.Op]
			switch {
			case o.Outcome == history.Refused:
				add(o, modelInput{Kind: "refuse", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case present:
				add(o, modelInput{Kind: "write", Holder: o.Holder, Fence: o.Fence}, o.Return)
			}
		case history.HandOver:
			h := c.handOvers[o.Op]
			switch {
			case o.Outcome == history.Refused:
				add(o, modelInput{Kind: "refuse", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case !h.committed:
				// Certainly failed, or unknown and its write is not in the
				// table: none of it happened (or, if it was acknowledged,
				// lost-write says so).
			case o.Outcome == history.OK && o.To != "":
				ackedFences[o.Granted] = true
				add(o, modelInput{Kind: "handover", Holder: o.Holder, Request: o.Op, Fence: o.Fence, To: o.To, Granted: o.Granted}, o.Return)
			case o.Outcome == history.OK && o.Freed:
				add(o, modelInput{Kind: "write-release", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case o.Outcome == history.OK:
				add(o, modelInput{Kind: "write", Holder: o.Holder, Fence: o.Fence}, o.Return)
			case h.db != nil && h.db.exact && h.db.to != "":
				ackedFences[h.db.fence] = true
				add(o, modelInput{Kind: "handover", Holder: o.Holder, Request: o.Op, Fence: o.Fence, To: h.db.to, Granted: h.db.fence}, 0)
			case h.db != nil && h.db.exact && h.db.released:
				add(o, modelInput{Kind: "write-release", Holder: o.Holder, Fence: o.Fence}, 0)
			case h.db != nil && h.db.exact:
				add(o, modelInput{Kind: "write", Holder: o.Holder, Fence: o.Fence}, 0)
			default:
				add(o, modelInput{Kind: "write-release?", Holder: o.Holder, Fence: o.Fence}, 0)
			}
		}
	}
	// Grants in the database that no client saw: each happened inside one of
	// its holder's unanswered or retried requests for that resource; the
	// operation spans all of them, which is wider than the truth and so safe.
	for res, raises := range c.raises {
		if c.semaphoreOf(res) != "" {
			continue
		}
		for _, e := range raises {
			if ackedFences[e.Fence] {
				continue
			}
			var span *history.Op
			first, last := int64(math.MaxInt64), int64(0)
			for i := range c.in.Ops {
				o := &c.in.Ops[i]
				if o.Type != history.Acquire || o.Resource != res || o.Holder != e.Holder || (o.Outcome != history.Unknown && o.Attempts <= 1) {
					continue
				}
				span = o
				first = min(first, o.Call)
				ret := o.Return
				if ret == 0 {
					ret = never
				}
				last = max(last, ret)
			}
			if h := c.handedDB[grantKey{res, e.Holder, e.Fence}]; span == nil && h != nil {
				// A hand-over's grant, its grantee's acquisition never seen:
				// it happened after the hand-over was invoked.
				span, first, last = h.op, h.op.Call, never
			}
			if span == nil {
				continue // reported as phantom-grant
			}
			ops = append(ops, porcupine.Operation{
				ClientId: client(span.Agent),
				Input:    modelInput{Kind: "grant", Holder: e.Holder, Request: "(unseen)", Fence: e.Fence},
				Call:     first,
				Return:   last,
				Metadata: res,
			})
		}
	}
	c.r.LinearOps = len(ops)
	if len(ops) == 0 {
		c.r.Linearizable = porcupine.Ok
		return
	}
	// Times are the wall clock: a step backward can put an operation's
	// return before its call, and porcupine cannot order such a history.
	if backwards := slices.IndexFunc(ops, func(op porcupine.Operation) bool { return op.Return < op.Call }); backwards >= 0 {
		op := ops[backwards]
		c.violate("clock-stepped-back", "%s: an operation returned %v before it was invoked: the wall clock stepped back, and the history's order cannot be judged", op.Metadata, time.Duration(op.Call-op.Return))
		c.r.Linearizable = porcupine.Unknown
		return
	}
	timeout := c.in.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	model := Model.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	c.r.Linearizable = res
	if res != porcupine.Illegal {
		return
	}
	// Name the resources that fail, and keep a picture for a human.
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(model, part, timeout) == porcupine.Illegal {
			c.violate("linearizability", "%s: its %d operations are not linearizable as a lease register", part[0].Metadata, len(part))
		}
	}
	if c.in.VisualizeTo != "" {
		if err := porcupine.VisualizePath(model, info, c.in.VisualizeTo); err == nil {
			c.r.Visualization = c.in.VisualizeTo
		}
	}
}
