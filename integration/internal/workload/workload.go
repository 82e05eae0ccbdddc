// Package workload is what a worker process runs: agents that loop acquire →
// fenced writes → renew/release on a handful of hot resources, stall past
// their ttl now and then, and record everything they observe.
package workload

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"modernc.org/sqlite"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/handover"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	fgmysql "github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	fgsqlite "github.com/fencegate/fencegate/sqlstore/sqlite"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// Config is one worker process's part of a history.
type Config struct {
	DSN      string `json:"dsn"`      // postgres://… (through the harness's proxy) or a SQLite path
	Driver   string `json:"driver"`   // Postgres: "pgx" (gate over pgx.Tx) or "sql" (over *sql.Tx)
	Proc     string `json:"proc"`     // "p1.2": worker 1, incarnation 2
	Agents   int    `json:"agents"`   // agent goroutines
	MaxConns int    `json:"maxConns"` // connection pool size; 0 for a default
	History  string `json:"history"`  // the history file to append to

	Resources []string `json:"resources"`
	// External are resources whose fences come from outside the
	// coordinator: the workload's own counter. An agent that takes one draws
	// a fence, admits it with gate.Admit (the reassignment), and writes
	// under it through a gate without VerifyIssued.
	External []string `json:"external"`
	// ExternalProb is the chance that a cycle takes an External resource.
	ExternalProb float64       `json:"externalProb"`
	TTL          time.Duration `json:"ttl"`         // lease term the agents ask for
	ClockSkew    time.Duration `json:"clockSkew"`   // lease.ClientOptions.ClockSkew
	LockTimeout  time.Duration `json:"lockTimeout"` // lease.CoordinatorOptions.LockTimeout
	OpTimeout    time.Duration `json:"opTimeout"`   // bound on one operation
	Until        time.Time     `json:"until"`       // no new cycle starts after this

	// StallProb is the chance, per write, that the agent stalls for
	// StallMin..StallMax times the ttl after its lease check and before the
	// write: the wedged holder.
	StallProb          float64 `json:"stallProb"`
	StallMin, StallMax float64
	// TxStallProb is the chance, per write, of a stall of 0.5..2 ttl inside
	// the write's transaction, after gate.Commit, holding the floor row:
	// half of them before the INSERT, half between the INSERT and COMMIT.
	TxStallProb float64 `json:"txStallProb"`
	// BeginStallProb, when set, is TxStallProb for the writes begun with
	// pgxgate.BeginFenced, whose fence must hold the floor row from BEGIN to
	// COMMIT: only a stall inside the transaction shows it does not.
	BeginStallProb float64 `json:"beginStallProb"`

	// Bypass is the control: writes skip gate.Commit, guarded only by the
	// holder's own (advisory, unsafe) check that its lease has not expired.
	Bypass bool   `json:"bypass"`
	Seed   uint64 `json:"seed"`

	// LateRenewProb is the chance, per lease held through the explicit
	// protocol, that the agent waits past its own deadline and then renews
	// anyway: the coordinator must answer expired unless the lease is still
	// live in database time.
	LateRenewProb float64 `json:"lateRenewProb"`

	// ShortRenewProb is the chance, per write under a lease held through
	// the explicit protocol, that a renewal asking for a term shorter than
	// the time the lease has left follows it; TwinRenewProb that two
	// renewals of the lease sent at once do, the second shorter than the
	// time left half the time. Neither may end the term earlier than it
	// was.
	ShortRenewProb float64 `json:"shortRenewProb"`
	TwinRenewProb  float64 `json:"twinRenewProb"`

	// AbandonProb is the chance, after the agent freed a lease (released
	// it, or handed it over to nobody), that its next cycle acquires the
	// same resource through the explicit protocol with a request that it
	// abandons (Executor.LeaseAbandon, what the coordinator runs for a
	// request whose outcome its sender never learned) before it is sent,
	// and then sends anyway: the late first sending of a spent request, on
	// a resource likely free, which must never be granted.
	AbandonProb float64 `json:"abandonProb"`

	// BatchProb is the chance that a gated write on pgx goes through
	// pgxgate.CommitBatch (BEGIN, the fence, the write and COMMIT in one
	// pipelined round trip), and, of the rest, the chance that it begins
	// with pgxgate.BeginFenced (BEGIN and the fence in one round trip).
	BatchProb float64 `json:"batchProb"`

	// HoldProb is the chance that a cycle runs through lease.Hold (which
	// renews in the background and cancels the work when the lease is lost)
	// instead of the explicit protocol.
	HoldProb float64 `json:"holdProb"`

	// WaitProb is the chance that a cycle waits its turn in the queue:
	// Coordinator.AcquireWait for the explicit protocol, lease.Wait for a
	// cycle through lease.Hold.
	WaitProb float64 `json:"waitProb"`

	// HandOverProb is the chance that a lease held through the explicit
	// protocol ends with a hand-over (handover.Do, or on pgx, one
	// time in BatchProb, handover.CommitBatch): one more fenced
	// write, the release and the grant to the first live waiter in one
	// transaction, instead of a release. One hand-over in eight through
	// handover.Do fails on purpose after its INSERT (history.CauseAbort), so
	// that nothing of it may commit. Not with Bypass.
	HandOverProb float64 `json:"handOverProb"`

	// Announce makes the worker print "commit <op id>" on stdout just before
	// it sends a write's COMMIT, so that the harness can kill it mid-commit,
	// and, so that it can crash the OS right after an acknowledgement,
	// "granted <op id>" once an acquisition is acknowledged, "wrote" once a
	// write is, "renewed" once a renewal is, and "refused" once a refusal
	// is (logged or not).
	Announce bool `json:"announce"`

	Coordination // elections and semaphores: see elect.go
	Claims       // claims of several resources and of paths: see claims.go
}

