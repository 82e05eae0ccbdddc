// Package telemetry_test checks gate's and lease's OpenTelemetry
// instruments and spans against a scripted history on Postgres, with the
// SDK's in-memory reader and span recorder. It lives in the integration
// module so that the SDK stays out of the library's go.mod.
package telemetry_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// TestInstrumentsFollowAHistory runs a grant, a hold lost by a cut
// connection, refusals, renewals on time and late, and a waiter's
// hand-over, and checks after each step that every instrument moved as the
// package docs say, and that the spans of one lease's life link up.
func TestInstrumentsFollowAHistory(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	proxy, err := faults.NewProxy(upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	driver := pgxv5.New(pool)
	if err := driver.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// cut cuts every connection and points new ones at a port nobody
	// listens on; mend points them back and drops the cut connections the
	// pool still has.
	cut := func() { proxy.SetUpstream("127.0.0.1:1") }
	mend := func() { proxy.SetUpstream(upstream); pool.Reset() }

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	g := gate.New(driver, &gate.Options{MeterProvider: mp, TracerProvider: tp, MetricsByResource: true})
	coord := lease.NewCoordinator(driver, &lease.CoordinatorOptions{MeterProvider: mp, TracerProvider: tp})
	m := &metrics{t: t, r: reader}
	const res = "otel-r"
	outcome := func(v string) attribute.KeyValue { return attribute.String("outcome", v) }
	inRes := attribute.String("fencegate.resource", res)

	a := client(t, "holder-a", 1500*time.Millisecond)
	b := client(t, "holder-b", 3*time.Second)
	c := client(t, "holder-c", 3*time.Second)

	// A grant.
	la := acquire(t, ctx, a, coord, res)
	m.want("fencegate.lease.acquire.duration", 1, outcome("granted"))
	m.want("fencegate.lease.grant.headroom", 1)
	if h := m.sum("fencegate.lease.grant.headroom"); h <= 0 || h > 1.5 {
		t.Errorf("headroom at grant = %vs, want within the 1.5s term", h)
	}
	m.want("fencegate.lease.acquire.duration", 0, inRes) // the coordinator did not opt in

	// An admitted write, and one with a malformed token.
	commit(t, ctx, g, pool, la.Token(), nil)
	m.want("fencegate.gate.decisions", 1, attribute.String("operation", "commit"), outcome("admitted"), inRes)
	m.want("fencegate.gate.commit.duration", 1, attribute.String("operation", "commit"), outcome("admitted"))
	commit(t, ctx, g, pool, fence.Token{}, fence.ErrInvalidInput)
	m.want("fencegate.gate.decisions", 1, attribute.String("operation", "commit"), outcome("error"))

	// Held: another holder is told who holds it.
	reqB, _ := b.BeginAcquire(res)
	if out, err := coord.Acquire(ctx, reqB); err != nil || out.OK {
		t.Fatalf("Acquire by b while a holds: %+v, %v", out, err)
	}
	m.want("fencegate.lease.acquire.duration", 1, outcome("held"))

	// A hold lost by a cut connection: every renewal fails until the
	// holder's deadline.
	keptA, err := lease.Keep(ctx, a, coord, la)
	if err != nil {
		t.Fatal(err)
	}
	cut()
	select {
	case <-keptA.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a's lease was not lost with the database unreachable")
	}
	if !errors.Is(context.Cause(keptA.Context()), lease.ErrLeaseLost) {
		t.Fatalf("a's context ended with %v, want ErrLeaseLost", context.Cause(keptA.Context()))
	}
	mend()
	m.want("fencegate.lease.lost", 1, attribute.String("reason", "deadline"))
	m.want("fencegate.lease.hold.duration", 1, outcome("lost"))
	if m.count("fencegate.lease.renewals", outcome("failed")) < 1 {
		t.Error("no failed renewal counted while the database was unreachable")
	}
	if err := keptA.Release(ctx); err != nil {
		t.Fatal(err)
	}
	m.want("fencegate.lease.hold.duration", 0, outcome("released")) // counted once, as lost

	// Refusals: b holds the resource now, a's writes are refused.
	lb := acquire(t, ctx, b, coord, res)
	commit(t, ctx, g, pool, la.Token(), gate.ErrStaleFence)
	m.want("fencegate.gate.decisions", 1, attribute.String("operation", "commit"), outcome("refused"))
	m.want("fencegate.gate.refusals", 1, attribute.Bool("logged", true))
	batch := &pgx.Batch{}
	batch.Queue(`SELECT 1`)
	if err := pgxgate.CommitBatch(ctx, g, pool, la.Token(), batch); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("CommitBatch with a's token: %v, want ErrStaleFence", err)
	}
	m.want("fencegate.gate.decisions", 1, attribute.String("operation", "commit_batch"), outcome("refused"))
	m.want("fencegate.gate.refusals", 2, attribute.Bool("logged", true))
	tx, err := pgxgate.BeginFenced(ctx, g, pool, lb.Token(), pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	m.want("fencegate.gate.decisions", 1, attribute.String("operation", "begin_fenced"), outcome("admitted"))

	// Renewals on time, then late: one attempt fails while the database is
	// away, the next succeeds.
	keptB, err := lease.Keep(ctx, b, coord, lb)
	if err != nil {
		t.Fatal(err)
	}
	defer keptB.Release(ctx)
	m.eventually("fencegate.lease.renewals", 1, outcome("on_time"))
	failed := m.count("fencegate.lease.renewals", outcome("failed"))
	cut()
	m.eventually("fencegate.lease.renewals", failed+1, outcome("failed"))
	mend()
	m.eventually("fencegate.lease.renewals", 1, outcome("late"))
	if keptB.Context().Err() != nil {
		t.Fatalf("b's lease was lost: %v", context.Cause(keptB.Context()))
	}

	// A waiter's hand-over: c queues behind b, b releases, c is granted.
	got := make(chan error, 1)
	var lc *lease.Lease
	go func() {
		var err error
		lc, err = coord.AcquireWait(ctx, c, res)
		got <- err
	}()
	// c's first try, before it queued, and its first try from the queue
	// (so it waits in this Coordinator) both find b's lease.
	for n := 0; n < 2; {
		n = 0
		for _, s := range spans.Ended() {
			if s.Name() == "lease.Acquire" && attr(s, "fencegate.holder").AsString() == "holder-c" {
				n++
			}
		}
		if n < 2 {
			select {
			case err := <-got:
				t.Fatalf("AcquireWait returned before b released: %v", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if err := keptB.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if lc.Token().Fence <= lb.Token().Fence {
		t.Errorf("c's fence %d is not above b's %d", lc.Token().Fence, lb.Token().Fence)
	}
	m.want("fencegate.lease.hold.duration", 1, outcome("released"))
	m.want("fencegate.lease.wait.duration", 1, outcome("granted"))
	m.want("fencegate.lease.handover.duration", 1)
	if h := m.sum("fencegate.lease.handover.duration"); h <= 0 || h > 3 {
		t.Errorf("hand-over took %vs, want within c's term", h)
	}
	m.want("fencegate.lease.acquire.duration", 3, outcome("granted")) // a, b, c
	if _, err := coord.Release(ctx, lc.Token()); err != nil {
		t.Fatal(err)
	}

	// The spans of one lease's life link to its acquisition.
	acqA := find(t, spans.Ended(), "lease.Acquire", "holder-a", "granted")
	acqB := find(t, spans.Ended(), "lease.Acquire", "holder-b", "granted")
	if attr(acqA, "fencegate.fence").AsInt64() != la.Token().Fence {
		t.Errorf("a's Acquire span has fence %v, want %d", attr(acqA, "fencegate.fence"), la.Token().Fence)
	}
	if !linked(spans.Ended(), "lease.RenewBatch", acqA.SpanContext()) {
		t.Error("no RenewBatch span links to a's acquisition")
	}
	if !linked(spans.Ended(), "lease.Release", acqB.SpanContext()) {
		t.Error("b's Release span does not link to b's acquisition")
	}
	wait := find(t, spans.Ended(), "lease.AcquireWait", "holder-c", "granted")
	acqC := find(t, spans.Ended(), "lease.Acquire", "holder-c", "granted")
	if acqC.Parent().SpanID() != wait.SpanContext().SpanID() {
		t.Error("c's granted Acquire span is not a child of its AcquireWait span")
	}
	refusal := find(t, spans.Ended(), "gate.Commit", "holder-a", "refused")
	if refusal.Status().Code != codes.Error || attr(refusal, "fencegate.floor").AsInt64() != lb.Token().Fence {
		t.Errorf("the refused Commit's span: status %v, floor %v; want an error and floor %d",
			refusal.Status(), attr(refusal, "fencegate.floor"), lb.Token().Fence)
	}
	find(t, spans.Ended(), "pgxgate.CommitBatch", "holder-a", "refused")
	find(t, spans.Ended(), "pgxgate.BeginFenced", "holder-b", "admitted")

	// A coordinator that opts in names the resource in its metrics.
	named := lease.NewCoordinator(driver, &lease.CoordinatorOptions{MeterProvider: mp, TracerProvider: tp, MetricsByResource: true})
	ld := acquire(t, ctx, c, named, "otel-named")
	m.want("fencegate.lease.acquire.duration", 1, outcome("granted"), attribute.String("fencegate.resource", "otel-named"))
	m.want("fencegate.lease.grant.headroom", 1, attribute.String("fencegate.resource", "otel-named"))
	if _, err := named.Release(ctx, ld.Token()); err != nil {
		t.Fatal(err)
	}
}

func client(t *testing.T, holder string, ttl time.Duration) *lease.Client {
	t.Helper()
	c, err := lease.NewClient(&lease.ClientOptions{Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func acquire(t *testing.T, ctx context.Context, c *lease.Client, coord *lease.Coordinator, resource string) *lease.Lease {
	t.Helper()
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Acquire(ctx, req)
	if err != nil || !out.OK {
		t.Fatalf("Acquire(%s by %s): %+v, %v", resource, c.Holder(), out, err)
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// commit runs g.Commit with token in a transaction of its own, and wants
// an error matching want (nil: admitted, and committed).
func commit(t *testing.T, ctx context.Context, g *gate.Gate[pgx.Tx], pool *pgxpool.Pool, token fence.Token, want error) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	err = g.Commit(ctx, tx, token)
	if want == nil && err == nil {
		err = tx.Commit(ctx)
	}
	if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("Commit(%s) = %v, want %v", token, err, want)
	}
}

// metrics reads the instruments through the manual reader.
type metrics struct {
	t *testing.T
	r *sdkmetric.ManualReader
}

// points calls fn with the count (a counter's value, a histogram's count)
// and sum of every point of the instrument name whose attributes include
// attrs.
func (m *metrics) points(name string, attrs []attribute.KeyValue, fn func(count int64, sum float64)) {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.r.Collect(context.Background(), &rm); err != nil {
		m.t.Fatal(err)
	}
	has := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			if x.Name != name {
				continue
			}
			switch d := x.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						fn(p.Value, float64(p.Value))
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						fn(int64(p.Count), p.Sum)
					}
				}
			default:
				m.t.Fatalf("%s is a %T", name, x.Data)
			}
		}
	}
}

func (m *metrics) count(name string, attrs ...attribute.KeyValue) (n int64) {
	m.t.Helper()
	m.points(name, attrs, func(c int64, _ float64) { n += c })
	return n
}

func (m *metrics) sum(name string, attrs ...attribute.KeyValue) (s float64) {
	m.t.Helper()
	m.points(name, attrs, func(_ int64, v float64) { s += v })
	return s
}

func (m *metrics) want(name string, n int64, attrs ...attribute.KeyValue) {
	m.t.Helper()
	if got := m.count(name, attrs...); got != n {
		m.t.Errorf("%s%v = %d, want %d", name, attrs, got, n)
	}
}

// eventually waits, for at most 30s, until the instrument reaches n: the
// keeper renews on its own schedule.
func (m *metrics) eventually(name string, n int64, attrs ...attribute.KeyValue) {
	m.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for m.count(name, attrs...) < n {
		select {
		case <-tick.C:
		case <-deadline:
			m.t.Fatalf("%s%v stayed at %d, want %d", name, attrs, m.count(name, attrs...), n)
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// find returns the first span named name of holder with outcome.
func find(t *testing.T, spans []sdktrace.ReadOnlySpan, name, holder, outcome string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name && attr(s, "fencegate.holder").AsString() == holder && attr(s, "fencegate.outcome").AsString() == outcome {
			return s
		}
	}
	t.Fatalf("no %s span of %s with outcome %s", name, holder, outcome)
	return nil
}

// linked reports whether a span named name links to sc.
func linked(spans []sdktrace.ReadOnlySpan, name string, sc trace.SpanContext) bool {
	for _, s := range spans {
		if s.Name() != name {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.Equal(sc) {
				return true
			}
		}
	}
	return false
}
