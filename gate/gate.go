package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// Options configure a Gate. A nil *Options means all defaults.
type Options struct {
	// VerifyIssued makes Commit refuse a fence that the lease coordinator in
	// the same database never issued to that holder for that resource, so a
	// forged or mistyped fence cannot raise a floor. Set it when fences come
	// from lease.Coordinator on this database; leave it off when they come
	// from elsewhere (etcd revisions, Consul's LockIndex). Defaults to false.
	VerifyIssued bool

	// Logger receives a warning for every refusal. Defaults to discarding;
	// the rejection log in the database is always written.
	Logger *slog.Logger

	// MaxAttempts bounds how often Do runs a transaction that failed with a
	// retryable error (serialization failure, deadlock, lock timeout, SQLite
	// busy). Defaults to 5.
	MaxAttempts int

	// RetryBackoff is the base of Do's jittered exponential backoff between
	// attempts. Defaults to 5ms.
	RetryBackoff time.Duration

	// CleanupTimeout bounds the work done after a failure or a refusal,
	// which runs even when the caller's context is cancelled: rolling the
	// transaction back, reading the floor for a refusal, writing the
	// rejection log, and Do's fallback floor raise. When it runs out (the
	// database does not answer), the call returns anyway, with the
	// transaction unable to commit, and its error says that the refusal may
	// not have been logged. Defaults to 5s.
	CleanupTimeout time.Duration

	// MeterProvider makes the gate's instruments (the package doc's
	// Observability lists them). Defaults to otel.GetMeterProvider(), the
	// global provider, which records nothing until the program installs an
	// OpenTelemetry SDK.
	MeterProvider metric.MeterProvider

	// TracerProvider makes the spans of Commit, Admit, and the drivers'
	// CommitBatch and BeginFenced. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MetricsByResource adds the resource's name (fencegate.resource) to
	// the gate's metric attributes. Defaults to false: resource names are
	// unbounded, and each one makes time series of its own. Spans always
	// carry it.
	MetricsByResource bool
}

// Gate admits writes whose fence is at least the resource's floor, inside
// the writer's own transaction of type TTx (pgx.Tx with pgxv5.Driver,
// *sql.Tx with pgsql.Driver or sqlite.Driver). It is safe for concurrent use.
type Gate[TTx any] struct {
	driver sqlstore.Driver[TTx]
	opts   Options
	logger *slog.Logger
	obs    *obs
}

// New returns a gate over driver. The transaction type follows from the
// driver, so passing another kind of transaction to Commit does not compile.
func New[TTx any](driver sqlstore.Driver[TTx], opts *Options) *Gate[TTx] {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), 5)
	o.RetryBackoff = cmp.Or(max(o.RetryBackoff, 0), 5*time.Millisecond)
	o.CleanupTimeout = cmp.Or(max(o.CleanupTimeout, 0), 5*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate[TTx]{driver: driver, opts: o, logger: o.Logger, obs: newObs(&o)}
}

