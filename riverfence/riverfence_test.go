package riverfence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/riverfence"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

type effectArgs struct{}

func (effectArgs) Kind() string { return "effect" }

// attemptRun is one attempt's Work call, held until the test releases it.
type attemptRun struct {
	attempt int
	release chan struct{}
	result  chan error
}

// effectWorker writes one effect row and completes the job in one
// transaction; fenced, under the gate and CompleteTx, unfenced, plainly.
type effectWorker struct {
	river.WorkerDefaults[effectArgs]
	g      *gate.Gate[pgx.Tx]
	pool   *pgxpool.Pool
	fenced bool
	runs   chan *attemptRun
	stop   chan struct{}
	// stall, when it says so, holds an attempt until River handed its job
	// to a later one.
	stall func(*river.Job[effectArgs]) bool
	// stalled, when set, receives each stalled attempt's outcome once it
	// has tried its write.
	stalled chan error
	// kill, when it says so, ends an attempt's connection in the middle of
	// its transaction, after its write.
	kill func(*river.Job[effectArgs]) bool
}

// awaitNextAttempt polls the database until job's row is at a later attempt.
// stopClient stops a test's River client, bounded in time: a worker that
// never returned would otherwise hold the test at its end until go test's
// timeout, with no word of which.
func stopClient(t *testing.T, ctx context.Context, client *river.Client[pgx.Tx]) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := client.StopAndCancel(ctx); err != nil {
		t.Logf("river client did not stop within a minute: %v", err)
	}
}

func awaitNextAttempt(ctx context.Context, pool *pgxpool.Pool, job *river.Job[effectArgs]) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var attempt int
		if err := pool.QueryRow(ctx, "SELECT attempt FROM river_job WHERE id = $1", job.ID).Scan(&attempt); err != nil {
			return err
		}
		if attempt > job.Attempt {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %d stayed at attempt %d", job.ID, attempt)
		}
		time.Sleep(50 * time.Millisecond) // polling the database for a condition
	}
}

func (w *effectWorker) Work(ctx context.Context, job *river.Job[effectArgs]) error {
	if w.stall != nil && w.stall(job) {
		if err := awaitNextAttempt(context.WithoutCancel(ctx), w.pool, job); err != nil {
			return err
		}
		err := w.effect(context.WithoutCancel(ctx), job)
		if w.stalled != nil {
			w.stalled <- err
		}
		return err
	}
	if w.runs == nil {
		return w.effect(ctx, job)
	}
	run := &attemptRun{attempt: job.Attempt, release: make(chan struct{}), result: make(chan error, 1)}
	w.runs <- run
	select {
	case <-run.release:
	case <-w.stop:
		return errors.New("the test ended")
	}
	// A zombie does not heed River's cancellation at JobTimeout: a stalled
	// process learns nothing until it runs again.
	err := w.effect(context.WithoutCancel(ctx), job)
	run.result <- err
	return err
}

func (w *effectWorker) effect(ctx context.Context, job *river.Job[effectArgs]) error {
	token, ok := riverfence.TokenFrom(ctx)
	if !ok {
		return errors.New("no token in the work context")
	}
	var err error
	var tx pgx.Tx
	if w.fenced { // the fence judged in BEGIN's round trip
		tx, err = pgxgate.BeginFenced(ctx, w.g, w.pool, token, pgx.TxOptions{})
	} else {
		tx, err = w.pool.Begin(ctx)
	}
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "INSERT INTO effect (job_id, attempt) VALUES ($1, $2)", job.ID, job.Attempt); err != nil {
		return err
	}
	if w.kill != nil && w.kill(job) {
		_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
		return fmt.Errorf("killed: %w", err)
	}
	if w.fenced {
		_, err = riverfence.CompleteTx(ctx, tx, job)
	} else {
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// retryNow retries a failed or rescued job at once.
type retryNow struct{}

func (retryNow) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

// TestStalledAttemptIsRefused holds a job's first attempt past
// RescueStuckJobsAfter until River's rescuer hands the job to attempt 2,
// then lets the stalled attempt write and complete before attempt 2 does.
// Fenced, the zombie is refused (write and completion) and exactly one
// effect lands; unfenced (no trigger, no gate, plain JobCompleteTx), the
// zombie's write and completion both land: the bug is real.
func TestStalledAttemptIsRefused(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			t.Parallel()
			stalledAttempt(t, fenced)
		})
	}
}

