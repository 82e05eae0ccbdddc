package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/telemetry"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// Names of the telemetry scenario's variants.
const (
	vOtelOff  = "no instrumentation"
	vOtelNoop = "global providers, nothing installed (the default)"
	vOtelSDK  = "SDK recording every span and metric"
)

// Telemetry is the OpenTelemetry scenario: gate.Commit's fenced
// transaction and a lease's acquire+release, each built three ways and run
// in the same interleaved rounds: with no instrumentation at all
// (telemetry.Off: no instrument, no span, not one call into OpenTelemetry,
// the code path the library had before it was instrumented), with the
// default (the global providers, which record nothing until a program
// installs an SDK), and with the SDK recording (a manual metric reader
// aggregating every measurement, every span sampled and batched to an
// exporter that drops them).
func Telemetry(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 8)
	if err != nil {
		return err
	}
	defer done()
	pg := pgs[0] // loopback: the overhead is the process's, not the network's

	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.WithoutCancel(ctx))
	builds := []struct {
		name string
		gate gate.Options
		coor lease.CoordinatorOptions
	}{
		{vOtelOff, gate.Options{MeterProvider: telemetry.Off{}}, lease.CoordinatorOptions{MeterProvider: telemetry.Off{}}},
		{vOtelNoop, gate.Options{}, lease.CoordinatorOptions{}},
		{vOtelSDK, gate.Options{MeterProvider: mp, TracerProvider: tp}, lease.CoordinatorOptions{MeterProvider: mp, TracerProvider: tp}},
	}
	var g grid
	for _, b := range builds {
		gt := gate.New(pg.Pgx, &b.gate)
		g.add("commit", b.name, func(ctx context.Context, key int) error {
			return pgx.BeginFunc(ctx, pg.Pool, func(tx pgx.Tx) error {
				if err := gt.Commit(ctx, tx, Token(key)); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, updateItem, key)
				return err
			})
		})
		b.coor.TTL = 30 * time.Second
		client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench-otel", TTL: b.coor.TTL})
		if err != nil {
			return err
		}
		e := &leaseEnv{pg: pg, coord: lease.NewCoordinator(pg.Pgx, &b.coor), client: client}
		g.add("lease", b.name, func(ctx context.Context, key int) error {
			l, err := e.acquire(ctx, fmt.Sprintf("otel/%d", key))
			if err != nil {
				return err
			}
			return e.release(ctx, l)
		})
	}
	g.run(ctx, cfg, 1, Distinct, "otel")

	r.f("## OpenTelemetry: the price of the instrumentation\n\n")
	r.f("One worker, Postgres through pgx on loopback, the variants of each operation in the same interleaved rounds. ")
	r.f("*%s* is a gate and a coordinator built with the internal switch that leaves out every instrument and span (not one call into OpenTelemetry); ", vOtelOff)
	r.f("*%s* is what a program that does nothing about telemetry gets; ", vOtelNoop)
	r.f("*%s* has the SDK's manual reader aggregating every measurement and every span sampled and batched to an exporter that drops it. ", vOtelSDK)
	r.f("gate.Commit runs in its fenced transaction (BEGIN, Commit, UPDATE, COMMIT), acquire+release is scenario 3's.\n\n")
	// The instrumentation's own CPU time: the same builds over a driver
	// that answers at once, each op timed in a loop.
	var fns []func(ctx context.Context) error
	for _, b := range builds {
		gt := gate.New[*sql.Tx](instantDriver{}, &b.gate)
		fns = append(fns, func(ctx context.Context) error { return gt.Commit(ctx, nil, Token(1)) })
	}
	for _, b := range builds {
		client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench-otel", TTL: 30 * time.Second})
		if err != nil {
			return err
		}
		e := &leaseEnv{coord: lease.NewCoordinator(instantDriver{}, &b.coor), client: client}
		fns = append(fns, func(ctx context.Context) error {
			l, err := e.acquire(ctx, "otel/cpu")
			if err != nil {
				return err
			}
			return e.release(ctx, l)
		})
	}
	cpu, err := cpuCost(ctx, 2*cfg.Rounds+1, 20_000, fns)
	if err != nil {
		return err
	}

	for i, op := range []struct{ where, title string }{{"commit", "gate.Commit"}, {"lease", "acquire+release"}} {
		res := g.rows(op.where, vOtelOff, vOtelNoop, vOtelSDK)
		r.f("### %s\n\n", op.title)
		r.table(res, 0)
		noop, sdk := Ratio(res[1], res[0]), Ratio(res[2], res[0])
		r.f("Measured: default ÷ none = **%.3fx**; SDK ÷ none = **%.3fx**.\n\n", noop, sdk)
		// The same ratios from the CPU time the instrumentation adds, set
		// against this operation's median time on the database: not
		// subject to the rounds' noise.
		off, dn, ds := cpu[3*i], cpu[3*i+1]-cpu[3*i], cpu[3*i+2]-cpu[3*i]
		p50 := res[0].Latency(0.5)
		cn, cs := float64(p50)/float64(p50+dn), float64(p50)/float64(p50+ds)
		r.f("CPU per call with a driver that answers at once: %v with no instrumentation, %+v with the default, %+v with the SDK; ", off, dn, ds)
		r.f("set against the %s median on the database, default ÷ none = **%.4fx**, SDK ÷ none = **%.4fx**.\n\n", fmtDur(p50), cn, cs)
	}
	return nil
}

