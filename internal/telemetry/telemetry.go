// Package telemetry holds what gate and lease share of their OpenTelemetry
// instrumentation: the providers' defaults, the duration buckets, span
// endings, and the switch the benchmarks use to build a gate or a
// coordinator with no instrumentation at all.
package telemetry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// The attribute keys of a token's fields, on every span of gate and lease
// and on metrics opted in to resource names.
const (
	KeyResource = "fencegate.resource"
	KeyHolder   = "fencegate.holder"
	KeyFence    = "fencegate.fence"
)

// Off, given as the MeterProvider, builds a gate or a coordinator with no
// instrumentation: no instrument, no span, not even a no-op call. It is the
// baseline the benchmarks compare the no-op providers against; users have
// no way to name it (the package is internal) and no need to.
type Off struct{ metricnoop.MeterProvider }

// Providers returns the meter and tracer named scope from the providers
// given, the global ones for nil; ok is false for Off.
func Providers(scope string, mp metric.MeterProvider, tp trace.TracerProvider) (m metric.Meter, t trace.Tracer, ok bool) {
	if _, off := mp.(Off); off {
		return nil, nil, false
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return mp.Meter(scope), tp.Tracer(scope), true
}

// Bucket boundaries, in seconds. Short: a database round trip (0.1 ms on
// loopback) to a lock wait that ran out. Long: a wait in a queue or a
// lease's whole life, up to a day.
var (
	Short = metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	Long  = metric.WithExplicitBucketBoundaries(0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21600, 86400)
)

// Histogram is a histogram in seconds. An instrument the provider cannot
// make comes back as a no-op with the error (the OpenTelemetry API's
// contract), so the error is dropped: the SDK reports it itself.
func Histogram(m metric.Meter, name, desc string, buckets metric.HistogramOption) metric.Float64Histogram {
	h, _ := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), buckets)
	return h
}

// Counter is a counter of unit (a UCUM annotation such as "{lease}").
func Counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, _ := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return c
}

// Attrs is one attribute set as the options of Record and Add. Built once
// and passed as opts..., it makes recording allocate nothing: an option
// slice built at the call escapes through the instrument's interface.
type Attrs struct {
	Record []metric.RecordOption
	Add    []metric.AddOption
}

// With returns attrs as Attrs.
func With(attrs ...attribute.KeyValue) Attrs {
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return Attrs{Record: []metric.RecordOption{o}, Add: []metric.AddOption{o}}
}

// End ends span with outcome and, when err is set, the error's status.
func End(span trace.Span, outcome string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("fencegate.outcome", outcome))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