// setup gives a fresh schema with fencegate's, River's and (fenced)
// riverfence's migrations, and the effect table.
func setup(ctx context.Context, t testing.TB, fenced bool) (*pgxpool.Pool, *pgxv5.Driver, *riverpgxv5.Driver) {
	t.Helper()
	pool, err := pgxpool.New(ctx, dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := pgxv5.New(pool)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	if fenced {
		if err := riverfence.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effect (job_id bigint NOT NULL, attempt int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return pool, store, driver
}

func stalledAttempt(t *testing.T, fenced bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, store, driver := setup(ctx, t, fenced)
	w := &effectWorker{g: gate.New(store, nil), pool: pool, fenced: fenced, runs: make(chan *attemptRun, 8), stop: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:              workers,
		Middleware:           []rivertype.Middleware{&riverfence.Middleware{}},
		JobTimeout:           500 * time.Millisecond, // River's rescuer leaves a job alone that has no timeout
		RescueStuckJobsAfter: time.Second,
		RetryPolicy:          retryNow{},
		FetchPollInterval:    100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(w.stop) // free any attempt still held so that Stop returns
		stopClient(t, ctx, client)
	}()

	ins, err := client.Insert(ctx, effectArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func() *attemptRun {
		t.Helper()
		select {
		case run := <-w.runs:
			return run
		case <-ctx.Done():
			t.Fatalf("no attempt started: %v", ctx.Err())
			return nil
		}
	}
	zombie := next() // attempt 1 stalls; River's rescuer runs every 30 s
	t.Logf("attempt 1 started")
	second := next()
	t.Logf("attempt 2 started")
	if zombie.attempt != 1 || second.attempt != 2 {
		t.Fatalf("attempts %d then %d, want 1 then 2", zombie.attempt, second.attempt)
	}

	close(zombie.release)
	zerr := <-zombie.result
	var effects int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM effect").Scan(&effects); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", ins.Job.ID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if !fenced {
		if zerr != nil || effects != 1 || state != "completed" {
			t.Fatalf("unfenced zombie: err %v, %d effects, job %s; want its write and completion to land", zerr, effects, state)
		}
		t.Logf("unfenced: the stalled attempt 1 wrote and completed the job while attempt 2 was running")
		close(second.release)
		<-second.result
		return
	}
	var stale *gate.StaleFenceError
	if !errors.As(zerr, &stale) || effects != 0 || state == "completed" {
		t.Fatalf("fenced zombie: err %v, %d effects, job %s; want a StaleFenceError and nothing landed", zerr, effects, state)
	}
	t.Logf("zombie refused: %v", zerr)

	close(second.release)
	if err := <-second.result; err != nil {
		// River recorded the zombie's error on the row attempt 2 holds; the
		// next attempt does the work (CompleteTx refused attempt 2's).
		t.Logf("attempt 2: %v", err)
		if !errors.Is(err, riverfence.ErrLostJob) {
			t.Fatalf("attempt 2: %v, want nil or ErrLostJob", err)
		}
		close(next().release)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", ins.Job.ID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == "completed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the database for a condition
	}
	var attempts []int
	rows, err := pool.Query(ctx, "SELECT attempt FROM effect")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a int
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, a)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if state != "completed" || len(attempts) != 1 || attempts[0] < 2 {
		t.Fatalf("job %s, effects by attempts %v; want completed with one effect by a later attempt", state, attempts)
	}
	rej, err := w.g.Rejections(ctx, gate.RejectionQuery{Resource: riverfence.Resource(ins.Job.ID)})
	if err != nil || len(rej) == 0 || rej[0].Holder != riverfence.Holder(1) {
		t.Fatalf("rejections %+v, %v; want the zombie's, logged with its attempt", rej, err)
	}
	t.Logf("rejection logged: %+v", rej[0])
}

// TestManyJobsStalledAttempts runs jobs whose first attempts stall, at
// random, until River rescued and handed them on, or have their connection
// killed in the middle of their transaction: every job ends completed with
// exactly one effect, written by the attempt that completed it, and every
// stalled attempt's write is refused.
func TestManyJobsStalledAttempts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pool, store, driver := setup(ctx, t, true)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const jobs = 30
	stalls := make(map[int64]bool, jobs) // both written before the client starts
	kills := make(map[int64]bool, jobs)
	w := &effectWorker{g: gate.New(store, nil), pool: pool, fenced: true, stalled: make(chan error, jobs),
		stall: func(job *river.Job[effectArgs]) bool { return job.Attempt == 1 && stalls[job.ID] },
		kill:  func(job *river.Job[effectArgs]) bool { return job.Attempt == 1 && kills[job.ID] }}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2 * jobs}},
		Workers:              workers,
		Middleware:           []rivertype.Middleware{&riverfence.Middleware{}},
		JobTimeout:           500 * time.Millisecond,
		RescueStuckJobsAfter: time.Second,
		RetryPolicy:          retryNow{},
		FetchPollInterval:    100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: effectArgs{}}
	}
	res, err := client.InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stalled, killed := 0, 0
	for _, r := range res {
		switch rng.IntN(4) {
		case 0:
			stalls[r.Job.ID] = true
			stalled++
		case 1:
			kills[r.Job.ID] = true
			killed++
		}
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopClient(t, ctx, client)
	for done := 0; done < jobs; {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
			t.Fatalf("%d of %d jobs completed: %v", done, jobs, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the database for a condition
	}
	// A stalled attempt tries its write only after it saw its successor
	// start, so the jobs can all be completed before it has: wait for each.
	for i := range stalled {
		select {
		case err := <-w.stalled:
			if !errors.Is(err, gate.ErrStaleFence) {
				t.Errorf("a stalled attempt's write answered %v; want %v", err, gate.ErrStaleFence)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d stalled attempts tried their write before the test's deadline", i, stalled)
		}
	}
	var twice, lost, wrongAttempt int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT job_id FROM effect GROUP BY job_id HAVING count(*) > 1) d),
		(SELECT count(*) FROM river_job j WHERE NOT EXISTS (SELECT 1 FROM effect e WHERE e.job_id = j.id)),
		(SELECT count(*) FROM effect e JOIN river_job j ON j.id = e.job_id WHERE e.attempt <> j.attempt)`).Scan(&twice, &lost, &wrongAttempt); err != nil {
		t.Fatal(err)
	}
	var refused int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT resource) FROM fencegate_rejection WHERE holder = $1", riverfence.Holder(1)).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs, %d first attempts killed, %d stalled, %d of them refused; effects twice %d, lost %d, by another attempt than the completing one %d",
		jobs, killed, stalled, refused, twice, lost, wrongAttempt)
	if twice != 0 || lost != 0 || wrongAttempt != 0 || refused != stalled {
		t.Fatal("want every effect once, by the completing attempt, and every stalled attempt refused")
	}
}

// BenchmarkJob runs b.N River jobs that each write one row and complete in
// the same transaction, fenced (the trigger, gate.Commit, CompleteTx) and
// unfenced (a plain JobCompleteTx), and reports jobs/s: fenced ÷ unfenced is
// riverfence's cost. Compare both in one run, on an otherwise idle machine.
func BenchmarkJob(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) {
			ctx := context.Background()
			pool, store, driver := setup(ctx, b, fenced)
			w := &effectWorker{g: gate.New(store, nil), pool: pool, fenced: fenced}
			workers := river.NewWorkers()
			river.AddWorker(workers, w)
			client, err := river.NewClient(driver, &river.Config{
				Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
				Workers:           workers,
				Middleware:        []rivertype.Middleware{&riverfence.Middleware{}},
				FetchCooldown:     time.Millisecond,
				FetchPollInterval: 10 * time.Millisecond,
			})
			if err != nil {
				b.Fatal(err)
			}
			params := make([]river.InsertManyParams, b.N)
			for i := range params {
				params[i] = river.InsertManyParams{Args: effectArgs{}}
			}
			if _, err := client.InsertMany(ctx, params); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := client.Start(ctx); err != nil {
				b.Fatal(err)
			}
			for done := 0; done < b.N; {
				if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
					b.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond) // polling the database for a condition
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			if err := client.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			var effects int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM effect").Scan(&effects); err != nil {
				b.Fatal(err)
			}
			if effects != b.N {
				b.Fatalf("%d effects for %d jobs", effects, b.N)
			}
		})
	}
}

// TestTriggerRaisesTheFloorAtHandOut checks the trigger alone, without a
// running client: once River's fetch has raised a job's attempt to 2 (done
// here by hand, as the fetch does), attempt 1's gate.Commit is refused
// before attempt 2 has written anything. Without the trigger it is
// admitted: a write outside the completing transaction would land.
func TestTriggerRaisesTheFloorAtHandOut(t *testing.T) {
	for _, trigger := range []bool{true, false} {
		t.Run(fmt.Sprintf("trigger=%v", trigger), func(t *testing.T) {
			ctx := context.Background()
			pool, store, driver := setup(ctx, t, trigger)
			client, err := river.NewClient(driver, &river.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ins, err := client.Insert(ctx, effectArgs{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := pool.Exec(ctx, "UPDATE river_job SET attempt = attempt + 1, state = 'running' WHERE id = $1", ins.Job.ID); err != nil {
					t.Fatal(err)
				}
			}
			token, err := riverfence.Token(&rivertype.JobRow{ID: ins.Job.ID, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			err = gate.New(store, nil).Commit(ctx, tx, token)
			if trigger && !errors.Is(err, gate.ErrStaleFence) {
				t.Fatalf("attempt 1 after attempt 2 was handed out: %v, want refused", err)
			}
			if !trigger && err != nil {
				t.Fatalf("without the trigger: %v, want attempt 1 admitted (the window the trigger closes)", err)
			}
		})
	}
}