// Run opens the database and runs cfg.Agents agents until cfg.Until.
func Run(ctx context.Context, cfg Config) error {
	rec, err := history.Create(cfg.History)
	if err != nil {
		return err
	}
	defer rec.Close()
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	if cfg.StallMax <= cfg.StallMin {
		cfg.StallMin, cfg.StallMax = 1.2, 3
	}
	if strings.HasPrefix(cfg.DSN, "postgres") && cfg.Driver == "pgx" {
		pool, err := openWithRetry(ctx, cfg, func(ctx context.Context) (*pgxpool.Pool, error) {
			pc, err := pgxpool.ParseConfig(cfg.DSN)
			if err != nil {
				return nil, err
			}
			pc.MaxConns = int32(maxConns(cfg))
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err == nil {
				if err = pool.Ping(ctx); err != nil {
					pool.Close()
				}
			}
			return pool, err
		})
		if err != nil {
			return err
		}
		defer pool.Close()
		d := pgxv5.New(pool)
		return run(ctx, cfg, rec, d, pool, func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		}, func(ctx context.Context, q string, args ...any) (v int64, err error) {
			err = pool.QueryRow(ctx, q, args...).Scan(&v)
			return v, err
		})
	}
	dsn := cfg.DSN
	if strings.HasPrefix(dsn, "postgres") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += fmt.Sprintf("%spool_max_conns=%d", sep, maxConns(cfg))
	}
	d, err := openWithRetry(ctx, cfg, func(ctx context.Context) (sqlopen.Driver, error) {
		return sqlopen.Open(ctx, dsn)
	})
	if err != nil {
		return err
	}
	defer d.Close()
	d.DB().SetMaxOpenConns(maxConns(cfg))
	return run(ctx, cfg, rec, d, nil, func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}, func(ctx context.Context, q string, args ...any) (v int64, err error) {
		err = d.DB().QueryRowContext(ctx, q, args...).Scan(&v)
		return v, err
	})
}

func maxConns(cfg Config) int {
	if cfg.MaxConns > 0 {
		return cfg.MaxConns
	}
	return cfg.Agents + 4
}