// Commit admits token inside tx, before the caller's writes: it raises the
// resource's floor to the token's fence (creating it if needed) and holds
// the floor row locked until tx ends, so no higher fence can commit in
// between and nothing below the new floor can commit after. On Postgres that
// is one statement: a fence that already is the floor only locks the row, any
// other takes the GREATEST upsert. SQLite, whose transaction holds the write
// lock from BEGIN, reads first and upserts only when the floor must change.
// (The statements are the driver's: Executor.FloorRaise.)
//
// A set token (fence.Token.Members) is judged member by member in sorted order,
// every member's floor raised and held, and refused if any member is stale,
// each stale member logged with both holders; the first *StaleFenceError is
// the one errors.As finds. A path member is also refused when a directory
// above it was claimed with a higher fence (the package doc's Paths); a
// write to one file under a path claim uses CommitFile.
//
// A fence equal to the floor is admitted: a renewed lease keeps its fence, so
// its in-flight writes stay valid. A lower fence is refused with a
// *StaleFenceError, and the refusal is recorded in the rejection log, which
// survives the rollback. Once the database has refused the token, the
// refusal is reported and logged whatever ctx does next: that work runs
// under Options.CleanupTimeout instead, and if the log cannot be written in
// time the error says so (it still matches ErrStaleFence).
//
// Every error, not only a refusal, leaves tx unable to commit: Commit rolls
// it back itself, so none of the writes in tx can commit even if the error
// is ignored (a later tx.Commit fails with sql.ErrTxDone or pgx.ErrTxClosed).
// That includes invalid input, a cancelled ctx, and a broken connection,
// and holds whatever Options.CleanupTimeout is: when the database does not
// answer the rollback in time, Commit returns with tx already marked
// finished and leaves the rollback's round trip to end in the background.
//
// tx must be the outermost transaction. A pgx savepoint (pgx.Tx.Begin on a
// transaction) is refused with ErrNestedTx before anything runs, also inside
// a type of the caller's that embeds it (struct{ pgx.Tx }): a refusal could
// roll back only the savepoint, and the outer transaction would commit its
// writes unfenced. The savepoint is rolled back; the outer transaction is
// the caller's to roll back. A savepoint kept in a named field behind a
// wrapper's own methods is not recognised (IsNestedTx): never pass one.
func (g *Gate[TTx]) Commit(ctx context.Context, tx TTx, token fence.Token) (err error) {
	ctx, check := g.obs.start(ctx, "commit", token)
	defer check.end(ctx, &err)
	if !simple(token, "") {
		if err := token.Validate(); err != nil {
			cctx, cancel := g.cleanup(ctx)
			defer cancel()
			g.rollback(cctx, tx)
			return err
		}
		return g.commit(ctx, tx, token, "")
	}
	res, err := g.floorRaise(ctx, tx, token)
	if err == nil && res.Admitted {
		return nil
	}
	// Roll back first: tx must not commit, and rolling back releases the
	// floor row (and SQLite's write lock), so the log written on another
	// connection cannot wait on the caller's own tx.
	cctx, cancel := g.cleanup(ctx)
	defer cancel()
	g.rollback(cctx, tx)
	if err != nil {
		return err
	}
	return g.refuse(cctx, token, res)
}

// floorRaise checks Commit's input and raises the floor inside tx.
func (g *Gate[TTx]) floorRaise(ctx context.Context, tx TTx, token fence.Token) (sqlstore.FloorRaiseResult, error) {
	if err := token.Validate(); err != nil {
		return sqlstore.FloorRaiseResult{}, err
	}
	if IsNestedTx(tx) {
		return sqlstore.FloorRaiseResult{}, fmt.Errorf("fencegate: commit %s: %w", token, ErrNestedTx)
	}
	res, err := g.driver.UnwrapExecutor(tx).FloorRaise(ctx, &sqlstore.FloorRaiseParams{
		Resource: token.Resource, Holder: token.Holder, Fence: token.Fence, VerifyIssued: g.opts.VerifyIssued,
	})
	if err != nil {
		return res, fmt.Errorf("fencegate: commit %s: %w", token, err)
	}
	return res, nil
}

// IsNestedTx reports whether tx is a pgx savepoint, which pgx.Tx.Begin on a
// transaction returns, and which Commit and pgxgate.CommitBatch refuse with
// ErrNestedTx: tx itself or, through any depth of embedding, a value that
// embeds one (a caller's struct{ pgx.Tx }). pgx does not export the type, so
// its name tells it; TestCommitRefusesNestedTx keeps the name honest across
// pgx upgrades. A wrapper that keeps the savepoint in a named field, behind
// methods of its own, cannot be told from a transaction by its type (the
// connection does not know either); pgxgate.CommitBatch asks the server
// instead. A *sql.Tx is never nested: database/sql has no savepoints.
func IsNestedTx(tx any) bool {
	return isNested(reflect.ValueOf(tx), 0)
}

// isNested looks for pgx's savepoint type in v and what v embeds.
func isNested(v reflect.Value, depth int) bool {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		if t := v.Type(); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "github.com/jackc/pgx/v5" && t.Elem().Name() == "dbSimulatedNestedTx" {
			return true
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || depth > 8 { // a bound against cycles through embedded pointers
		return false
	}
	for i := range v.NumField() {
		if v.Type().Field(i).Anonymous && isNested(v.Field(i), depth+1) {
			return true
		}
	}
	return false
}

// cleanup returns the context for work that must happen even though ctx
// may be cancelled (the rollback after a failed check, the refusal's log):
// ctx's values, none of its cancellation, and a bound of its own,
// Options.CleanupTimeout from now. Given a context from cleanup, cleanup
// keeps its bound instead of starting another, so the steps of one cleanup
// share one CleanupTimeout.
func (g *Gate[TTx]) cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Value(cleanupKey{}) != nil {
		return context.WithCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.CleanupTimeout)
	return context.WithValue(ctx, cleanupKey{}, true), cancel
}

