// Package semaphore gives N fenced permits on a name, built on fencegate's
// leases.
//
// A Semaphore is N permits on a name; permit i is the lease on the resource
// "name#i", with its own fence and floor, so at most N are live at any
// instant. Waiters line up in the queue of "name#line" and are granted in
// the order they joined; TryAcquire does not jump that line. A permit's
// token fences writes of that permit's slot: a holder whose permit expired
// and was granted again is refused on "name#i". It does not fence writes
// to a resource the permits share: two live permits are two writers, by
// design; guard a shared row with a lease of its own.
//
// N is stored in the database once Semaphore.SetPermits stores it (table
// fencegate_semaphore, on every driver of this module): each participant
// reads it before each grant, so a change reaches all of them at once,
// whatever n each was built with; until then each grants by its own n.
// N is 1 to MaxPermits (1024). Lowering N revokes no live permit: permits
// of slots at N and above run out as leases do (or are released), and
// until the permits live are fewer than the new N nothing is granted (a
// participant finds them by reading the slots above N; slots are taken
// lowest first, so that read stops at the first slot never leased). A
// slot taken while that read runs is given back at once, unhanded.
//
// The package is a client of package lease and uses its exported API only:
// a Semaphore is a Coordinator and a Client of the caller's, and each permit
// is a lease (lease.Coordinator.TryAcquire on its slot).
package semaphore