// openWithRetry opens the database, retrying while it is unreachable (a
// restarted worker may come up while Postgres restarts).
func openWithRetry[T any](ctx context.Context, cfg Config, open func(context.Context) (T, error)) (T, error) {
	for {
		octx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		v, err := open(octx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(cfg.Until) {
			return v, err
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return v, err
		}
	}
}

// env is what every agent of a process shares, in the driver's transaction
// type.
type env[TTx any] struct {
	cfg    Config
	rec    *history.Recorder
	driver sqlstore.Driver[TTx]
	gate   *gate.Gate[TTx] // fences from the coordinator (VerifyIssued)
	ext    *gate.Gate[TTx] // fences from the outside source
	coord  *lease.Coordinator
	exec   func(ctx context.Context, tx TTx, q string, args ...any) error
	insert string
	// batch is pgxgate.CommitBatch of one INSERT through the pool (pgx only).
	batch func(ctx context.Context, g *gate.Gate[TTx], tok fence.Token, q string, args ...any) error
	// begin is pgxgate.BeginFenced on the pool: the fence judged at BEGIN
	// (pgx only).
	begin func(ctx context.Context, g *gate.Gate[TTx], tok fence.Token) (TTx, error)
	// draw runs a statement that returns one number, outside any transaction.
	draw func(ctx context.Context, q string, args ...any) (int64, error)
	// batchHandOver is handover.CommitBatch of l with one INSERT
	// through the pool (pgx only).
	batchHandOver func(ctx context.Context, l *lease.Lease, q string, args ...any) (lease.HandOver, error)
}

func run[TTx any](ctx context.Context, cfg Config, rec *history.Recorder, d sqlstore.Driver[TTx], sender pgxv5.BatchSender,
	exec func(context.Context, TTx, string, ...any) error, draw func(context.Context, string, ...any) (int64, error)) error {
	e := &env[TTx]{
		cfg:    cfg,
		rec:    rec,
		driver: d,
		// Fences come from the coordinator in the same database.
		gate:   gate.New(d, &gate.Options{VerifyIssued: true}),
		ext:    gate.New(d, nil),
		coord:  lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: cfg.TTL, LockTimeout: cfg.LockTimeout, WaiterTTL: cfg.WaiterTTL}),
		exec:   exec,
		insert: insertWrite[d.Dialect()],
		draw:   draw,
	}
	if sender != nil {
		e.batch = func(ctx context.Context, g *gate.Gate[TTx], tok fence.Token, q string, args ...any) error {
			b := &pgx.Batch{}
			b.Queue(q, args...)
			return pgxgate.CommitBatch(ctx, any(g).(*gate.Gate[pgx.Tx]), sender, tok, b)
		}
		e.begin = func(ctx context.Context, g *gate.Gate[TTx], tok fence.Token) (TTx, error) {
			tx, err := pgxgate.BeginFenced(ctx, any(g).(*gate.Gate[pgx.Tx]), sender, tok, pgx.TxOptions{})
			if err != nil {
				var none TTx
				return none, err
			}
			return any(tx).(TTx), nil
		}
		e.batchHandOver = func(ctx context.Context, l *lease.Lease, q string, args ...any) (lease.HandOver, error) {
			b := &pgx.Batch{}
			b.Queue(q, args...)
			return handover.CommitBatch(ctx, any(e.gate).(*gate.Gate[pgx.Tx]), sender, e.coord, l, b)
		}
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range cfg.Agents {
		wg.Go(func() {
			if err := e.agent(ctx, i); err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

// agent is one agent's life in this process.
type agent struct {
	// name is the agent's, and its leases' holder: stable across
	// incarnations ("p1/a3"), so that a new incarnation meets its
	// predecessor's leases, and a bug that mistakes one generation of a
	// holder for another can show.
	name   string
	ops    string // the prefix of its op ids, unique to this incarnation: "p1.2/a3"
	client *lease.Client
	clock  holderClock
	rng    *rand.Rand
	seq    int
	// stale is the token of a lease the agent walked away from, released
	// late, during a later cycle: by then it expired, or was superseded,
	// or the same holder holds the resource again under a newer fence.
	stale *fence.Token
	coord *coordAgent // its electors and semaphore, once it used them
	// freed is the resource whose lease it freed last, if its next cycle
	// has yet to begin: a lease row exists there, likely free.
	freed string
	// abandon makes its next explicit acquisition abandon its request
	// before sending it (Config.AbandonProb).
	abandon bool
}

func (e *env[TTx]) agent(ctx context.Context, idx int) error {
	base, _, _ := strings.Cut(e.cfg.Proc, ".")
	a := &agent{
		name:  fmt.Sprintf("%s/a%d", base, idx),
		ops:   fmt.Sprintf("%s/a%d", e.cfg.Proc, idx),
		clock: newHolderClock(),
		rng:   rand.New(rand.NewPCG(e.cfg.Seed, uint64(idx))),
	}
	var err error
	a.client, err = lease.NewClient(&lease.ClientOptions{Holder: a.name, TTL: e.cfg.TTL, ClockSkew: e.cfg.ClockSkew, Clock: a.clock})
	if err != nil {
		return err
	}
	defer a.coordStop()
	for ctx.Err() == nil && time.Now().Before(e.cfg.Until) {
		if a.freed != "" && a.rng.Float64() < e.cfg.AbandonProb {
			a.abandon = true
			l, wait, err := e.acquire(ctx, a, a.freed)
			if err := e.cycleEnd(ctx, a, l, wait, err); err != nil {
				return err
			}
			continue
		}
		a.freed = ""
		if e.coordCycle(ctx, a) || e.claimCycle(ctx, a) {
			continue
		}
		if len(e.cfg.External) > 0 && a.rng.Float64() < e.cfg.ExternalProb {
			sleep(ctx, e.externalCycle(ctx, a, e.cfg.External[a.rng.IntN(len(e.cfg.External))]))
			continue
		}
		res := e.cfg.Resources[a.rng.IntN(len(e.cfg.Resources))]
		if a.rng.Float64() < e.cfg.HoldProb {
			sleep(ctx, e.holdCycle(ctx, a, res))
			continue
		}
		if a.stale != nil && a.rng.IntN(2) == 0 {
			res = a.stale.Resource // back for the resource it walked away from: its late release meets its own newer lease
		}
		acquire := e.acquire
		if a.rng.Float64() < e.cfg.WaitProb {
			acquire = e.acquireWait
		}
		l, wait, err := acquire(ctx, a, res)
		if err := e.cycleEnd(ctx, a, l, wait, err); err != nil {
			return err
		}
	}
	return nil
}

// cycleEnd holds l, if an acquisition returned one, and waits before the
// next cycle.
func (e *env[TTx]) cycleEnd(ctx context.Context, a *agent, l *lease.Lease, wait time.Duration, err error) error {
	a.freed = ""
	if err != nil {
		return err
	}
	if l != nil {
		if err := e.hold(ctx, a, l); err != nil {
			return err
		}
		wait = time.Duration(a.rng.IntN(20)) * time.Millisecond // think
	}
	sleep(ctx, wait)
	return nil
}

func (a *agent) nextOp() string {
	a.seq++
	return fmt.Sprintf("%s#%d", a.ops, a.seq)
}

// believedUntil is l's deadline on the wall clock: how long the holder
// believes it holds the lease. The coordinator stamps a request's send
// instant once it holds a connection, after the invocation, so invocation +
// term alone could end too soon. It is read from the deadline itself, never
// from l.Remaining(), which stops at 0: a holder stalled past its deadline
// (a SIGSTOP between the grant and this reading) would seem to believe until
// the moment it woke. The holder's clock and the wall clock are read from
// one time.Now(): read in two calls, a preemption between them would move
// the deadline by as long as it lasted.
func believedUntil(l *lease.Lease, clk holderClock) int64 {
	now := clk.now()
	return now.UnixNano() + int64(l.Deadline().Sub(clk.at(now)))
}

// holderClock is the agents' lease clock: clock.System, read from a
// time.Time, so that a single reading gives both the holder's instant and
// the wall clock.
type holderClock struct {
	now func() time.Time // time.Now
}

func newHolderClock() holderClock { return holderClock{now: time.Now} }

// Now is the clock.Clock reading.
func (c holderClock) Now() clock.Instant { return c.at(c.now()) }

// at is the clock's reading at t.
func (c holderClock) at(t time.Time) clock.Instant { return clock.SystemAt(t) }

// expiresAt is the coordinator's expiry of g, in the database's clock: on
// the one machine the histories run on, the same wall clock as history.Now.
func expiresAt(g lease.Grant) int64 {
	if g.CoordinatorExpiresAt.IsZero() {
		return 0
	}
	return g.CoordinatorExpiresAt.Time().UnixNano()
}

func (e *env[TTx]) invoke(a *agent, r history.Record) history.Record {
	r.Op, r.Phase, r.Time = a.nextOp(), "inv", history.Now()
	r.Proc, r.Agent, r.Holder = e.cfg.Proc, a.name, a.name
	if err := e.rec.Write(r); err != nil {
		panic(fmt.Sprintf("workload: recording %s: %v", r.Op, err)) // a history with holes would lie
	}
	return r
}

func (e *env[TTx]) ret(inv history.Record, r history.Record, err error) {
	r.Op, r.Phase, r.Time = inv.Op, "ret", history.Now()
	if err != nil {
		r.Err, r.Code = err.Error(), sqlState(err)
		if r.Outcome == history.Fail {
			r.Cause = failCause(err)
		}
	}
	if err := e.rec.Write(r); err != nil {
		panic(fmt.Sprintf("workload: recording %s: %v", r.Op, err))
	}
}

// acquire asks for res. It returns the lease when granted, else how long to
// wait before trying again. A lost reply is retried with the same request id
// (the coordinator answers a retry with the grant it already made), and the
// retries are one operation in the history.
func (e *env[TTx]) acquire(ctx context.Context, a *agent, res string) (*lease.Lease, time.Duration, error) {
	req, err := a.client.BeginAcquire(res)
	if err != nil {
		return nil, 0, err
	}
	abandoned := a.abandon && e.abandonRequest(ctx, a, req)
	a.abandon = false
	inv := e.invoke(a, history.Record{Type: history.Acquire, Resource: res, Request: req.RequestID})
	var out lease.AcquireOutcome
	attempts := 0
	for {
		attempts++
		octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
		out, err = e.coord.Acquire(octx, req)
		cancel()
		if err == nil || Classify(err) != history.Unknown || errors.Is(err, lease.ErrRequestExpired) || attempts == 3 || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Duration(20+a.rng.IntN(60))*time.Millisecond)
	}
	r := history.Record{Attempts: attempts}
	backoff := time.Duration(5+a.rng.IntN(50)) * time.Millisecond
	switch {
	case err != nil:
		r.Outcome = Classify(err)
		if abandoned && attempts == 1 && errors.Is(err, lease.ErrRequestExpired) {
			r.Outcome = history.Fail // spent before it was ever sent: it made nothing
		}
		e.ret(inv, r, err)
		return nil, backoff, nil
	case !out.OK:
		r.Outcome, r.HeldBy, r.HeldFence = history.Denied, out.HeldBy, out.Fence
		e.ret(inv, r, nil)
		wait := max(0, min(out.RetryAfter, e.cfg.TTL)) // negative: see holdCycle
		return nil, time.Duration(a.rng.Int64N(int64(wait)+1)) + 2*time.Millisecond, nil
	}
	r.Outcome, r.Granted, r.TTL = history.OK, out.Grant.Fence, int64(out.Grant.TTL)
	l, err := a.client.CompleteAcquire(req, out.Grant)
	if err == nil {
		r.Until, r.Expires = believedUntil(l, a.clock), expiresAt(out.Grant)
	}
	e.ret(inv, r, err)
	e.announce("granted", inv.Op)
	if err != nil {
		return nil, 0, fmt.Errorf("complete acquire of %s: %w", res, err)
	}
	return l, 0, nil
}

// abandonRequest spends req before it is sent, as the coordinator spends a
// request whose outcome it never learned (Executor.LeaseAbandon), and
// reports whether the database said it did.
func (e *env[TTx]) abandonRequest(ctx context.Context, a *agent, req *lease.AcquireRequest) bool {
	inv := e.invoke(a, history.Record{Type: history.Abandon, Resource: req.Resource, Request: req.RequestID})
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	_, err := e.driver.Executor().LeaseAbandon(octx, &sqlstore.LeaseAbandonParams{
		Resource: req.Resource, Holder: req.Holder, RequestID: req.RequestID, LockTimeout: e.cfg.LockTimeout,
	})
	cancel()
	e.ret(inv, history.Record{Outcome: Classify(err)}, err)
	return err == nil
}

// acquireWait is acquire through Coordinator.AcquireWait: it waits its turn
// in the queue, for up to four terms. AcquireWait makes its own requests, so
// the history holds one acquisition from the call to the answer; any error
// leaves its outcome unknown (an attempt may have been granted as the wait
// ended).
func (e *env[TTx]) acquireWait(ctx context.Context, a *agent, res string) (*lease.Lease, time.Duration, error) {
	inv := e.invoke(a, history.Record{Type: history.Acquire, Resource: res, Request: fmt.Sprintf("%s/wait#%d", a.ops, a.seq+1), Wait: true})
	wctx, cancel := context.WithTimeout(ctx, 4*e.cfg.TTL)
	l, err := e.coord.AcquireWait(wctx, a.client, res)
	cancel()
	if err != nil {
		e.ret(inv, history.Record{Outcome: history.Unknown, Attempts: 1}, err)
		return nil, time.Duration(5+a.rng.IntN(50)) * time.Millisecond, nil
	}
	g := l.Grant()
	e.ret(inv, history.Record{Outcome: history.OK, Granted: g.Fence, TTL: int64(g.TTL), Until: believedUntil(l, a.clock), Expires: expiresAt(g), Attempts: 1}, nil)
	e.announce("granted", inv.Op)
	return l, 0, nil
}

// hold writes under l one to four times, renewing when half the term is
// gone, then releases it or (one time in four) walks away and lets it
// expire. It releases the lease it last walked away from late, after its
// first write.
func (e *env[TTx]) hold(ctx context.Context, a *agent, l *lease.Lease) error {
	writes := 1 + a.rng.IntN(4)
	for range writes {
		// The holder's own check. Advisory: in the control it is the only
		// guard; with the gate it merely saves doomed work.
		if l.Expired() {
			break
		}
		if a.rng.Float64() < e.cfg.StallProb {
			f := e.cfg.StallMin + a.rng.Float64()*(e.cfg.StallMax-e.cfg.StallMin)
			sleep(ctx, time.Duration(f*float64(e.cfg.TTL))) // wedged: a GC pause, a slow model call
		}
		out := e.write(ctx, a, e.gate, l.Token())
		if a.stale != nil {
			e.release(ctx, a, *a.stale)
			a.stale = nil
		}
		if out == history.Refused {
			break
		}
		if l.Expired() {
			continue
		}
		// Renewed when half the term is gone; now and then at once, twice
		// at once, or for less than the time left.
		var renew func(context.Context, *agent, *lease.Lease, bool) bool
		switch x := a.rng.Float64(); {
		case x < e.cfg.TwinRenewProb:
			renew = e.renewTwice
		case x < e.cfg.TwinRenewProb+e.cfg.ShortRenewProb:
			renew = e.renewShort
		case l.Remaining() < e.cfg.TTL/2:
			renew = e.renew
		}
		if renew != nil && !renew(ctx, a, l, false) {
			break
		}
	}
	if a.rng.Float64() < e.cfg.LateRenewProb {
		// Past the holder's own deadline, by a hair (the lease may still be
		// live in database time) or by up to half a term.
		late := time.Duration(a.rng.Int64N(int64(time.Millisecond) * 5))
		if a.rng.IntN(2) == 0 {
			late = time.Duration(a.rng.Int64N(int64(e.cfg.TTL / 2)))
		}
		sleep(ctx, l.Remaining()+late)
		e.renew(ctx, a, l, true)
	}
	if !e.cfg.Bypass && a.rng.Float64() < e.cfg.HandOverProb && !l.Expired() && e.handOver(ctx, a, l) {
		return nil // written, released, and perhaps handed to a waiter
	}
	if a.rng.IntN(4) == 0 {
		tok := l.Token()
		a.stale = &tok
		return nil // walk away: the lease expires at the coordinator
	}
	token, err := a.client.Release(l)
	if err != nil {
		return err
	}
	// A release whose answer was lost is sent again; one in ten is sent
	// twice anyway (the second must free nothing).
	out := e.release(ctx, a, token)
	if out == history.OK {
		a.freed = token.Resource
	}
	if out == history.Unknown || a.rng.IntN(10) == 0 {
		e.release(ctx, a, token)
	}
	return nil
}

// errAbort is the error a hand-over's write returns on purpose, after its
// INSERT: its transaction rolls back, the hand-over's statement never run.
var errAbort = errors.New("workload: the hand-over's write gives up on purpose")

// handOver ends l with handover.Do (or handover.CommitBatch):
// a fenced write, l's release and the grant of its resource to the first
// live waiter, in one transaction. It reports whether l is over on the
// holder's side; when not (the hand-over failed, was refused, or its
// outcome is unknown), l is still the caller's to release.
func (e *env[TTx]) handOver(ctx context.Context, a *agent, l *lease.Lease) bool {
	tok := l.Token()
	via := "do"
	if e.batchHandOver != nil && a.rng.Float64() < e.cfg.BatchProb {
		via = "batch"
	}
	abort := via == "do" && a.rng.IntN(8) == 0
	inv := e.invoke(a, history.Record{Type: history.HandOver, Resource: tok.Resource, Fence: tok.Fence, Via: via})
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	defer cancel()
	args := []any{tok.Resource, tok.Fence, tok.Holder, a.name, inv.Op}
	var off lease.HandOver
	var err error
	if via == "batch" {
		e.announce("commit", inv.Op)
		off, err = e.batchHandOver(octx, l, e.insert, args...)
	} else {
		off, err = handover.Do(octx, e.gate, e.coord, l, func(ctx context.Context, tx TTx) error {
			if err := e.exec(ctx, tx, e.insert, args...); err != nil {
				return err
			}
			if abort {
				return errAbort
			}
			e.announce("commit", inv.Op) // the hand-over's statement, then COMMIT
			return nil
		})
	}
	r := history.Record{Outcome: history.OK}
	var stale *gate.StaleFenceError
	switch {
	case err == nil:
		r.Freed, r.To, r.Granted = off.Released, off.To, off.Fence
		if off.Released && off.To == "" {
			a.freed = tok.Resource
		}
	case errors.Is(err, errAbort):
		r.Outcome = history.Fail // rolled back: nothing was sent after it
	case errors.As(err, &stale):
		refused(&r, stale)
		r.LogFailed = logFailed(err, stale)
	default:
		r.Outcome = Classify(err)
	}
	e.retWrite(inv, r, err)
	return err == nil
}

// release is one Coordinator.Release of token.
func (e *env[TTx]) release(ctx context.Context, a *agent, token fence.Token) history.Outcome {
	inv := e.invoke(a, history.Record{Type: history.Release, Resource: token.Resource, Fence: token.Fence})
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	released, err := e.coord.Release(octx, token)
	cancel()
	r := history.Record{Outcome: Classify(err)}
	if err == nil && !released {
		r.Outcome = history.Noop
	}
	e.ret(inv, r, err)
	return r.Outcome
}

// renew renews l; a renewal whose answer was lost is sent again, the same
// request (its deadline still dated from the first sending).
func (e *env[TTx]) renew(ctx context.Context, a *agent, l *lease.Lease, late bool) bool {
	req, err := a.client.BeginRenewal(l)
	if err != nil {
		return false
	}
	for range 2 {
		ok, out := e.renewOnce(ctx, a, l, req, late)
		if out != history.Unknown {
			return ok
		}
	}
	return false
}

// shortTerm is the term a renewal shorter than the time left asks for.
func (e *env[TTx]) shortTerm() time.Duration { return max(lease.MinTTL, e.cfg.TTL/10) }

// renewShort renews l once with a term shorter than the time it has left:
// the coordinator must leave its expiry as it was.
func (e *env[TTx]) renewShort(ctx context.Context, a *agent, l *lease.Lease, late bool) bool {
	req, err := a.client.BeginRenewal(l)
	if err != nil {
		return false
	}
	req.TTL = e.shortTerm()
	ok, _ := e.renewOnce(ctx, a, l, req, late)
	return ok
}

// renewTwice sends two renewals of l at once (two requests, two
// connections), the second shorter than the time left half the time:
// whichever the database runs last must not end the term earlier than the
// other left it.
func (e *env[TTx]) renewTwice(ctx context.Context, a *agent, l *lease.Lease, late bool) bool {
	var reqs [2]*lease.RenewRequest
	var invs [2]history.Record
	for i := range reqs {
		req, err := a.client.BeginRenewal(l)
		if err != nil {
			return false
		}
		reqs[i] = req
	}
	if a.rng.IntN(2) == 0 {
		reqs[1].TTL = e.shortTerm()
	}
	for i, req := range reqs { // invoked here: the op ids are the agent's, in order
		invs[i] = e.invoke(a, history.Record{Type: history.Renew, Resource: req.Resource, Fence: req.Fence, Late: late})
	}
	var ok [2]bool
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { ok[i], _ = e.sendRenewal(ctx, a, l, reqs[i], invs[i]) })
	}
	wg.Wait()
	return ok[0] || ok[1]
}

func (e *env[TTx]) renewOnce(ctx context.Context, a *agent, l *lease.Lease, req *lease.RenewRequest, late bool) (bool, history.Outcome) {
	inv := e.invoke(a, history.Record{Type: history.Renew, Resource: req.Resource, Fence: req.Fence, Late: late})
	return e.sendRenewal(ctx, a, l, req, inv)
}

// sendRenewal sends req, invoked as inv, and records its return.
func (e *env[TTx]) sendRenewal(ctx context.Context, a *agent, l *lease.Lease, req *lease.RenewRequest, inv history.Record) (bool, history.Outcome) {
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	out, err := e.coord.Renew(octx, req)
	cancel()
	r := history.Record{Outcome: Classify(err)}
	switch {
	case err != nil:
	case !out.OK:
		r.Outcome = history.Expired
	default:
		r.TTL = int64(out.Grant.TTL)
		_, err = a.client.CompleteRenewal(req, out.Grant)
		if err == nil {
			r.Until, r.Expires = believedUntil(l, a.clock), expiresAt(out.Grant)
		}
	}
	e.ret(inv, r, err)
	if err == nil && out.OK {
		e.announce("renewed", inv.Op)
	}
	return err == nil && out.OK, r.Outcome
}

// holdCycle runs one cycle through lease.Hold. Hold's own acquisition,
// renewals and release are not visible to the agent, so the history holds
// what is: an acquire invoked before Hold and answered when the work starts
// (later than the true answer, which only widens the operation), the
// writes, and a release with no observable outcome, invoked when the work
// ends. It returns how long to wait before the next cycle.
func (e *env[TTx]) holdCycle(ctx context.Context, a *agent, res string) time.Duration {
	// Hold makes its own request ids; this one only names the operation.
	reqID := fmt.Sprintf("%s/hold#%d", a.ops, a.seq+1)
	waited := a.rng.Float64() < e.cfg.WaitProb
	inv := e.invoke(a, history.Record{Type: history.Acquire, Resource: res, Request: reqID, Hold: true, Wait: waited})
	var rel history.Record
	started := false
	var opts []lease.HoldOption
	if waited {
		opts = append(opts, lease.Wait(4*e.cfg.TTL)) // its turn in the queue, for up to four terms
	}
	err := lease.Hold(ctx, a.client, e.coord, res, func(ctx context.Context, l *lease.Lease) error {
		started = true
		tok := l.Token()
		e.ret(inv, history.Record{Outcome: history.OK, Granted: tok.Fence, TTL: int64(l.Grant().TTL), Until: believedUntil(l, a.clock), Expires: expiresAt(l.Grant()), Attempts: 1}, nil)
		for range 1 + a.rng.IntN(4) {
			if ctx.Err() != nil { // Hold says the lease is lost: advisory, like Expired
				break
			}
			if a.rng.Float64() < e.cfg.StallProb {
				f := e.cfg.StallMin + a.rng.Float64()*(e.cfg.StallMax-e.cfg.StallMin)
				sleep(context.WithoutCancel(ctx), time.Duration(f*float64(e.cfg.TTL)))
			}
			// Half the writes heed Hold's cancellation; the others are the
			// write that was already on its way when the lease was lost.
			wctx := ctx
			if e.cfg.Bypass || a.rng.IntN(2) == 0 {
				wctx = context.WithoutCancel(ctx)
			}
			if e.write(wctx, a, e.gate, tok) == history.Refused {
				break
			}
		}
		rel = e.invoke(a, history.Record{Type: history.Release, Resource: res, Fence: tok.Fence, Hold: true})
		return nil
	}, opts...)
	if started {
		// Hold released the lease, or found it gone (a no-op): either way
		// the release's effect is not observable here.
		e.ret(rel, history.Record{Outcome: history.Unknown}, err)
		return time.Duration(a.rng.IntN(20)) * time.Millisecond
	}
	r := history.Record{Attempts: 1}
	var held *lease.HeldError
	switch {
	case waited && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		r.Outcome = history.Unknown // the wait ended: an attempt may have been granted as it did
	case errors.As(err, &held):
		r.Outcome, r.HeldBy, r.HeldFence = history.Denied, held.HeldBy, held.Fence
		e.ret(inv, r, nil)
		// RetryAfter is negative when the holder named is already past its
		// expiry (a coordinator that misjudges expiry): retry soon.
		return time.Duration(a.rng.Int64N(int64(max(0, min(held.RetryAfter, e.cfg.TTL)))+1)) + 2*time.Millisecond
	case errors.Is(err, lease.ErrLeaseLost):
		r.Outcome = history.Unknown // granted with no time left, then released: fence unseen
	default:
		r.Outcome = Classify(err)
	}
	e.ret(inv, r, err)
	return time.Duration(5+a.rng.IntN(50)) * time.Millisecond
}

// write is one fenced write: BEGIN, gate.Commit, INSERT, COMMIT; on pgx,
// sometimes pgxgate.CommitBatch, or pgxgate.BeginFenced (BEGIN with the fence),
// INSERT, COMMIT; or the same through gate.Do (a third of the other gated
// writes), which retries what the dialect calls retryable. The row's op id is unique, so a retry of an
// attempt that did commit could not commit twice unnoticed.
func (e *env[TTx]) write(ctx context.Context, a *agent, g *gate.Gate[TTx], tok fence.Token) history.Outcome {
	via := "commit"
	switch {
	case e.cfg.Bypass:
		via = "bypass"
	case e.batch != nil && a.rng.Float64() < e.cfg.BatchProb:
		via = "batch"
	case e.begin != nil && a.rng.Float64() < e.cfg.BatchProb:
		via = "begin"
	case a.rng.IntN(3) == 0:
		via = "do"
	}
	inv := e.invoke(a, history.Record{Type: history.Write, Resource: tok.Resource, Fence: tok.Fence, Via: via})
	octx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	defer cancel()
	// A stall inside the transaction comes before the INSERT or between it
	// and the COMMIT: the row (and its id) is then taken long before the
	// commit lands, which only the observed commit order can judge.
	stallProb := e.cfg.TxStallProb
	if via == "begin" && e.cfg.BeginStallProb > 0 {
		stallProb = e.cfg.BeginStallProb
	}
	txStall, stallAfter := a.rng.Float64() < stallProb, a.rng.IntN(2) == 0
	stall := time.Duration((0.5 + 1.5*a.rng.Float64()) * float64(e.cfg.TTL))
	insert := func(ctx context.Context, tx TTx) error {
		if txStall && !stallAfter {
			sleep(ctx, stall)
		}
		err := e.exec(ctx, tx, e.insert, tok.Resource, tok.Fence, tok.Holder, a.name, inv.Op)
		if err == nil && txStall && stallAfter {
			sleep(ctx, stall)
		}
		return err
	}
	var err error
	committing := false
	switch via {
	case "do":
		err = g.Do(octx, tok, insert)
		committing = err != nil // Do does not say where it failed
	case "batch":
		// One round trip: the fence statement and the INSERT commit
		// together at the pipeline's Sync, or not at all. No stall fits
		// inside it.
		committing = true
		e.announce("commit", inv.Op)
		err = e.batch(octx, g, tok, e.insert, tok.Resource, tok.Fence, tok.Holder, a.name, inv.Op)
	default:
		var tx TTx
		if via == "begin" {
			tx, err = e.begin(octx, g, tok) // refused here, or the floor row held from BEGIN on
		} else {
			tx, err = e.driver.Begin(octx)
		}
		if err == nil {
			if via == "commit" {
				err = g.Commit(octx, tx, tok)
			}
			if err == nil {
				err = insert(octx, tx)
			}
			if err == nil {
				committing = true
				e.announce("commit", inv.Op)
				err = e.driver.Commit(octx, tx)
			}
			if err != nil {
				_ = e.driver.Rollback(context.WithoutCancel(octx), tx)
			}
		}
	}
	r := history.Record{Outcome: history.OK}
	var stale *gate.StaleFenceError
	switch {
	case err == nil:
	case errors.As(err, &stale):
		refused(&r, stale)
		r.LogFailed = logFailed(err, stale)
	case !committing:
		r.Outcome = history.Fail // no COMMIT was sent: nothing can have committed
	case via == "do" || via == "batch":
		r.Outcome = Classify(err)
	default:
		r.Outcome = classifyCommit(err)
	}
	e.retWrite(inv, r, err)
	return r.Outcome
}

// announce prints "<what> <op id>" on stdout when the harness asked for
// retWrite records a write's outcome, as ret, and announces it: "wrote"
// or "refused", for the harness's kills right after an acknowledgement.
func (e *env[TTx]) retWrite(inv, r history.Record, err error) {
	e.ret(inv, r, err)
	switch r.Outcome {
	case history.OK:
		e.announce("wrote", inv.Op)
	case history.Refused:
		e.announce("refused", inv.Op)
	}
}

// announcements (Config.Announce).
func (e *env[TTx]) announce(what, op string) {
	if e.cfg.Announce {
		fmt.Fprintf(os.Stdout, "%s %s\n", what, op)
	}
}

// externalCycle takes res from the outside fence source: it draws the next
// fence (the reassignment), admits it with gate.Admit so that the previous
// holder is refused from now on, and writes under it one to four times,
// stalling like any holder. Nothing stops two agents from taking the
// resource at once: the gate alone keeps the older one out. It returns how
// long to wait before the next cycle.
func (e *env[TTx]) externalCycle(ctx context.Context, a *agent, res string) time.Duration {
	backoff := time.Duration(5+a.rng.IntN(50)) * time.Millisecond
	dctx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	drawn, err := e.draw(dctx, drawExternal[e.driver.Dialect()], int64(ExternalFenceBase))
	cancel()
	if err != nil {
		return backoff // no fence drawn: nothing happened
	}
	tok := fence.Token{Resource: res, Holder: a.name, Fence: drawn}
	inv := e.invoke(a, history.Record{Type: history.Admit, Resource: res, Fence: drawn})
	actx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	err = e.ext.Admit(actx, tok)
	cancel()
	r := history.Record{Outcome: Classify(err)}
	var stale *gate.StaleFenceError
	if errors.As(err, &stale) {
		r.RejSeq, r.Floor, r.FloorBy, r.LogFailed = stale.Seq, stale.Floor, stale.FloorHolder, logFailed(err, stale)
	}
	e.ret(inv, r, err)
	if err != nil {
		return backoff
	}
	for range 1 + a.rng.IntN(4) {
		if a.rng.Float64() < e.cfg.StallProb {
			f := e.cfg.StallMin + a.rng.Float64()*(e.cfg.StallMax-e.cfg.StallMin)
			sleep(ctx, time.Duration(f*float64(e.cfg.TTL)))
		}
		if e.write(ctx, a, e.ext, tok) == history.Refused {
			break
		}
	}
	return time.Duration(a.rng.IntN(20)) * time.Millisecond
}

// Classify tells what an error from a coordinator call says about its
// effect. Only answers that prove nothing committed are Fail: the server
// refused (an SQL error, a lock timeout, SQLite busy) or was never reached.
// What sqlstore.IsOutcomeUnknown says may have committed (a connection lost
// mid-call, a lost reply, an fsync error, a cancelled call), and anything
// unrecognised, is Unknown.
func Classify(err error) history.Outcome {
	if err == nil {
		return history.OK
	}
	err = native(err)
	if errors.Is(err, gate.ErrStaleFence) {
		return history.Refused
	}
	if slices.ContainsFunc(joined(err), uncertain) {
		// An operation's error joined with its cleanup's: a cleanup that
		// could not even connect (lease's "may have been granted, and
		// releasing it failed") does not make the operation a failure.
		return history.Unknown
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return history.Fail
	}
	if sqlstore.IsOutcomeUnknown(err) {
		return history.Unknown
	}
	return knownFailure(err)
}

// joined returns the errors of the first errors.Join of several in err's
// chain, or nil.
func joined(err error) []error {
	for err != nil {
		j, ok := err.(interface{ Unwrap() []error })
		switch {
		case ok && len(j.Unwrap()) == 1: // a mark (sqlstore.WithClass)
			err = j.Unwrap()[0]
		case ok:
			return j.Unwrap()
		default:
			err = errors.Unwrap(err)
		}
	}
	return nil
}

// uncertain reports whether err leaves its operation's outcome unknown by
// itself: IsOutcomeUnknown says so, and not merely for a connection that
// was never made.
func uncertain(err error) bool {
	_, connect := errors.AsType[*pgconn.ConnectError](err)
	return !connect && sqlstore.IsOutcomeUnknown(native(err))
}

// knownFailure is Fail for an error that says the database refused, which
// IsOutcomeUnknown did not find uncertain; Unknown for anything else.
func knownFailure(err error) history.Outcome {
	if errors.Is(err, lease.ErrBusy) || sqlstore.IsRetryable(err) {
		return history.Fail
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return history.Fail
	}
	if _, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		return history.Fail // the server answered with an error
	}
	if _, ok := errors.AsType[*sqlite.Error](err); ok {
		return history.Fail
	}
	return history.Unknown
}

