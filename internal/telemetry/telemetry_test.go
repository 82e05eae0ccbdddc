package telemetry

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// nil providers are the global ones, given ones are used, and Off turns
// the instrumentation off.
func TestProviders(t *testing.T) {
	const scope = "github.com/fencegate/fencegate/test"
	m, tr, ok := Providers(scope, nil, nil)
	if !ok || m == nil || tr == nil {
		t.Fatalf("Providers(nil, nil) = %v, %v, %v; want the global providers' meter and tracer", m, tr, ok)
	}
	if m != otel.GetMeterProvider().Meter(scope) {
		t.Error("a nil MeterProvider did not default to the global one")
	}
	m, tr, ok = Providers(scope, noop.NewMeterProvider(), tracenoop.NewTracerProvider())
	if _, isNoop := m.(noop.Meter); !ok || !isNoop {
		t.Errorf("a given MeterProvider was not used: %T", m)
	}
	if _, isNoop := tr.(tracenoop.Tracer); !isNoop {
		t.Errorf("a given TracerProvider was not used: %T", tr)
	}
	if m, tr, ok := Providers(scope, Off{}, nil); ok || m != nil || tr != nil {
		t.Errorf("Providers(Off) = %v, %v, %v; want nothing", m, tr, ok)
	}
}
