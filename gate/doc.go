// Package gate makes a SQL database refuse writes from lock holders who lost
// their lock without knowing it.
//
// # The problem
//
// A holder of a lease can stall (a GC pause, a slow model call, a paused VM)
// past its expiry; the resource is granted to a successor; the stale holder
// wakes up and writes anyway. A holder-side "is my lease still valid?" check
// cannot stop that: it is true when made and meaningless when the write lands.
//
// # Fences and floors
//
// Every lease carries a fence, a number that only grows from one generation
// of ownership to the next. The gate keeps, per resource, the highest fence it
// has admitted: the floor. Commit runs a conditional upsert in the caller's
// own transaction that raises the floor to max(floor, fence) and reports
// whether the token was admitted; the caller's writes follow in the same
// transaction, so the check and the write commit or abort together:
//
//	tx, _ := pool.Begin(ctx)
//	if err := g.Commit(ctx, tx, lease.Token()); err != nil {
//		return err // *gate.StaleFenceError or another error: tx is already rolled back
//	}
//	applyTheChange(ctx, tx)
//	return tx.Commit(ctx)
//
// Equal fences are admitted (a renewed lease keeps its fence), lower ones are
// refused with a *StaleFenceError and recorded in the rejection log
// (Rejections), which survives the refused transaction's rollback.
//
// # Failing closed
//
// Every error from Commit, not only a refusal, rolls the caller's
// transaction back, so a caller that ignores it and commits anyway commits
// nothing; pgxgate.CommitBatch does the same for a pgx.Tx. Once the database
// has refused a token, the refusal is returned and logged even if the
// caller's context is cancelled: that work, like every rollback and Do's fallback
// raise, runs under Options.CleanupTimeout rather than the caller's context,
// and an error says when the log may not have been written. A pgx savepoint
// is refused with ErrNestedTx: pass the outermost transaction.
//
// # Transaction types
//
// A Gate is generic over the caller's transaction type, fixed by its driver:
// gate.New(pgxv5.New(pool), nil) takes pgx.Tx, and gate.New(sqlite.New(db),
// nil) or gate.New(pgsql.New(db), nil) takes *sql.Tx. Passing the other kind
// does not compile. The gate imports no driver: the SQL is the driver's.
// pgxgate.CommitBatch is the one-round-trip fenced write on pgx, and
// pgxgate.BeginFenced begins a pgx transaction with the fence already judged,
// in BEGIN's round trip.
//
// # Where fences come from
//
// Any source of numbers that only grow per resource works: fencegate's own
// lease.Coordinator, etcd revisions, Consul's LockIndex. When the coordinator
// is fencegate's, in the same database, set Options.VerifyIssued so a fence
// it never issued (forged, mistyped, made up) is refused without raising the
// floor.
//
// # Fences from outside
//
// A lock service outside the database plugs in when its fence is strictly
// greater for every later grant of a resource (equal only for the same
// grant, renewed), and durable: never handed out again after a restart or a
// failover of the service. Build the token with fence.NewToken, leave VerifyIssued
// off, and keep one rule:
//
// Admit the token at acquisition, before reading anything the write depends
// on, or do that read inside the fenced transaction, after Commit.
//
// Commit alone orders writes, not the reads before them. A is granted fence
// 1, reads the counter (0) and stalls; its lock expires and B is granted
// fence 2 and reads 0 too; A wakes and commits 1 (admitted: no fence above 1
// has reached the database); B commits 1 under fence 2 (admitted). Both
// writes were acknowledged and one increment is lost. Admitting 2 when B is
// granted refuses A's write, since the floor is 2 before B reads; reading
// after Commit, the floor row held locked, makes the read as fenced as the
// write. The etcdfence module's Locker admits at acquisition itself.
//
// Fences that fit: etcd's revision of the lock key's creation (etcdfence),
// Consul's LockIndex, the sequence number of a ZooKeeper sequential znode,
// a Kubernetes Lease's leaseTransitions (if every holder increments it on
// takeover). A service whose numbers restart (a rebuilt cluster) needs an
// epoch above them, since a floor is never lowered.
//
// # Tables
//
// A gate alone, with fences from outside, reads and writes two tables:
// fencegate_floor and fencegate_rejection (and, on Postgres, calls the
// function fencegate_fence; under VerifyIssued it also reads
// fencegate_lease; a path token also locks rows of fencegate_path_lock).
// The driver's Migrate creates them with the rest of
// fencegate's schema, since the migrations are one sequence; the lease
// coordinator's tables stay empty and cost nothing.
//
// # The guarantee
//
// Committed writes on a resource carry non-decreasing fences in commit order,
// and a write under fence N never commits after a write under a fence above N
// has committed. Writes that bypass the gate are outside the guarantee.
//
// # Sets of resources
//
// A claim may name several resources at once (lease.Client.BeginAcquireSet,
// or fence.NewSetToken for fences from outside), granted together under one
// fence. Its token names them all (fence.Token.Members; text form fg2:...), and
// Commit, Do, Admit, CommitFile and the pgxgate calls judge every member in
// the write's transaction, in sorted order, raising and holding each
// member's floor: the write is refused if any member is stale, and each
// stale member is logged with both holders. A set holds at most
// fence.MaxSetMembers names, no name twice, and no path together with a
// directory above it.
//
// # Paths
//
// A resource can name a path under a root the caller chose (fence.PathResource):
// "path:src/a.go" a file, "path:src/" a directory and everything below it.
// Two claims conflict when a path of one equals, contains or is contained
// in a path of the other; siblings never conflict ("path:src/a.go" says
// nothing about "path:src/b.go"). The guarantee, per file F: writes to F
// land in the order of the fences of the claims that covered F, and a
// write under fence f is refused once a claim covering F with a fence above
// f was granted, or a write to F under a higher fence committed.
//
// It takes two halves, each of which the tests show is needed:
//
//   - The grant: a claim of a path locks that path exclusively and the
//     directories above it shared (fencegate_path_lock, in sorted order,
//     before any lease or floor row), refuses when a directory above it or
//     (for a directory) anything below it holds a live lease, and raises
//     the floor of every member, directories included, in the granting
//     transaction.
//   - The write: CommitFile(tx, token, F) takes the locks of F's
//     directories shared and refuses when the floor of one of them is
//     above f (a claim of it was granted with a higher fence), then raises
//     and holds the floors of the token's members and of F itself.
//
// Why it holds: a claim covering F names F or one of its directories D;
// its grant raises that floor to its fence g. A later write under f < g to
// F checks F's floor and every directory's above F, D among them, so it
// is refused. A write in flight holds D's lock shared (or, with D a
// member, D's floor row), so D's grant waits for it to end: the write
// lands before the grant, in fence order. Two overlapping claims both
// lock the shallower path (one exclusively), so they cannot both be
// granted; siblings take only shared locks on their common directories.
// A plain resource name is only ever equal to itself, as before paths.
//
// # Isolation
//
// Commit is designed for READ COMMITTED, Postgres's default: concurrent
// writers of one resource queue on the floor row. Under REPEATABLE READ or
// SERIALIZABLE the same race ends in a serialization failure, which Do
// retries (sqlstore.IsRetryable).
//
// # Observability
//
// A Gate reports to OpenTelemetry through Options.MeterProvider and
// Options.TracerProvider, the global providers by default: until the
// program installs an SDK they record nothing, at a cost lost in a
// round trip's noise (bench/, scenario otel). The instruments, of scope
// github.com/fencegate/fencegate/gate:
//
//   - fencegate.gate.decisions (counter, {decision}): one per fence check,
//     when it ends. Attributes: operation (commit, admit, commit_batch,
//     begin_fenced) and outcome (admitted; refused, a stale or never
//     issued fence; error, no decision: invalid input, a savepoint, a
//     cancelled ctx, a broken connection). Do counts each attempt's
//     Commit.
//   - fencegate.gate.commit.duration (histogram, s): the same checks'
//     time, from the call to the decision, a refusal's rollback and
//     rejection log write included; the same attributes.
//   - fencegate.gate.refusals (counter, {refusal}): one per refusal, once
//     its record is written or given up. Attribute: logged (false when the
//     rejection log could not be written or the floor read; the error says
//     so too).
//
// With Options.MetricsByResource each also carries fencegate.resource.
// The spans gate.Commit, gate.Admit, pgxgate.CommitBatch and
// pgxgate.BeginFenced are children of ctx's span, with fencegate.resource,
// fencegate.holder, fencegate.fence, fencegate.operation and
// fencegate.outcome; a refused one has an error status and
// fencegate.floor, fencegate.floor_holder and fencegate.not_issued.
// docs/OBSERVABILITY.md shows how to export them.
package gate
