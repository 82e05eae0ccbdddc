package sqlstoretest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Rules runs every lease rule, one row of a table each, on s: through its
// own Executor (a transaction per rule), inside InTx (the caller's
// transaction), and through Stepwise(s) (the shared step-by-step
// implementation over s's statements). Every row has a resource of its
// own, so that one store serves them all.
func Rules(t *testing.T, s sqlstore.Store) {
	t.Helper()
	for _, m := range []struct {
		name string
		s    sqlstore.Store
		do   func(st sqlstore.Store, fn func(sqlstore.Executor) error) error
	}{
		{"Executor", s, func(st sqlstore.Store, fn func(sqlstore.Executor) error) error { return fn(st.Executor()) }},
		{"InTx", s, func(st sqlstore.Store, fn func(sqlstore.Executor) error) error { return st.InTx(ctx, fn) }},
		{"Stepwise", Stepwise(s), func(st sqlstore.Store, fn func(sqlstore.Executor) error) error { return fn(st.Executor()) }},
	} {
		t.Run(m.name, func(t *testing.T) {
			e := &env{s: s, mode: m.name, names: s.Dialect() == "postgres" && m.name != "Stepwise",
				do: func(fn func(sqlstore.Executor) error) error { return m.do(m.s, fn) }}
			t.Run("Acquire", func(t *testing.T) { acquireRules(t, e.with(t, "acquire")) })
			t.Run("Renew", func(t *testing.T) { renewRules(t, e.with(t, "renew")) })
			t.Run("Release", func(t *testing.T) { releaseRules(t, e.with(t, "release")) })
			t.Run("Abandon", func(t *testing.T) { abandonRules(t, e.with(t, "abandon")) })
			t.Run("HandOver", func(t *testing.T) { handOverRules(t, e.with(t, "handover")) })
		})
	}
}

// env is one mode of Rules: do runs the rule under test; everything else
// (the given state, the reads that check it) goes through s's Executor.
type env struct {
	t     *testing.T
	s     sqlstore.Store
	mode  string
	names bool // releases name the first waiter (Postgres's own SQL)
	do    func(fn func(sqlstore.Executor) error) error
	area  string
	res   string // the row's resource
	n     int    // request ids handed out
}

func (e *env) with(t *testing.T, area string) *env {
	c := *e
	c.t, c.area = t, area
	return &c
}

// row returns the env of one row, on a resource of its own.
func (e *env) row(t *testing.T, name string) *env {
	c := *e
	c.t, c.res = t, fmt.Sprintf("%s/%s/%s", e.mode, e.area, name)
	return &c
}

// given acquires the row's resource for holder under request, through the
// store's Executor, and fails unless it is granted.
func (e *env) given(holder, request string, ttl time.Duration) sqlstore.LeaseRow {
	e.t.Helper()
	res, err := e.s.Executor().LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
		Resource: e.res, Holder: holder, RequestID: request, TTL: ttl, LockTimeout: time.Second,
	})
	if err != nil || res.Status != sqlstore.AcquireGranted {
		e.t.Fatalf("given: LeaseAcquire(%s, %s, %s) = %+v, %v; want granted", e.res, holder, request, res, err)
	}
	return res.Lease
}

// givenReleased acquires and releases the row's resource.
func (e *env) givenReleased(holder, request string) sqlstore.LeaseRow {
	e.t.Helper()
	l := e.given(holder, request, minute)
	if !release(e.t, e.s.Executor(), e.res, holder, l.Fence) {
		e.t.Fatalf("given: release of %+v released nothing", l)
	}
	return l
}

// givenExpired acquires the row's resource for a short term and waits, on
// the database's clock, until it is over.
func (e *env) givenExpired(holder, request string) sqlstore.LeaseRow {
	e.t.Helper()
	l := e.given(holder, request, 20*time.Millisecond)
	for {
		cur, err := e.s.Executor().LeaseGet(ctx, e.res)
		if err != nil {
			e.t.Fatal(err)
		}
		if !cur.Live() {
			return l
		}
		time.Sleep(cur.ExpiresAt.Sub(cur.Now) + time.Millisecond) // the database's clock, not a goroutine, is waited for
	}
}