// cleanupKey marks a context made by cleanup.
type cleanupKey struct{}

// rollback ends tx so that it cannot commit. Every driver's Rollback marks
// tx finished before it returns, even when ctx ends first or the database
// fails (the database rolls back when the connection goes), so a failure
// leaves nothing to commit and is only logged.
func (g *Gate[TTx]) rollback(ctx context.Context, tx TTx) {
	if err := g.driver.Rollback(ctx, tx); err != nil {
		g.logger.WarnContext(ctx, "fencegate: rollback failed; the transaction cannot commit", "error", err)
	}
}

// refuse logs a refusal and returns it as a *StaleFenceError; ctx is a
// cleanup context. A fence that was not issued (nothing written) gets the
// current floor read, to tell a fence below the floor (stale) from one that
// never existed; a failed read is tried again until ctx ends, and when the
// floor still cannot be read nothing is logged (the record would be wrong).
// When the floor cannot be read or the log cannot be written the error says
// so too, and still matches ErrStaleFence.
func (g *Gate[TTx]) refuse(ctx context.Context, token fence.Token, res sqlstore.FloorRaiseResult) error {
	if !res.Issued {
		f, err := g.readFloor(ctx, token.Resource)
		if err != nil {
			g.obs.refusal(ctx, token, false)
			// Without the floor a superseded fence would be logged as one
			// never issued: a false record is worse than none. The token is
			// refused all the same (no such lease is live).
			return errors.Join(&StaleFenceError{Resource: token.Resource, Holder: token.Holder, Fence: token.Fence},
				fmt.Errorf("fencegate: no live lease holds this fence, and the floor could not be read, so the refusal may not have been logged: %w", err))
		}
		res.Floor, res.FloorHolder = f.Floor, f.Holder
	}
	var errs []error
	notIssued := !res.Issued && token.Fence >= res.Floor
	rej, logErr := g.logRefusal(ctx, sqlstore.Rejection{
		Resource: token.Resource, Fence: token.Fence, Holder: token.Holder,
		Floor: res.Floor, FloorHolder: res.FloorHolder, NotIssued: notIssued,
	})
	stale := &StaleFenceError{
		Resource: token.Resource, Holder: token.Holder, Fence: token.Fence,
		Floor: res.Floor, FloorHolder: res.FloorHolder, NotIssued: notIssued, Seq: rej.Seq, At: rej.At,
	}
	g.logger.WarnContext(ctx, "fencegate: refused fence",
		"resource", token.Resource, "holder", token.Holder, "fence", token.Fence,
		"floor", res.Floor, "floor_holder", res.FloorHolder, "not_issued", notIssued, "rejection_seq", rej.Seq)
	g.obs.refusal(ctx, token, logErr == nil)
	if logErr != nil {
		errs = append(errs, fmt.Errorf("fencegate: the refusal may not have been logged: %w", logErr))
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{stale}, errs...)...)
	}
	return stale
}

// logRefusal writes r, a refusal's record: by the SQL protocol's
// fencegate_log_refusal where the driver has it (sqlstore.RefusalLogger),
// the call a client in any language makes, which records the refusal as the
// database finds it; as given otherwise, or when the database finds none
// (which a refusal seen here cannot be, short of a fence forged ahead of
// the counter and issued since: a record is never lost).
func (g *Gate[TTx]) logRefusal(ctx context.Context, r sqlstore.Rejection) (sqlstore.Rejection, error) {
	ex := g.driver.Executor()
	if l, ok := ex.(sqlstore.RefusalLogger); ok {
		rej, logged, err := l.LogRefusal(ctx, r.Resource, r.Holder, r.Fence)
		if err != nil || logged {
			return rej, err
		}
	}
	return ex.RejectionInsert(ctx, r)
}

