package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/telemetry"
	"github.com/fencegate/fencegate/lease"
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
		client, err := lease.NewClient(lease.ClientOptions{Holder: "bench-otel", TTL: b.coor.TTL})
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
	r.f("gate.Commit runs in its fenced transaction (BEGIN, Commit, UPDATE, COMMIT), acquire+release is scenario 3's. Targets: the default ÷ none ≥ 0.99x, the SDK ÷ none ≥ 0.97x (throughput).\n\n")
	for _, op := range []struct{ where, title string }{{"commit", "gate.Commit"}, {"lease", "acquire+release"}} {
		res := g.rows(op.where, vOtelOff, vOtelNoop, vOtelSDK)
		r.f("### %s\n\n", op.title)
		r.table(res, 0)
		noop, sdk := Ratio(res[1], res[0]), Ratio(res[2], res[0])
		r.f("Default ÷ none = **%.3fx** (target ≥ 0.99x: %s); SDK ÷ none = **%.3fx** (target ≥ 0.97x: %s).\n\n",
			noop, verdict(noop >= 0.99), sdk, verdict(sdk >= 0.97))
		r.Notes = append(r.Notes, fmt.Sprintf("OpenTelemetry, %s: default (global providers) ÷ no instrumentation = %.3fx (target ≥ 0.99x: %s), SDK recording ÷ none = %.3fx (target ≥ 0.97x: %s)",
			op.title, noop, verdict(noop >= 0.99), sdk, verdict(sdk >= 0.97)))
	}
	return nil
}