// givenFloor raises the row's resource's floor far above any fence.
func (e *env) givenFloor() int64 {
	e.t.Helper()
	const high = 1 << 40
	raise(e.t, e.s.Executor(), sqlstore.FloorRaiseParams{Resource: e.res, Holder: "elsewhere", Fence: high})
	return high
}

// givenWaiter queues a waiter on the row's resource and returns its place.
func (e *env) givenWaiter(holder string) int64 {
	e.t.Helper()
	seq, err := e.s.Executor().WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: e.res, Holder: holder, TTL: minute})
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

func (e *env) lease() (sqlstore.LeaseRow, error) { return e.s.Executor().LeaseGet(ctx, e.res) }

func (e *env) queued(seq int64) bool {
	e.t.Helper()
	ws, err := e.s.Executor().WaiterList(ctx, e.res)
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.ContainsFunc(ws, func(w sqlstore.Waiter) bool { return w.Seq == seq })
}

func (e *env) requestFence(request string) int64 {
	e.t.Helper()
	f, err := e.s.Executor().RequestFence(ctx, e.res, request)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// acquireRule is one rule of Executor.LeaseAcquire: the resource as given,
// the acquisition, the status it must answer and what else must hold.
type acquireRule struct {
	name            string
	given           func(e *env) (prior sqlstore.LeaseRow, waiter int64)
	holder, request string
	want            sqlstore.AcquireStatus
	then            func(e *env, prior sqlstore.LeaseRow, waiter int64, res sqlstore.LeaseAcquireResult)
}

var acquireTable = []acquireRule{
	{
		name:   "free, never leased: granted, the floor raised, the request recorded",
		holder: "a", request: "q",
		want: sqlstore.AcquireGranted,
		then: func(e *env, _ sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
			l := res.Lease
			if !l.Live() || l.Holder != "a" || l.RequestID != "q" || l.Fence <= 0 || l.ExpiresAt.Sub(l.GrantedAt) != minute {
				e.t.Errorf("granted %+v", l)
			}
			if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != l.Fence || f.Holder != "a" {
				e.t.Errorf("floor after the grant %+v, want fence %d by a", f, l.Fence)
			}
			if f := e.requestFence("q"); f != l.Fence {
				e.t.Errorf("RequestFence = %d, want %d", f, l.Fence)
			}
		},
	},
	{
		name:   "free, released: granted a newer fence",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.givenReleased("a", "q0"), 0 },
		holder: "b", request: "q1",
		want: sqlstore.AcquireGranted,
		then: func(e *env, prior sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
			if res.Lease.Holder != "b" || res.Lease.Fence <= prior.Fence {
				e.t.Errorf("granted %+v after fence %d", res.Lease, prior.Fence)
			}
			if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != res.Lease.Fence || f.Holder != "b" {
				e.t.Errorf("floor %+v, want %d by b", f, res.Lease.Fence)
			}
		},
	},
	{
		name:   "free, expired: granted a newer fence",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.givenExpired("a", "q0"), 0 },
		holder: "b", request: "q1",
		want: sqlstore.AcquireGranted,
		then: func(e *env, prior sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
			if res.Lease.Holder != "b" || res.Lease.Fence <= prior.Fence || !res.Lease.GrantedAt.After(prior.ExpiresAt.Add(-time.Millisecond)) {
				e.t.Errorf("granted %+v after %+v", res.Lease, prior)
			}
		},
	},
	{
		name:   "live, a copy of the request that made it: retried, the same lease",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q", minute), 0 },
		holder: "a", request: "q",
		want: sqlstore.AcquireRetried,
		then: sameLease,
	},
	{
		name:   "live, its holder under another request: held",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q0", minute), 0 },
		holder: "a", request: "q1",
		want: sqlstore.AcquireHeld,
		then: sameLease,
	},
	{
		name:   "live, another holder: held",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q0", minute), 0 },
		holder: "b", request: "q1",
		want: sqlstore.AcquireHeld,
		then: sameLease,
	},
	{
		name:   "live, another holder sending its request id: held",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q", minute), 0 },
		holder: "b", request: "q",
		want: sqlstore.AcquireHeld,
		then: sameLease,
	},
	{
		name:   "released, a late copy of the request that made it: request expired, nothing written",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.givenReleased("a", "q"), 0 },
		holder: "a", request: "q",
		want: sqlstore.AcquireRequestExpired,
		then: requestSpent,
	},
	{
		name:   "expired, a late copy of the request that made it: request expired, nothing written",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.givenExpired("a", "q"), 0 },
		holder: "a", request: "q",
		want: sqlstore.AcquireRequestExpired,
		then: requestSpent,
	},
	{
		name:   "never leased, the floor above the sequence: floor ahead, nothing written",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { e.givenFloor(); return sqlstore.LeaseRow{}, 0 },
		holder: "a", request: "q",
		want: sqlstore.AcquireFloorAhead,
		then: func(e *env, _ sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
			floorAhead(e, res)
			if l, err := e.lease(); !errors.Is(err, sqlstore.ErrNotFound) {
				e.t.Errorf("a refused first grant left a lease row: %+v, %v", l, err)
			}
		},
	},
	{
		name: "released, the floor above the sequence: floor ahead, nothing written",
		given: func(e *env) (sqlstore.LeaseRow, int64) {
			l := e.givenReleased("a", "q0")
			e.givenFloor()
			return l, 0
		},
		holder: "b", request: "q1",
		want: sqlstore.AcquireFloorAhead,
		then: func(e *env, prior sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
			floorAhead(e, res)
			if l, err := e.lease(); err != nil || l.Holder != "a" || l.Fence != prior.Fence || !l.Released {
				e.t.Errorf("a refused grant changed the lease row: %+v, %v; want a's released fence %d", l, err, prior.Fence)
			}
		},
	},
	{
		name: "a waiter's turn, free: granted, its place taken out of the queue",
		given: func(e *env) (sqlstore.LeaseRow, int64) {
			e.givenWaiter("b")
			return sqlstore.LeaseRow{}, e.givenWaiter("a")
		},
		holder: "a", request: "q",
		want: sqlstore.AcquireGranted,
		then: func(e *env, _ sqlstore.LeaseRow, waiter int64, _ sqlstore.LeaseAcquireResult) {
			if e.queued(waiter) {
				e.t.Errorf("the granted waiter %d is still queued", waiter)
			}
			if ws, _ := e.s.Executor().WaiterList(ctx, e.res); len(ws) != 1 || ws[0].Holder != "b" {
				e.t.Errorf("the other waiter left with it: %+v", ws)
			}
		},
	},
	{
		name:   "a waiter's turn, a copy of its request: retried, its place taken out of the queue",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q", minute), e.givenWaiter("a") },
		holder: "a", request: "q",
		want: sqlstore.AcquireRetried,
		then: func(e *env, prior sqlstore.LeaseRow, waiter int64, res sqlstore.LeaseAcquireResult) {
			sameLease(e, prior, waiter, res)
			if e.queued(waiter) {
				e.t.Errorf("the retried waiter %d is still queued", waiter)
			}
		},
	},
	{
		name:   "a waiter's turn, held: its place kept",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.given("a", "q0", minute), e.givenWaiter("b") },
		holder: "b", request: "q1",
		want: sqlstore.AcquireHeld,
		then: func(e *env, prior sqlstore.LeaseRow, waiter int64, res sqlstore.LeaseAcquireResult) {
			sameLease(e, prior, waiter, res)
			if !e.queued(waiter) {
				e.t.Errorf("a waiter denied the lease left the queue")
			}
		},
	},
	{
		name:   "a waiter's turn, its request spent: request expired, its place kept",
		given:  func(e *env) (sqlstore.LeaseRow, int64) { return e.givenReleased("a", "q"), e.givenWaiter("a") },
		holder: "a", request: "q",
		want: sqlstore.AcquireRequestExpired,
		then: func(e *env, prior sqlstore.LeaseRow, waiter int64, res sqlstore.LeaseAcquireResult) {
			requestSpent(e, prior, waiter, res)
			if !e.queued(waiter) {
				e.t.Errorf("a waiter whose request was spent left the queue")
			}
		},
	},
}

