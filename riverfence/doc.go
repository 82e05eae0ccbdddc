// Package riverfence makes each attempt of a River job (github.com/riverqueue/river,
// on Postgres through riverpgxv5) a fenced holder of the job: a stalled
// attempt that River rescued and handed to a new attempt cannot commit its
// writes, nor its completion of the job, once the new attempt exists.
//
// # The fence is the attempt
//
// River numbers the handings of a job durably: its fetch raises
// river_job.attempt (by one) in the transaction that sets the job running
// for a worker, and the rescuer only moves a stuck job back to be fetched
// again. So (job id, attempt) is a generation of ownership: the resource is
// Resource(job.ID) ("river_job:<id>"), the fence job.Attempt and the holder
// Holder(job.Attempt) ("river attempt <n>"), which puts both attempts in the
// rejection log of a refusal. Attempts are small integers per job; that is
// enough, because a floor is per resource.
//
// The floor must rise where the job is handed out, not when the new attempt
// first writes: otherwise a zombie that wakes after the fetch and before the
// new attempt's first write commits unrefused. Migrate installs a trigger on
// river_job, AFTER UPDATE OF attempt WHEN NEW.attempt > OLD.attempt, that
// calls fencegate's own floor function (fencegate_fence, not strict: the
// same GREATEST upsert the gate runs) for the job's resource with the new
// attempt. It runs inside River's fetch transaction, so:
//
//   - the floor is at the new attempt when, and only when, the fetch commits;
//   - a stale attempt's gate.Commit takes the floor row (FOR NO KEY UPDATE)
//     in its own transaction: if it comes after the fetch, it reads the
//     raised floor and is refused (gate.StaleFenceError); if it comes first,
//     the fetch's trigger waits on its row lock until it ends, so the stale
//     attempt's transaction commits entirely before the job is handed on,
//     while it still owned the job.
//
// There is no third order: no stale attempt commits after the new one was
// handed out. A floor never falls, so if River lowers attempt (a snooze gives
// its attempt back), the next fetch reuses that number with the floor
// unchanged: the snoozed attempt has returned, and must not keep writing in
// the background.
//
// The lock order of that wait is the floor row then the job row for a worker
// that calls gate.Commit first and completes the job later in the same
// transaction, and the job row then the floor row for the fetch: when a
// zombie's transaction and the fetch of its job meet in between, Postgres
// breaks the deadlock by failing one of them. Both fail closed: the zombie's
// write does not commit, or River retries its fetch.
//
// # The worker's side
//
// Middleware (a rivertype.WorkerMiddleware) puts the attempt's token in the
// work context; TokenFrom reads it. The job then writes in a transaction of
// its own, fenced by gate.Commit (or gate.Do, or pgxgate's one-round-trip
// forms) with that token, and completes the job in the same transaction with
// CompleteTx, so that the completion is fenced too: a refused transaction
// neither writes nor completes.
//
// CompleteTx, not river.JobCompleteTx alone: River's completion succeeds on a
// job that is no longer running (it leaves the row as it is), and River
// records a worker's outcome, a zombie's refusal included, on the row of the
// job without looking at the attempt. A zombie's refusal can so move the job
// back to retryable under the new attempt; CompleteTx then refuses the new
// attempt's transaction (LostJobError), and the attempt after it does the
// work once.
//
// The gate for these resources must run with Options.VerifyIssued off: that
// check admits only fences fencegate's own lease coordinator issued (a row of
// fencegate_lease), and no attempt has one, so every attempt would be
// refused as never issued. Use a gate of its own if the rest of the
// application verifies.
//
// # Setup
//
// Run fencegate's Postgres migrations, River's (rivermigrate), then Migrate,
// with a search_path that finds both fencegate's tables and river_job; the
// trigger's function keeps that search_path, whoever fires it. Projects that
// run goose can take Migration's text as one of their migrations instead.
package riverfence
