// Package lease grants leases whose fences come from a database sequence and
// whose expiry is kept in the database's clock, with a holder side that can
// never believe it owns a lease longer than the coordinator does.
//
// A lease alone cannot make a write safe: the holder checks it, stalls, and
// writes after it expired. The lease's fence is what makes the write safe,
// at the gate (package gate), inside the write's own transaction. This
// package issues those fences and keeps the holder's advisory view of its
// lease honest.
//
// # The two sides
//
// The Coordinator is the far side of the wire. It lives next to the database
// (any sqlstore.Store: Postgres through pgx or database/sql, or SQLite) and
// keeps no state of its own, so it can run in many processes at once and
// survive restarts. The Client is the holder's side: it makes requests,
// turns grants into leases, and dates every lease from its own clock
// (clock.System: monotonic, and moved forward by the wall clock's forward
// steps, so a paused VM wakes with its lease's time gone).
//
// # The protocol
//
//	req, _ := client.BeginAcquire("deploy-slot")  // reads the holder's clock: the send instant
//	out, err := coord.Acquire(ctx, req)           // possibly over a network
//	if !out.OK {
//		log.Printf("held by %s (fence %d), free in %s", out.HeldBy, out.Fence, out.RetryAfter)
//	}
//	l, err := client.CompleteAcquire(req, out.Grant)
//
//	// The write: the fence is checked in the write's transaction.
//	tx, _ := driver.Begin(ctx)
//	if err := g.Commit(ctx, tx, l.Token()); err != nil { ... } // *gate.StaleFenceError
//
//	rreq, _ := client.BeginRenewal(l)
//	rout, err := coord.Renew(ctx, rreq)                // rout.Expired: acquire again
//	l, err = client.CompleteRenewal(rreq, rout.Grant)  // same fence, new deadline
//
//	token, _ := client.Release(l)
//	coord.Release(ctx, token)
//
// Hold runs that whole cycle for long work, renewing in the background and
// cancelling the work's context when the lease is lost. A Client renews all
// the leases it holds through Hold from one goroutine, in one batch per tick
// (Coordinator.RenewBatch: one statement on Postgres, one transaction on
// SQLite and MySQL), so the renewal statements per second do not grow with
// the number of leases. Keep hands that keeper a lease acquired by hand and
// returns a Kept handle (Context, Lease, Release), with no goroutine per
// lease: the shape for a process holding thousands. Hold is built on it.
//
// # Waiting
//
// Coordinator.AcquireWait, and Hold with the Wait option, wait their turn
// while the resource is held instead of answering "held". Waiters queue in
// the database (fencegate_waiter) and are granted in the order they joined,
// from any number of processes; none starves while others come and go. A
// release hands the lock to the next waiter at once, and wakes no other: in
// the same process directly, across processes on Postgres by LISTEN/NOTIFY
// naming the next waiter, and otherwise
// (SQLite and MySQL across processes, or a lost notification) when the
// waiter next looks: at the holder's expiry, and every third of
// CoordinatorOptions.WaiterTTL. No waiter holds a transaction or a row lock
// while it waits. A holder that was killed without releasing still blocks
// the queue until its lease's term ends. Plain acquisitions do not queue;
// see AcquireWait.
//
// On Postgres a release is announced only when someone
// waits for it: its resource has a live waiter, or a watcher (Observe, and
// a semaphore's head of line watching its permits, register themselves
// with sqlstore.Store.WatchLeases). A release nobody waits for sends no
// NOTIFY, so its commit skips Postgres's cluster-wide notify lock, which
// serialized every release behind the others. No wake-up is lost by it: a
// waiter that queues after the release's trigger read the queue touches
// its place and acquires afterwards, and the acquisition locks the lease
// row, so it waits for the release to commit and finds the lease free; a
// watcher registers (committed), then takes a share lock on the lease row
// it watches (which waits for a release in flight), and only then listens
// and looks. Either the trigger sees the watcher and announces, or the
// watcher's look comes after the release's commit.
//
// # Hand-over
//
// handover.Do (and handover.CommitBatch, its pipelined form on pgx)
// commits a holder's last fenced write, its release and the grant of the
// resource to the first live waiter in one transaction
// (sqlstore.Executor.LeaseHandOver), so that a turn of a contended lock
// costs one durable commit where a release and the next acquisition cost
// two. The waiter, an AcquireWait of one plain resource, never sends the
// acquisition that grants it: its place in the queue carries a request of
// its own (its id and the term asked), which the hand-over records, and it
// learns of the grant from the commit's announcement naming it (Postgres),
// from handover.Do directly in the same Coordinator, or from its next touch
// finding its place gone; it then reads its lease (one statement, no
// commit).
//
// Dating. The hand-over dates the new term from the waiter's last touch of
// its place, TouchedAt on the database's clock, not from the hand-over's
// own instant, and the waiter dates its deadline from the instant it sent
// the last touch that was answered "kept" (or its WaiterAdd): deadline =
// that send + (ExpiresAt - TouchedAt) - one clock tick - ClockSkew. That
// send came before the touch ran, and the hand-over read that touch or a
// later one: it locks the waiter's row, so a touch committed before it is
// seen, and a touch that comes after finds the place gone (kept false) and
// moves no anchor. So the anchor precedes the instant the term is dated
// from, and the holder's window lies inside the coordinator's, as for an
// acquisition (Send-time anchoring). Dating from the waiter's wake-up
// instead would not: the wake-up comes after the grant, so a holder that
// read its clock then would believe in the lease past the coordinator's
// term by the time the announcement took.
//
// Liveness. The first term ends at the earlier of TouchedAt plus the term
// asked and the place's own expiry (TouchedAt plus WaiterTTL). A waiter
// that died between its last touch and the hand-over, its place still
// live, therefore keeps the resource at most WaiterTTL after that touch
// (3 s by default), the time its place would have blocked the queue
// anyway, never a full term; a live waiter renews (Renew, Keep and Hold
// do) to its full term. A waiter whose context ends takes its place out of
// the queue and then releases whatever a hand-over granted it before
// that; if its process dies instead, the same bound applies.
//
// A claim of several resources or of a path, and a first term that would
// already be over, are not handed anything: the hand-over is then a plain
// release, announced as Release's.
//
// # Bounded tables
//
// Coordinator.Prune (the CLI's fencegate prune) keeps the tables from
// growing forever: a request row can go once it is older than the longest
// term a request could ask for (MaxTTL, plus PruneMargin for the clocks'
// drift). The row exists only so that a late retry of a request whose
// lease is over is refused with ErrRequestExpired, not granted twice. A
// Coordinator refuses such a retry before it asks the database when the
// retry's first sending (AcquireRequest.SentAt, on its holder's clock) is
// more than its term ago: the holder dates the lease from that instant, so
// it would be over on arrival. The row was made after that first sending,
// so once the row is older than every term, every retry of it is refused
// that way, with or without the row. Expired waiter rows go too (their
// waiters are out of the queue already), and, when asked, all but the
// newest rejections. Floors never: a deleted floor would let a fence below
// it in again. On Postgres a pruned row's space is reused only after a
// VACUUM: leave autovacuum on (the default), or vacuum fencegate_request
// and fencegate_lease yourself, or the tables' files grow though their
// rows do not (bench/, scenario soak, measures both).
//
// # Elections and semaphores
//
// Leader elections (package elect) and N-permit semaphores (package
// semaphore) are clients of the Coordinator built on this package's
// exported API: their terms and permits are leases, fenced at the gate
// like any other.
//
// # Fences
//
// Every new generation of ownership (an acquisition after the previous lease
// expired or was released) takes the next value of the database's fence
// sequence, so fences only grow, across coordinator restarts too.
// A renewal keeps its fence, so writes in flight stay valid, and never
// shortens the lease: its new expiry is the later of the current one and
// the renewal's ttl from the database's clock, since a holder may already
// have been given the current one as its deadline (Coordinator.Renew).
// CoordinatorOptions.StartFence continues from another fence source.
//
// The coordinator shares the database with the gate, so Acquire raises the
// gate's floor for the resource to the new fence in the same transaction
// (co-located mode). From the moment a lease is granted, a stale holder is
// refused even if the new holder has not written yet. If the stale holder's
// write transaction is holding the floor row at that moment, the acquisition
// waits at most CoordinatorOptions.LockTimeout and is then refused with
// ErrBusy; it is never granted half-way. With gate.Options.VerifyIssued,
// the gate also refuses fences this coordinator never issued.
//
// # Claims of several resources, and paths
//
// Client.BeginAcquireSet asks for several resources in one grant: all or
// none, one fence from the sequence for the whole set, every member's floor
// raised in the granting transaction. Coordinator.Acquire answers it as it
// answers one resource (a retry of the same request gets the same grant;
// AcquireOutcome.HeldResource names the member, or the path above or
// below one, that blocks it); Renew, RenewBatch, Release, Keep, Hold
// (HoldSet) and AcquireWait (AcquireWaitSet) work on the set's lease as on
// one. A grant locks in one global order, path locks first, then lease rows
// and floors, each in sorted order, so overlapping sets queue and never
// deadlock. Members may be paths (fence.PathResource), whose rule gate's
// package doc states under Paths: a claim of a path is refused while a
// directory above it or, for a directory, anything below it is held.
//
// # Send-time anchoring and clock domains
//
// The coordinator starts a lease's term when it processes the request; the
// holder dates it from the instant it sent the request, which is earlier:
//
//	deadline = req.SentAt() + grant.TTL - ClientOptions.ClockSkew
//
// so the holder's window lies inside the coordinator's however slow the
// request and the reply are. Dating from the reply's arrival would lean the
// wrong way by a round trip on every renewal. Where the Coordinator runs in
// the holder's process (the request was begun by a Client there), it reads
// the holder's clock again for the request's first sending, once it holds a
// database connection (sqlstore.Store.OnConn) or its transaction has begun:
// time queued for a small pool is then not taken off the lease, and the
// instant still precedes the database's processing. The reliability suite
// compares every holder's deadline with the coordinator's expiry of its
// grant under kills, stalls, cut connections and crashes (its check
// deadline-after-expiry, docs/RELIABILITY.md).
//
// The holder's readings are clock.Instant; the database's timestamps are
// clock.DBTime (package clock). They are different types, so subtracting one
// from the other does not compile. Grant.CoordinatorExpiresAt is for logs.
// clock.Manual, whose readings can step forward on every read, makes the gap
// between a lease check and a write reproducible in tests.
//
// # Advisory questions
//
// Lease.Remaining, Lease.Expired, Coordinator.Status and Coordinator.List
// answer questions that are stale by the time they are answered. Use them to
// schedule renewals, display state, or decide whether to start work; never
// to decide whether a write is safe. That is gate.Commit's job.
//
// # Idempotence and release
//
// Each request carries a random request id, stored with the lease. An
// acquisition retried with the same id (after a lost reply) gets the
// existing grant while that lease is current, however many copies of it
// arrive at once; once it expired or was
// released, the retry is refused with ErrRequestExpired and never granted
// again (the database keeps every request id that made a lease: the lease
// row holds its live generation's, and fencegate_request the ones a new
// generation overwrote), so a late duplicate cannot lock the resource for a
// holder that gave up on it. A request sent once, by one Acquire answered
// with its grant, has no copy that could still arrive: its release through
// the Coordinator that granted it settles it (no record is written when the
// row is overwritten, on Postgres), and that Coordinator refuses to send it
// again (ErrRequestExpired). A holder that already holds a lease is denied another
// (AcquireOutcome.AlreadyHeld); another holder that sends a live lease's
// request id is denied as any other (AcquireOutcome.HeldBy names the
// lease's holder). An expired lease is never renewed: Renew
// answers Expired. Releasing with a stale token is a no-op, so a late release
// never frees a successor's lease. Release reports only whether it released;
// ReleaseStrict says why not: a *ReleaseError whose Reason is
// ReleaseExpired, ReleaseAlreadyReleased, ReleaseSuperseded or
// ReleaseNeverHeld.
//
// # Errors
//
// Bad input (an invalid resource or holder name, a ttl below MinTTL or
// above CoordinatorOptions.MaxTTL, a malformed request id, a request or
// lease of another Client) is reported with *fence.InvalidInputError, which
// matches fence.ErrInvalidInput, before anything is written. The other
// failures are sentinels (ErrRequestUsed, ErrGrantMismatch, ErrBusy, ...)
// matched with errors.Is, each documented with the functions that return
// it; HeldError and LostError carry details for errors.As.
//
// # Durability
//
// A fence is as durable as the transaction that issued it. On Postgres, a
// grant acknowledged under synchronous_commit=off, or lost in a failover to
// an asynchronous replica, could let a fence be issued twice; SQLite needs
// synchronous=FULL (sqlite.Open sets it). A release on Postgres commits
// without waiting for the WAL flush: losing one in a crash only keeps the
// resource locked until its lease expires.
//
// # Observability
//
// A Coordinator reports to OpenTelemetry through
// CoordinatorOptions.MeterProvider and TracerProvider, the global providers
// by default (they record nothing until the program installs an SDK). The
// instruments, of scope github.com/fencegate/fencegate/lease:
//
//   - fencegate.lease.acquire.duration (histogram, s): each acquisition
//     (Acquire, and each try of AcquireWait and Hold). Attribute: outcome
//     (granted; held, someone holds a live lease; busy, ErrBusy; error).
//   - fencegate.lease.wait.duration (histogram, s): each AcquireWait (and
//     Hold with Wait), from the call to its return, time queued included.
//     Outcome: granted, held (the holder already holds it), cancelled (ctx
//     ended), error.
//   - fencegate.lease.handover.duration (histogram, s): for each waiter a
//     release woke, from the moment this Coordinator learned of the release
//     (its own Release, or the database's announcement) to the waiter's
//     grant.
//   - fencegate.lease.grant.headroom (histogram, s): for each grant of a
//     request sent through this Coordinator, when CompleteAcquire makes the
//     Lease: the time it has left on the holder's clock, the term less
//     ClientOptions.ClockSkew and the round trip. Near zero, leases arrive
//     spent.
//   - fencegate.lease.hold.duration (histogram, s): each lease kept by Keep
//     or Hold, from its request to its release (outcome released) or its
//     loss (lost), on the Client's clock.
//   - fencegate.lease.renewals (counter, {renewal}): each renewal of a kept
//     lease. Outcome: on_time; late, renewed after a failed attempt;
//     failed, its batch failed and is retried; refused, the coordinator
//     says the lease is over.
//   - fencegate.lease.lost (counter, {lease}): each kept lease lost.
//     Attribute: reason (deadline, no renewal before the holder's deadline;
//     refused; released, while a renewal was due; renewal_incomplete;
//     born_expired, Keep found no time left).
//
// With CoordinatorOptions.MetricsByResource each also carries
// fencegate.resource. The spans lease.Acquire, lease.AcquireWait (the
// parent of its tries), lease.Renew, lease.RenewBatch and lease.Release
// have fencegate.resource, fencegate.holder, fencegate.fence and
// fencegate.outcome. A Lease carries its acquisition's span context:
// lease.Renew links to it, lease.RenewBatch (the keeper's batches, spans of
// their own) to every lease it renews, and lease.Release to it when it
// comes from Kept.Release or Hold, so one lease's life reads as one trace
// and its links. docs/OBSERVABILITY.md shows how to export them.
package lease