// instantDriver answers every statement Commit, Acquire and Release send at
// once, admitted and granted, so that a loop over them times the library's
// own work, instrumentation included, without a database's noise. Any
// other method is nil and panics: the loop never calls one.
type instantDriver struct {
	sqlstore.Driver[*sql.Tx]
}

type instantExecutor struct {
	sqlstore.Executor
	fence atomic.Int64
}

var instant = &instantExecutor{}

func (instantDriver) UnwrapExecutor(*sql.Tx) sqlstore.Executor { return instant }
func (instantDriver) Executor() sqlstore.Executor              { return instant }
func (instantDriver) ClockPrecision() time.Duration            { return time.Microsecond }
func (instantDriver) MaxConns() int                            { return 0 }
func (instantDriver) SupportsListener() bool                   { return false }
func (instantDriver) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(instant)
}

func (*instantExecutor) FloorRaise(context.Context, *sqlstore.FloorRaiseParams) (sqlstore.FloorRaiseResult, error) {
	return sqlstore.FloorRaiseResult{Admitted: true, Issued: true}, nil
}

func (e *instantExecutor) LeaseAcquire(_ context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	if p.Sending != nil {
		p.Sending()
	}
	now := time.Now()
	return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireGranted, Lease: sqlstore.LeaseRow{
		Found: true, Resource: p.Resource, Holder: p.Holder, Fence: e.fence.Add(1), RequestID: p.RequestID,
		GrantedAt: now, ExpiresAt: now.Add(p.TTL), Now: now,
	}}, nil
}

func (*instantExecutor) LeaseRelease(context.Context, *sqlstore.LeaseReleaseParams) (sqlstore.LeaseReleaseResult, error) {
	return sqlstore.LeaseReleaseResult{Released: true}, nil
}

// cpuCost is the median, over rounds, of the time per call of each of fns,
// run in turn in each round for n calls.
func cpuCost(ctx context.Context, rounds, n int, fns []func(ctx context.Context) error) ([]time.Duration, error) {
	per := make([][]float64, len(fns))
	for range rounds {
		for i, fn := range fns {
			start := time.Now()
			for range n {
				if err := fn(ctx); err != nil {
					return nil, err
				}
			}
			per[i] = append(per[i], float64(time.Since(start))/float64(n))
		}
	}
	out := make([]time.Duration, len(fns))
	for i := range per {
		out[i] = time.Duration(median(per[i]))
	}
	return out, nil
}
