// Package elect runs leader elections on fencegate's leases.
//
// An Elector is one participant of a leader election built on a lease: the
// leader is the holder of the lease on the election's name, a term is one
// generation of that lease, and the term's fence is what the gate checks
// on the leader's writes, so a deposed leader (paused, partitioned, sure of
// itself) is refused by the database, not merely told. Campaign waits in
// the election's line (lease.Coordinator.AcquireWait's queue, in the order
// participants joined); Term.Resign hands over at once; a leader that dies
// blocks the election until its term ends. A term's context ends at the
// lease's deadline on the holder's clock, which comes before the
// coordinator's expiry, so two participants never both believe they lead
// while lease.ClientOptions.ClockSkew bounds the clocks' drift; the gate
// holds even when it does not. Run gives client-go's callbacks
// (OnStartedLeading, OnStoppedLeading only for a participant that led,
// OnNewLeader), Check a health check for a leader that cannot renew.
//
// Observe reads the leader from the election's lease row (the
// lease.Coordinator.Status every participant can read), so every
// participant, in any process, reports leaders in strictly increasing fence
// order, each once, and only ones that led. It coalesces: a term shorter
// than the time an observer takes to look again can be missed (see
// Elector.Observe), never reordered.
//
// The package is a client of package lease and uses its exported API only:
// an Elector is a Coordinator and a Client of the caller's, and its terms
// are leases kept by lease.Keep.
package elect