// sameLease checks that res answers with the given live lease, unchanged.
func sameLease(e *env, prior sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
	e.t.Helper()
	l := res.Lease
	if !l.Found || l.Holder != prior.Holder || l.Fence != prior.Fence || l.RequestID != prior.RequestID || !l.ExpiresAt.Equal(prior.ExpiresAt) || !l.Live() {
		e.t.Errorf("answered %+v, want the live lease %+v", l, prior)
	}
	if cur, err := e.lease(); err != nil || cur.Fence != prior.Fence || !cur.ExpiresAt.Equal(prior.ExpiresAt) {
		e.t.Errorf("the lease after: %+v, %v; want %+v unchanged", cur, err, prior)
	}
}

// requestSpent checks a request-expired answer: the request's fence, and
// the lease row as it was.
func requestSpent(e *env, prior sqlstore.LeaseRow, _ int64, res sqlstore.LeaseAcquireResult) {
	e.t.Helper()
	if res.Fence != prior.Fence {
		e.t.Errorf("request expired for fence %d, want %d", res.Fence, prior.Fence)
	}
	if cur, err := e.lease(); err != nil || cur.Fence != prior.Fence || cur.Live() {
		e.t.Errorf("the lease after: %+v, %v; want fence %d, over", cur, err, prior.Fence)
	}
}

