// Package distributed is fencegate's driver profile for distributed SQL
// engines that speak the Postgres protocol (CockroachDB, YugabyteDB,
// Aurora DSQL, Spanner's PostgreSQL interface): a sqlstore.Driver[pgx.Tx]
// over a pgx/v5 pool, like pgxv5.Driver, that needs none of what those
// engines lack.
//
//	d, err := distributed.New(pool, &distributed.Options{MaxClockOffset: 500 * time.Millisecond})
//	err = d.Migrate(ctx)   // migrations/postgresdist: plain tables only
//	g := gate.New(d, nil)  // *gate.Gate[pgx.Tx]
//	c := lease.NewCoordinator(d, nil)
//
// # What it does differently
//
//   - Fences come from a counter row (fencegate_counter, 'fence'),
//     UPDATE ... SET value = value + 1 RETURNING value in the granting
//     transaction, never from a sequence: a cached or bit-reversed
//     sequence hands out values out of order across nodes.
//     Rejection numbers and waiter places come from counter rows too.
//   - No function, no trigger, no PL/pgSQL, no LISTEN/NOTIFY, no advisory
//     lock: every statement is plain SQL sent by the driver. The lease
//     rules (Executor.LeaseAcquire, LeaseRenewBatch) are the step-by-step
//     implementation the SQLite and MySQL drivers share, one statement
//     per step in one transaction, over Postgres statements.
//   - The gate's floor statement always writes the floor row (an upsert),
//     also for a fence equal to the floor, so that under optimistic
//     concurrency control two transactions raising one floor conflict.
//   - No listener (SupportsListener is false; ListenLeases answers
//     sqlstore.ErrNotSupported): a waiting acquisition is handed the
//     lease by its own polling of its place.
//   - Options.MaxClockOffset is added to ClockPrecision, which the lease
//     coordinator takes off every TTL it reports.
//   - Begin and InTx run at SERIALIZABLE (Options.Isolation); InTx runs
//     its function again after a serialization failure (40001), which is
//     also classified retryable, so gate.Gate.Do retries a caller's
//     transaction that failed with it.
//
// # What it guarantees
//
// The same as the default driver: a fence is issued once and fences
// increase strictly (globally, so also per resource), even across
// coordinators and crashes, provided the engine serializes writes to one
// row (by waiting or by aborting one writer) and keeps a committed row; a
// stale holder's write does not commit once a higher fence raised the
// floor. A TTL reported to a holder is shortened by MaxClockOffset, so it
// holds on every node's clock within that offset; if the real offset is
// larger, leases can be taken over early by the excess, and the fence
// still refuses the old holder.
//
// # What it costs, against pgxv5.Driver
//
//   - An acquisition is several round trips in one transaction (set the
//     lock timeout, lock the lease row, read the request, take the fence,
//     write the lease and the request, raise the floor: seven statements,
//     eight for a waiter's turn, between BEGIN and COMMIT) where the
//     default driver sends one function call: about 2.6 times as long on
//     loopback Postgres (docs/DISTRIBUTED.md), more where round trips
//     cross nodes.
//   - Every grant, on any resource, writes the one 'fence' counter row:
//     grants are serialized, and concurrent ones on a busy cluster wait or
//     abort and are retried. A per-resource counter would lift that, but
//     FenceNext and FenceAtLeast (fencegate fence advance) are global.
//   - A floor check with an equal fence writes a row version where the
//     default driver only locks the row.
//   - Hand-over is by polling: a waiter learns of a release at its next
//     touch instead of at once; renewals are one statement per lease.
//   - SERIALIZABLE makes conflicts abort rather than wait: more retries
//     under contention, on plain Postgres too.
//   - No CommitBatch, BeginFenced or write guard (they are pgxv5's and
//     need its functions), no DurabilityWarnings (the engines replicate by
//     consensus; none reports a setting that loses acknowledged commits).
//   - Migrate takes no lock: run it from one process at a time (its
//     statements are idempotent, so a collision is fixed by running it
//     again).
//
// On plain Postgres the profile passes fencegate's conformance suite;
// which engines run its statements as they are is in docs/DISTRIBUTED.md.
package distributed
