package gate

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/telemetry"
)

// The gate's OpenTelemetry instrumentation: its instruments, made once in
// New, and the span and measurements of each fence check. The package doc
// (Observability) lists what each instrument records.

const (
	keyResource = telemetry.KeyResource
	keyHolder   = telemetry.KeyHolder
	keyFence    = telemetry.KeyFence
)

// The outcomes of a fence check, the values of the outcome attribute.
const (
	admitted = iota
	refused
	failed
)

var outcomeNames = [...]string{admitted: "admitted", refused: "refused", failed: "error"}

// checkKind is one kind of fence check: its span's name and its
// measurement options by outcome, built once.
type checkKind struct {
	span string
	op   string
	with [len(outcomeNames)]telemetry.Attrs
}

// obs is a gate's instrumentation; nil when telemetry.Off turned it off,
// and then every method returns at once.
type obs struct {
	tracer     trace.Tracer
	decisions  metric.Int64Counter
	duration   metric.Float64Histogram
	refusals   metric.Int64Counter
	byResource bool
	kinds      map[string]*checkKind // by operation; read-only once made
	logged     [2]telemetry.Attrs
}

// checkSpans names the span of each operation Commit, Admit and StartCheck
// know; any other operation is counted as "other".
var checkSpans = map[string]string{
	"commit":       "gate.Commit",
	"admit":        "gate.Admit",
	"commit_batch": "pgxgate.CommitBatch",
	"begin_fenced": "pgxgate.BeginFenced",
	"other":        "gate.Observe",
}

func newObs(o *Options) *obs {
	m, t, ok := telemetry.Providers("github.com/fencegate/fencegate/gate", o.MeterProvider, o.TracerProvider)
	if !ok {
		return nil
	}
	ob := &obs{
		tracer: t,
		decisions: telemetry.Counter(m, "fencegate.gate.decisions", "{decision}",
			"Fence checks by outcome: admitted, refused (a stale or never issued fence), error (the check did not run to a decision)."),
		duration: telemetry.Histogram(m, "fencegate.gate.commit.duration",
			"How long a fence check took, from the call to its decision; a refusal includes its rollback and its rejection log write.", telemetry.Short),
		refusals: telemetry.Counter(m, "fencegate.gate.refusals", "{refusal}",
			"Refusals, by whether their rejection log record was written (logged=true)."),
		byResource: o.MetricsByResource,
		kinds:      make(map[string]*checkKind, len(checkSpans)),
	}
	for op, span := range checkSpans {
		k := &checkKind{span: span, op: op}
		for i, name := range outcomeNames {
			k.with[i] = telemetry.With(attribute.String("operation", op), attribute.String("outcome", name))
		}
		ob.kinds[op] = k
	}
	ob.logged = [2]telemetry.Attrs{telemetry.With(attribute.Bool("logged", false)), telemetry.With(attribute.Bool("logged", true))}
	return ob
}

// check is one fence check under way.
type check struct {
	o     *obs
	kind  *checkKind
	span  trace.Span
	token fence.Token
	start time.Time
}

// start opens op's span, a child of ctx's, and starts its clock.
func (o *obs) start(ctx context.Context, op string, token fence.Token) (context.Context, check) {
	if o == nil {
		return ctx, check{}
	}
	k := o.kinds[op]
	if k == nil {
		k = o.kinds["other"]
	}
	ctx, span := o.tracer.Start(ctx, k.span)
	if span.IsRecording() { // the attributes cost allocations: only for a span that keeps them
		span.SetAttributes(attribute.String(keyResource, token.Name()), attribute.String(keyHolder, token.Holder),
			attribute.Int64(keyFence, token.Fence), attribute.String("fencegate.operation", op))
	}
	return ctx, check{o: o, kind: k, span: span, token: token, start: time.Now()}
}

// end records the check's outcome from its error: nil is admitted, a
// *StaleFenceError refused, any other error an error.
func (c check) end(ctx context.Context, errp *error) {
	if c.o == nil {
		return
	}
	err := *errp
	outcome := failed
	stale, isStale := errors.AsType[*StaleFenceError](err)
	switch {
	case err == nil:
		outcome = admitted
	case isStale:
		outcome = refused
	}
	with := c.kind.with[outcome]
	if c.o.byResource {
		with = telemetry.With(attribute.String("operation", c.kind.op), attribute.String("outcome", outcomeNames[outcome]),
			attribute.String(keyResource, c.token.Name()))
	}
	c.o.duration.Record(ctx, time.Since(c.start).Seconds(), with.Record...)
	c.o.decisions.Add(ctx, 1, with.Add...)
	if isStale && c.span.IsRecording() {
		c.span.SetAttributes(attribute.Int64("fencegate.floor", stale.Floor), attribute.String("fencegate.floor_holder", stale.FloorHolder),
			attribute.Bool("fencegate.not_issued", stale.NotIssued))
	}
	telemetry.End(c.span, outcomeNames[outcome], err)
}

// refusal counts a refusal, logged or not.
func (o *obs) refusal(ctx context.Context, token fence.Token, logged bool) {
	if o == nil {
		return
	}
	with := o.logged[boolIndex(logged)]
	if o.byResource {
		with = telemetry.With(attribute.Bool("logged", logged), attribute.String(keyResource, token.Resource))
	}
	o.refusals.Add(ctx, 1, with.Add...)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