// readFloor reads a resource's floor for a refusal's record, trying again
// (a cut connection fails once, the pool then dials anew) until ctx, a
// cleanup context, ends. A resource with no floor reads as floor 0.
func (g *Gate[TTx]) readFloor(ctx context.Context, resource string) (sqlstore.Floor, error) {
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		f, err := g.driver.Executor().FloorGet(ctx, resource)
		if err == nil || errors.Is(err, sqlstore.ErrNotFound) {
			return f, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return sqlstore.Floor{}, errors.Join(err, ctx.Err())
		case <-timer.C:
		}
	}
}

// Do runs fn in a new transaction guarded by token: it begins, calls Commit,
// runs fn, and commits. If any step fails with an error the dialect marks
// retryable (sqlstore.IsRetryable, after Store.ClassifyError), the whole
// transaction runs again, up to Options.MaxAttempts times; fn must therefore
// be safe to run more than once.
// A refused token is never retried. fn's own errors roll back and are
// returned as they are; the token's floor is then raised anyway, in a
// transaction of its own, so a failure half-way still fences out older
// holders (the raise costs a transaction only on that failure path).
func (g *Gate[TTx]) Do(ctx context.Context, token fence.Token, fn func(ctx context.Context, tx TTx) error) error {
	if err := token.Validate(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := g.doOnce(ctx, token, fn)
		if err == nil || !g.retryable(err) || attempt >= g.opts.MaxAttempts {
			return err
		}
		backoff := g.opts.RetryBackoff << min(attempt-1, 6)
		backoff = backoff/2 + rand.N(backoff/2+1) // jitter: a stampede of retries would collide again
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return errors.Join(err, ctx.Err())
		case <-timer.C:
		}
	}
}

func (g *Gate[TTx]) doOnce(ctx context.Context, token fence.Token, fn func(ctx context.Context, tx TTx) error) error {
	tx, err := g.driver.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fencegate: begin: %w", err)
	}
	defer func() { // after a commit a no-op; after a panic in fn, not
		cctx, cancel := g.cleanup(ctx)
		defer cancel()
		_ = g.driver.Rollback(cctx, tx)
	}()
	if err := g.Commit(ctx, tx, token); err != nil {
		return err // tx is rolled back
	}
	if err := fn(ctx, tx); err != nil {
		cctx, cancel := g.cleanup(ctx)
		defer cancel()
		g.rollback(cctx, tx)
		if !g.retryable(err) {
			// Best effort, and never logged as a refusal: the write failed
			// either way, and a lower result means a newer fence got there.
			if _, rerr := g.raise(cctx, token); rerr != nil {
				g.logger.WarnContext(ctx, "fencegate: raising the floor after a failed write failed", "error", rerr)
			}
		}
		return err
	}
	if err := g.driver.Commit(ctx, tx); err != nil {
		return fmt.Errorf("fencegate: commit: %w", err)
	}
	return nil
}

// retryable asks the driver about err, which may come from the caller's own
// statements and so be the database's native error.
func (g *Gate[TTx]) retryable(err error) bool {
	return sqlstore.IsRetryable(g.driver.ClassifyError(err))
}

// Admit raises the resource's floor to token's fence in a transaction of its
// own, without a write: a coordinator outside this database calls it when it
// reassigns a resource, so the previous holder is refused even before the
// new one writes. (lease.Coordinator does the same inside its acquiring
// transaction.) A fence below the floor is refused and logged like Commit's,
// and so is, under Options.VerifyIssued, a fence the co-located coordinator
// never issued (ErrFenceNotIssued): the floor is then left as it was.
func (g *Gate[TTx]) Admit(ctx context.Context, token fence.Token) (err error) {
	ctx, check := g.obs.start(ctx, "admit", token)
	defer check.end(ctx, &err)
	if err := token.Validate(); err != nil {
		return err
	}
	if !simple(token, "") {
		var refused []refusal
		err := g.driver.InTx(ctx, func(ex sqlstore.Executor) error {
			var err error
			if refused, err = g.admitSet(ctx, ex, token); err == nil && len(refused) > 0 {
				return errRefused // roll the raises of the other members back
			}
			return err
		})
		if err != nil && !errors.Is(err, errRefused) {
			return fmt.Errorf("fencegate: admit %s: %w", token, err)
		}
		if len(refused) > 0 {
			cctx, cancel := g.cleanup(ctx)
			defer cancel()
			return g.refuseSet(cctx, token, refused)
		}
		return nil
	}
	res, err := g.raise(ctx, token)
	if err != nil {
		return fmt.Errorf("fencegate: admit %s: %w", token, err)
	}
	if !res.Admitted {
		cctx, cancel := g.cleanup(ctx)
		defer cancel()
		return g.refuse(cctx, token, res)
	}
	return nil
}