// native marks a database's own error with its driver's classification, so
// that sqlstore.IsRetryable and IsConnLost answer for it.
func native(err error) error {
	if c := pgsql.Classify(err); c != (sqlstore.ErrorClass{}) {
		return sqlstore.WithClass(err, c)
	}
	if c := fgmysql.Classify(err); c != (sqlstore.ErrorClass{}) {
		return sqlstore.WithClass(err, c)
	}
	return sqlstore.WithClass(err, fgsqlite.Classify(err))
}

// refused records stale's refusal in r: its log sequence number, and the
// floor it met and who raised it.
func refused(r *history.Record, stale *gate.StaleFenceError) {
	r.Outcome, r.RejSeq, r.Floor, r.FloorBy = history.Refused, stale.Seq, stale.Floor, stale.FloorHolder
}

// logFailed reports whether a refusal says its logging failed: the gate
// joins the refusal with the logging error (errors.Join). A refusal without
// a log sequence number that says nothing of the kind is for the checker to
// flag.
func logFailed(err error, stale *gate.StaleFenceError) bool {
	j, ok := errors.AsType[interface {
		error
		Unwrap() []error
	}](err)
	return stale.Seq == 0 && ok && len(j.Unwrap()) > 1
}

// sqlState is the SQLSTATE err carries from the server (Postgres,
// MariaDB), or "".
func sqlState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	if myErr, ok := errors.AsType[*gomysql.MySQLError](err); ok && myErr.SQLState != [5]byte{} {
		return string(myErr.SQLState[:])
	}
	return ""
}

