package riverfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/fencegate/fencegate/fence"
)

// The names the trigger writes (migrations/00001_riverfence_attempt.sql
// spells them too): a job's resource and an attempt's holder.
const (
	ResourcePrefix = "river_job:"
	HolderPrefix   = "river attempt "
)

//go:embed migrations/00001_riverfence_attempt.sql
var migration string

// Resource returns the fencegate resource of the River job id.
func Resource(jobID int64) string { return ResourcePrefix + strconv.FormatInt(jobID, 10) }

// Holder returns the holder name of a job's attempt, as the floor and the
// rejection log record it.
func Holder(attempt int) string { return HolderPrefix + strconv.Itoa(attempt) }

// Token returns the fence token of job's current attempt: resource
// Resource(job.ID), holder Holder(job.Attempt), fence job.Attempt.
func Token(job *rivertype.JobRow) (fence.Token, error) {
	return fence.NewToken(Resource(job.ID), Holder(job.Attempt), int64(job.Attempt))
}

// Migrate installs riverfence's trigger on River's river_job table through
// db, whose search_path must find both fencegate's tables and River's (run
// fencegate's and River's migrations first). It is idempotent. The same SQL,
// with goose annotations, is Migration.
func Migrate(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}) error {
	up, _, _ := strings.Cut(migration, "-- +goose Down")
	if _, err := db.Exec(ctx, up); err != nil {
		return fmt.Errorf("riverfence: migrate: %w", err)
	}
	return nil
}

// Migration returns the goose migration Migrate runs, for a project that
// keeps its migrations in goose.
func Migration() string { return migration }

type tokenKey struct{}

// Middleware is a River worker middleware that puts the token of the
// attempt being worked in the work context (TokenFrom). Install it with
// river.Config.Middleware: []rivertype.Middleware{&riverfence.Middleware{}}.
type Middleware struct {
	river.MiddlewareDefaults
}

// Work implements rivertype.WorkerMiddleware. A job whose token is invalid
// (it cannot be: ids and attempts are positive) fails without running.
func (m *Middleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	token, err := Token(job)
	if err != nil {
		return err
	}
	return doInner(context.WithValue(ctx, tokenKey{}, token))
}

// TokenFrom returns the token Middleware put in a work context, and false
// outside a job worked under it.
func TokenFrom(ctx context.Context) (fence.Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(fence.Token)
	return t, ok
}

// LostJobError is CompleteTx's refusal: completing the job in the
// transaction did not complete it for this attempt, because River handed the
// job on (Attempt is the row's) or recorded another outcome (State).
type LostJobError struct {
	JobID     int64
	MyAttempt int
	Attempt   int
	State     rivertype.JobState
}

func (e *LostJobError) Error() string {
	return fmt.Sprintf("riverfence: job %d: attempt %d could not complete it: the job is %s at attempt %d",
		e.JobID, e.MyAttempt, e.State, e.Attempt)
}

// ErrLostJob matches a *LostJobError with errors.Is.
var ErrLostJob = errors.New("riverfence: the attempt lost its job")

// Is makes errors.Is(err, ErrLostJob) true.
func (e *LostJobError) Is(target error) bool { return target == ErrLostJob }

// CompleteTx completes job in tx (river.JobCompleteTx) and fails with a
// *LostJobError unless that moved the job from running to completed under
// job's own attempt. River's JobCompleteTx succeeds on a job that is no
// longer running (it leaves its state alone), and River records a stale
// attempt's outcome on the row without looking at the attempt, so a
// transaction that both writes and completes must check the completion
// happened, and roll back when it did not; the row stays locked until tx
// ends, so the check holds at commit.
func CompleteTx[TArgs river.JobArgs](ctx context.Context, tx pgx.Tx, job *river.Job[TArgs]) (*river.Job[TArgs], error) {
	done, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	if err != nil {
		return nil, err
	}
	if done.State != rivertype.JobStateCompleted || done.Attempt != job.Attempt {
		return nil, &LostJobError{JobID: job.ID, MyAttempt: job.Attempt, Attempt: done.Attempt, State: done.State}
	}
	return done, nil
}