// errRefused makes InTx roll back a set's Admit that was refused.
var errRefused = errors.New("fencegate: refused")

// raise raises the floor to token's fence in a transaction of its own
// (under VerifyIssued, only for a fence the coordinator issued). For a set
// or path token it raises every member's, as Admit does, and reports only
// whether all were admitted.
func (g *Gate[TTx]) raise(ctx context.Context, token fence.Token) (res sqlstore.FloorRaiseResult, err error) {
	if !simple(token, "") {
		err = g.driver.InTx(ctx, func(ex sqlstore.Executor) error {
			refused, err := g.admitSet(ctx, ex, token)
			if err == nil && len(refused) == 0 {
				res = sqlstore.FloorRaiseResult{Issued: true, Admitted: true, Floor: token.Fence, FloorHolder: token.Holder}
			}
			return err // a refused member's raise commits no lower floor: GREATEST keeps the higher
		})
		return res, err
	}
	err = g.driver.InTx(ctx, func(ex sqlstore.Executor) error {
		res, err = ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{
			Resource: token.Resource, Holder: token.Holder, Fence: token.Fence, VerifyIssued: g.opts.VerifyIssued,
		})
		return err
	})
	return res, err
}

// Floor reads a resource's floor. It returns an error matching
// sqlstore.ErrNotFound if no fence was ever admitted for it.
//
// Advisory only: the floor can rise the moment after it is read. Never
// branch a write on it; put the write behind Commit.
func (g *Gate[TTx]) Floor(ctx context.Context, resource string) (sqlstore.Floor, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return sqlstore.Floor{}, err
	}
	return g.driver.Executor().FloorGet(ctx, resource)
}

// Floors reads every floor, ordered by resource. Advisory only, like Floor.
func (g *Gate[TTx]) Floors(ctx context.Context) ([]sqlstore.Floor, error) {
	return g.driver.Executor().FloorList(ctx)
}

// WouldAdmit reports whether token's fence is at least the current floor.
//
// Advisory only, and unsafe to branch a write on: the answer can be wrong by
// the time the write lands, which is the very race fencing exists to close.
// It is for dashboards and early exits; the write must still go through
// Commit.
func (g *Gate[TTx]) WouldAdmit(ctx context.Context, token fence.Token) (bool, error) {
	if err := token.Validate(); err != nil {
		return false, err
	}
	for _, m := range token.Members() {
		f, err := g.Floor(ctx, m)
		if errors.Is(err, sqlstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if token.Fence < f.Floor {
			return false, nil
		}
	}
	return true, nil
}

// RejectionQuery selects records of the rejection log.
type RejectionQuery struct {
	// Resource restricts the records to one resource. Defaults to all.
	Resource string
	// AfterSeq returns only records with a higher sequence number, for
	// paging or tailing: pass the Seq of the last record read. Defaults to
	// 0 (from the start).
	AfterSeq int64
	// Limit bounds how many records come back; a page shorter than Limit is
	// the last. Defaults to 100 (0 or less). AllRejections pages for you.
	Limit int
	// Newest returns the newest records above AfterSeq first, for a glance
	// at the latest; it cannot page backwards. Defaults to oldest first.
	Newest bool
}

// Rejections reads the rejection log: every refused token with both holders,
// both fences, and its sequence number.
func (g *Gate[TTx]) Rejections(ctx context.Context, q RejectionQuery) ([]sqlstore.Rejection, error) {
	if q.Resource != "" {
		if err := fence.ValidateResource(q.Resource); err != nil {
			return nil, err
		}
	}
	return g.driver.Executor().RejectionList(ctx, &sqlstore.RejectionListParams{
		Resource: q.Resource, AfterSeq: q.AfterSeq, Limit: q.Limit, Newest: q.Newest,
	})
}

// Driver returns the driver g was made with, for a caller that runs
// fencegate statements of its own in the transactions g admits
// (handover.Do).
func (g *Gate[TTx]) Driver() sqlstore.Driver[TTx] { return g.driver }