// floorAhead checks a floor-ahead answer: the floor and the new fence
// below it, the floor kept, and the request not recorded.
func floorAhead(e *env, res sqlstore.LeaseAcquireResult) {
	e.t.Helper()
	if res.Floor != 1<<40 || res.FloorHolder != "elsewhere" || res.Fence <= 0 || res.Fence >= res.Floor {
		e.t.Errorf("floor ahead = %+v", res)
	}
	if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != 1<<40 || f.Holder != "elsewhere" {
		e.t.Errorf("the floor after: %+v", f)
	}
	for _, q := range []string{"q", "q1"} {
		if f := e.requestFence(q); f != 0 {
			e.t.Errorf("a refused grant recorded request %s (fence %d)", q, f)
		}
	}
}

func acquireRules(t *testing.T, e *env) {
	for _, r := range acquireTable {
		t.Run(r.name, func(t *testing.T) {
			e := e.row(t, r.name)
			var prior sqlstore.LeaseRow
			var waiter int64
			if r.given != nil {
				prior, waiter = r.given(e)
			}
			var res sqlstore.LeaseAcquireResult
			sent := 0
			err := e.do(func(ex sqlstore.Executor) error {
				var err error
				res, err = ex.LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
					Resource: e.res, Holder: r.holder, RequestID: r.request, TTL: minute, LockTimeout: time.Second,
					Waiter: waiter, Sending: func() { sent++ },
				})
				return err
			})
			if err != nil {
				t.Fatalf("LeaseAcquire: %v", err)
			}
			if res.Status != r.want {
				t.Fatalf("LeaseAcquire = %+v, want status %d", res, r.want)
			}
			if sent != 1 {
				t.Errorf("Sending called %d times, want once", sent)
			}
			if r.then != nil {
				r.then(e, prior, waiter, res)
			}
		})
	}
}

// renewRule is one rule of Executor.LeaseRenew: the given lease, the
// renewal (a's lease, changed by ask), and whether it is renewed.
type renewRule struct {
	name  string
	given func(e *env) sqlstore.LeaseRow
	ask   func(p *sqlstore.LeaseRenewParams)
	want  bool
	then  func(e *env, prior, got sqlstore.LeaseRow)
}

var renewTable = []renewRule{
	{
		name:  "live: extended to the term after the database's clock",
		given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) },
		want:  true,
		then: func(e *env, prior, got sqlstore.LeaseRow) {
			if got.Fence != prior.Fence || got.ExpiresAt.Sub(got.Now) != time.Hour {
				e.t.Errorf("renewed %+v, want fence %d for an hour", got, prior.Fence)
			}
		},
	},
	{
		name:  "live, a shorter term than it has left: kept as it is",
		given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", 2*time.Hour) },
		want:  true,
		then: func(e *env, prior, got sqlstore.LeaseRow) {
			if !got.ExpiresAt.Equal(prior.ExpiresAt) {
				e.t.Errorf("renewed to %v, want its expiry kept at %v", got.ExpiresAt, prior.ExpiresAt)
			}
		},
	},
	{
		name:  "another fence: not renewed",
		given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) },
		ask:   func(p *sqlstore.LeaseRenewParams) { p.Fence-- },
		then:  unchanged,
	},
	{
		name:  "another holder: not renewed",
		given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) },
		ask:   func(p *sqlstore.LeaseRenewParams) { p.Holder = "b" },
		then:  unchanged,
	},
	{
		name:  "released: not renewed",
		given: func(e *env) sqlstore.LeaseRow { return e.givenReleased("a", "q") },
	},
	{
		name:  "expired: not renewed",
		given: func(e *env) sqlstore.LeaseRow { return e.givenExpired("a", "q") },
	},
	{
		name: "superseded: not renewed, the successor's lease unchanged",
		given: func(e *env) sqlstore.LeaseRow {
			l := e.givenReleased("a", "q0")
			e.given("b", "q1", minute)
			return l
		},
		then: func(e *env, prior, _ sqlstore.LeaseRow) {
			if cur, err := e.lease(); err != nil || cur.Holder != "b" || cur.ExpiresAt.Sub(cur.GrantedAt) != minute {
				e.t.Errorf("the successor's lease after: %+v, %v", cur, err)
			}
		},
	},
	{
		name:  "never leased: not renewed",
		given: func(e *env) sqlstore.LeaseRow { return sqlstore.LeaseRow{Resource: e.res, Holder: "a", Fence: 1} },
	},
}