// failCause says what a failed operation's error names: the connection or
// the database being away, a conflict to retry, an error the server
// answered with, or nothing of the kind (history.CauseOther), which is what
// a refusal the library did not recognise looks like.
func failCause(err error) string {
	if errors.Is(err, errAbort) {
		return history.CauseAbort
	}
	err = native(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, sql.ErrTxDone),
		errors.Is(err, pgx.ErrTxClosed), errors.Is(err, gomysql.ErrInvalidConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		sqlstore.IsConnLost(err), sqlstore.IsOutcomeUnknown(err):
		return history.CauseConn
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return history.CauseConn
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return history.CauseConn
	}
	if errors.Is(err, lease.ErrBusy) || sqlstore.IsRetryable(err) {
		return history.CauseBusy
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return history.CauseServer
	}
	if _, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		return history.CauseServer
	}
	if _, ok := errors.AsType[*sqlite.Error](err); ok {
		return history.CauseServer
	}
	return history.CauseOther
}

// classifyCommit is Classify for an error from COMMIT itself.
func classifyCommit(err error) history.Outcome {
	if err = native(err); sqlstore.IsOutcomeUnknown(err) {
		return history.Unknown
	}
	_, pgAnswered := errors.AsType[*pgconn.PgError](err)
	_, myAnswered := errors.AsType[*gomysql.MySQLError](err)
	if pgAnswered || myAnswered || sqlstore.IsRetryable(err) {
		return history.Fail // the server answered the COMMIT with an error: rolled back
	}
	return history.Unknown
}

// sleep waits d or until ctx ends, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
