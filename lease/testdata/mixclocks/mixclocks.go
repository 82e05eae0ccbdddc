// Package mixclocks must not compile: it mixes the holder's clock domain
// (clock.Instant) with the coordinator's (clock.DBTime). TestClockDomainsDoNotMix
// builds it and expects exactly these errors.
package mixclocks

import "github.com/fencegate/fencegate/lease"

func mix(l *lease.Lease, g lease.Grant) {
	_ = l.Deadline().Sub(g.CoordinatorExpiresAt)    // ERROR
	_ = g.CoordinatorExpiresAt.Sub(l.Deadline())    // ERROR
	_ = l.Deadline().Before(g.CoordinatorExpiresAt) // ERROR
	_ = g.CoordinatorExpiresAt.After(l.Deadline())  // ERROR
}