// unchanged checks that a refused renewal left the given lease alone.
func unchanged(e *env, prior, _ sqlstore.LeaseRow) {
	e.t.Helper()
	if cur, err := e.lease(); err != nil || !cur.ExpiresAt.Equal(prior.ExpiresAt) {
		e.t.Errorf("the lease after a refused renewal: %+v, %v; want %+v", cur, err, prior)
	}
}

func renewRules(t *testing.T, e *env) {
	// Each rule alone, then every rule in one batch: the batch keeps each
	// lease's rule, with one clock reading.
	var batch []sqlstore.LeaseRenewParams
	var batchPrior []sqlstore.LeaseRow
	var batchEnv []*env
	for _, r := range renewTable {
		t.Run(r.name, func(t *testing.T) {
			for _, how := range []string{"one", "batch of one", "in the batch"} {
				e := e.row(t, r.name+"/"+how)
				prior := r.given(e)
				p := sqlstore.LeaseRenewParams{Resource: e.res, Holder: "a", Fence: prior.Fence, TTL: time.Hour}
				if r.ask != nil {
					r.ask(&p)
				}
				if how == "in the batch" {
					batch, batchPrior, batchEnv = append(batch, p), append(batchPrior, prior), append(batchEnv, e)
					continue
				}
				var got sqlstore.LeaseRow
				err := e.do(func(ex sqlstore.Executor) error {
					var err error
					if how == "one" {
						got, err = ex.LeaseRenew(ctx, &p)
						return err
					}
					rows, err := ex.LeaseRenewBatch(ctx, &sqlstore.LeaseRenewBatchParams{Renewals: []sqlstore.LeaseRenewParams{p}})
					if err == nil && len(rows) != 1 {
						err = fmt.Errorf("%d rows for one renewal", len(rows))
					}
					if err == nil {
						got = rows[0]
					}
					return err
				})
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				checkRenewal(e, r, how, prior, got)
			}
		})
	}
	t.Run("every rule in one batch", func(t *testing.T) {
		var rows []sqlstore.LeaseRow
		sent := 0
		dup := batch[0]
		err := e.do(func(ex sqlstore.Executor) error {
			var err error
			rows, err = ex.LeaseRenewBatch(ctx, &sqlstore.LeaseRenewBatchParams{Renewals: append(slices.Clone(batch), dup), Sending: func() { sent++ }})
			return err
		})
		if err != nil || len(rows) != len(batch)+1 {
			t.Fatalf("LeaseRenewBatch = %d rows, %v; want %d", len(rows), err, len(batch)+1)
		}
		if sent != 1 {
			t.Errorf("Sending called %d times, want once", sent)
		}
		// A lease named twice is renewed once: one of its copies answers
		// it, the other not found.
		if rows[0].Found == rows[len(batch)].Found {
			t.Errorf("a lease named twice: %+v and %+v; want it renewed once", rows[0], rows[len(batch)])
		}
		if !rows[0].Found {
			rows[0] = rows[len(batch)]
		}
		var now time.Time
		for i, r := range renewTable {
			be := *batchEnv[i]
			be.t = t
			checkRenewal(&be, r, "in the batch", batchPrior[i], rows[i])
			// Postgres's one statement reads the clock once; the steps
			// read it per renewal.
			if rows[i].Found && e.names {
				if !now.IsZero() && !rows[i].Now.Equal(now) {
					t.Errorf("%s: renewed at %v, another clock reading than %v", r.name, rows[i].Now, now)
				}
				now = rows[i].Now
			}
		}
	})
	t.Run("an empty batch", func(t *testing.T) {
		err := e.do(func(ex sqlstore.Executor) error {
			rows, err := ex.LeaseRenewBatch(ctx, &sqlstore.LeaseRenewBatchParams{})
			if err == nil && len(rows) != 0 {
				t.Errorf("an empty batch answered %+v", rows)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func checkRenewal(e *env, r renewRule, how string, prior, got sqlstore.LeaseRow) {
	e.t.Helper()
	if got.Found != r.want {
		e.t.Errorf("%s: %s: renewal = %+v, want Found %v", r.name, how, got, r.want)
		return
	}
	if r.then != nil {
		r.then(e, prior, got)
	}
}

// releaseRule is one rule of Executor.LeaseRelease: the given lease, the
// release (a's lease, changed by ask), and whether it releases.
type releaseRule struct {
	name  string
	given func(e *env) sqlstore.LeaseRow
	ask   func(p *sqlstore.LeaseReleaseParams)
	want  bool
}

var releaseTable = []releaseRule{
	{name: "live: released", given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) }, want: true},
	{name: "another fence: left alone", given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) },
		ask: func(p *sqlstore.LeaseReleaseParams) { p.Fence-- }},
	{name: "another holder: left alone", given: func(e *env) sqlstore.LeaseRow { return e.given("a", "q", minute) },
		ask: func(p *sqlstore.LeaseReleaseParams) { p.Holder = "b" }},
	{name: "released already: nothing", given: func(e *env) sqlstore.LeaseRow { return e.givenReleased("a", "q") }},
	{name: "expired: nothing", given: func(e *env) sqlstore.LeaseRow { return e.givenExpired("a", "q") }},
	{name: "superseded: the successor left alone", given: func(e *env) sqlstore.LeaseRow {
		l := e.givenReleased("a", "q0")
		e.given("b", "q1", minute)
		return l
	}},
	{name: "never leased: nothing", given: func(e *env) sqlstore.LeaseRow { return sqlstore.LeaseRow{Fence: 1} }},
}

func releaseRules(t *testing.T, e *env) {
	for _, r := range releaseTable {
		t.Run(r.name, func(t *testing.T) {
			for _, name := range []bool{false, true} {
				e := e.row(t, fmt.Sprintf("%s/%v", r.name, name))
				prior := r.given(e)
				var first int64
				if name {
					first = e.givenWaiter("w1")
					e.givenWaiter("w2")
				}
				before, beforeErr := e.lease()
				p := sqlstore.LeaseReleaseParams{Resource: e.res, Holder: "a", Fence: prior.Fence, NameFirstWaiter: name}
				if r.ask != nil {
					r.ask(&p)
				}
				var res sqlstore.LeaseReleaseResult
				err := e.do(func(ex sqlstore.Executor) error {
					var err error
					res, err = ex.LeaseRelease(ctx, &p)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Released != r.want {
					t.Fatalf("LeaseRelease(%+v) = %+v, want Released %v", p, res, r.want)
				}
				cur, err := e.lease()
				switch {
				case r.want && (err != nil || cur.Live() || !cur.Released || cur.Fence != prior.Fence):
					t.Errorf("after the release: %+v, %v", cur, err)
				case !r.want && ((err == nil) != (beforeErr == nil) || cur.Fence != before.Fence || cur.Released != before.Released || !cur.ExpiresAt.Equal(before.ExpiresAt)):
					t.Errorf("a release of nothing changed the lease: %+v, %v; was %+v, %v", cur, err, before, beforeErr)
				}
				// The first waiter is named only when asked and released;
				// Postgres's own SQL names it, the steps answer 0 (unknown).
				switch {
				case !name || !r.want:
					if res.FirstWaiter != 0 {
						t.Errorf("FirstWaiter = %d, want 0", res.FirstWaiter)
					}
				case e.names && res.FirstWaiter != first:
					t.Errorf("FirstWaiter = %d, want %d", res.FirstWaiter, first)
				case res.FirstWaiter != 0 && res.FirstWaiter != first:
					t.Errorf("FirstWaiter = %d, want %d or 0", res.FirstWaiter, first)
				}
			}
		})
	}
}
