package fencegatecli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetryTimeout bounds flushing and stopping the exporters at exit.
const telemetryTimeout = 5 * time.Second

const metricsAddrHelp = "serve the gate's and the leases' metrics for Prometheus on `ADDR` (host:port, :0 for any port) at /metrics while the command runs"

// otlpEndpoints are the standard variables that turn OTLP on: metrics and
// traces go to the collector they name, over HTTP. The exporters read
// every other OTEL_EXPORTER_OTLP_* variable (headers, timeout, TLS)
// themselves.
var otlpEndpoints = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// telemetry is the command's OpenTelemetry: the providers its gate and
// coordinator report to (nil: the library's defaults, which record
// nothing), and what stops them.
type telemetry struct {
	mp       metric.MeterProvider
	tp       trace.TracerProvider
	addr     net.Addr // where /metrics is served; nil without --metrics-addr
	shutdown []func(context.Context) error
}

// startTelemetry starts the exporters asked for: a Prometheus endpoint on
// metricsAddr (unless ""), and OTLP/HTTP when one of otlpEndpoints is set.
// Neither asked for, it starts nothing.
func (c *cli) startTelemetry(ctx context.Context, metricsAddr string) (_ *telemetry, err error) {
	otlp := false
	for _, v := range otlpEndpoints {
		otlp = otlp || c.env(v) != ""
	}
	if p := c.env("OTEL_EXPORTER_OTLP_PROTOCOL"); otlp && p != "" && p != "http/protobuf" {
		return nil, usagef("OTEL_EXPORTER_OTLP_PROTOCOL=%s: fencegate exports OTLP over HTTP only (http/protobuf)", p)
	}
	t := &telemetry{}
	if metricsAddr == "" && !otlp {
		return t, nil
	}
	defer func() {
		if err != nil { // stop what did start
			err = errors.Join(err, t.stop(ctx))
		}
	}()
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "fencegate")))
	if err != nil {
		return nil, err
	}
	if s := c.env("OTEL_SERVICE_NAME"); s != "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", s)))
	}
	var readers []sdkmetric.Option
	if metricsAddr != "" {
		reg := prometheus.NewRegistry()
		exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln) // ends with Shutdown
		t.addr = ln.Addr()
		t.shutdown = append(t.shutdown, srv.Shutdown)
		readers = append(readers, sdkmetric.WithReader(exporter))
		fmt.Fprintf(c.stderr, "fencegate: metrics at http://%s/metrics\n", t.addr)
	}
	if otlp {
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metrics: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
		te, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP traces: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
		t.tp = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
	t.mp = mp
	t.shutdown = append(t.shutdown, mp.Shutdown) // flushes the last OTLP metrics
	return t, nil
}

// providers returns the meter and tracer providers for the library's
// options: nil, its defaults, when t is nil or exports nothing.
func (t *telemetry) providers() (metric.MeterProvider, trace.TracerProvider) {
	if t == nil {
		return nil, nil
	}
	return t.mp, t.tp
}

// stop flushes and stops the exporters, within telemetryTimeout whatever
// ctx does; its error says what may not have been exported.
func (t *telemetry) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryTimeout)
	defer cancel()
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: the last metrics and spans may not have been exported: %w", err)
	}
	return nil
}
