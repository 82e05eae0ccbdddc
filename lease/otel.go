package lease

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/telemetry"
)

// The lease package's OpenTelemetry instrumentation: a Coordinator's
// instruments, made once in NewCoordinator, and the spans and measurements
// of its entry points and of the keeper. The package doc (Observability)
// lists what each instrument records.

const (
	keyResource = telemetry.KeyResource
	keyHolder   = telemetry.KeyHolder
	keyFence    = telemetry.KeyFence
)

// The values of the outcome and reason attributes.
var attrValues = []string{
	"granted", "held", "busy", "error", "cancelled", // acquisitions and waits
	"released", "lost", // holds
	"on_time", "late", "failed", "refused", // renewals
	"renewed", "expired", // Renew's spans
	"deadline", "renewal_incomplete", "born_expired", // losses; "released", "refused" too
}

// obs is a Coordinator's instrumentation; nil when telemetry.Off turned it
// off, and then every method returns at once.
type obs struct {
	tracer     trace.Tracer
	acquire    metric.Float64Histogram
	wait       metric.Float64Histogram
	handover   metric.Float64Histogram
	hold       metric.Float64Histogram
	headroom   metric.Float64Histogram
	renewals   metric.Int64Counter
	lost       metric.Int64Counter
	byResource bool
	outcome    map[string]telemetry.Attrs // {outcome=v}, built once
	reason     map[string]telemetry.Attrs // {reason=v}
	none       telemetry.Attrs
	// unlinked is what a granting span with no valid context (a tracer
	// that records nothing) leaves on its request: one for them all.
	unlinked *acquireSpan
}

func newObs(o *CoordinatorOptions) *obs {
	m, t, ok := telemetry.Providers("github.com/fencegate/fencegate/lease", o.MeterProvider, o.TracerProvider)
	if !ok {
		return nil
	}
	ob := &obs{
		tracer: t,
		acquire: telemetry.Histogram(m, "fencegate.lease.acquire.duration",
			"How long one acquisition took, by outcome: granted, held (someone holds a live lease), busy (a row lock or the database said wait), error.", telemetry.Short),
		wait: telemetry.Histogram(m, "fencegate.lease.wait.duration",
			"How long AcquireWait took, its time in the queue included, by outcome: granted, held (the holder already holds it), cancelled (ctx ended), error.", telemetry.Long),
		handover: telemetry.Histogram(m, "fencegate.lease.handover.duration",
			"From the release this Coordinator saw (its own Release, or the database's announcement) to the grant of the waiter it woke.", telemetry.Short),
		hold: telemetry.Histogram(m, "fencegate.lease.hold.duration",
			"How long a lease kept by Keep or Hold was held, from its request to its release or loss, on the holder's clock, by outcome: released, lost.", telemetry.Long),
		headroom: telemetry.Histogram(m, "fencegate.lease.grant.headroom",
			"The time a new lease has left on the holder's clock when its grant is completed: the term less ClockSkew and the round trip.", telemetry.Long),
		renewals: telemetry.Counter(m, "fencegate.lease.renewals", "{renewal}",
			"Renewals of leases kept by Keep or Hold, per lease, by outcome: on_time, late (after a failed attempt), failed (the batch failed; retried), refused (the coordinator says the lease is over)."),
		lost: telemetry.Counter(m, "fencegate.lease.lost", "{lease}",
			"Leases kept by Keep or Hold that were lost, by reason: deadline, refused, released, renewal_incomplete, born_expired."),
		byResource: o.MetricsByResource,
		outcome:    make(map[string]telemetry.Attrs, len(attrValues)),
		reason:     make(map[string]telemetry.Attrs, len(attrValues)),
		none:       telemetry.With(),
	}
	ob.unlinked = &acquireSpan{o: ob}
	for _, v := range attrValues {
		ob.outcome[v] = telemetry.With(attribute.String("outcome", v))
		ob.reason[v] = telemetry.With(attribute.String("reason", v))
	}
	return ob
}

// with is the attributes key=v (outcome or reason; "" for none), with the
// resource's name when MetricsByResource asks for it.
func (o *obs) with(key, v, resource string) telemetry.Attrs {
	if o.byResource {
		attrs := []attribute.KeyValue{attribute.String(keyResource, resource)}
		if key != "" {
			attrs = append(attrs, attribute.String(key, v))
		}
		return telemetry.With(attrs...)
	}
	switch key {
	case "outcome":
		return o.outcome[v]
	case "reason":
		return o.reason[v]
	}
	return o.none
}

// op is one call of a Coordinator's entry point under way.
type op struct {
	o        *obs
	span     trace.Span
	resource string
	start    time.Time
}

// start opens span name, a child of ctx's linked to links, and starts its
// clock. A span of no one lease (RenewBatch's: resource "", fence 0) gets no
// token attributes.
func (o *obs) start(ctx context.Context, name, resource, holder string, fence int64, links ...trace.Link) (context.Context, op) {
	if o == nil {
		return ctx, op{}
	}
	var opts []trace.SpanStartOption
	if len(links) > 0 { // an option costs an allocation, even empty
		opts = []trace.SpanStartOption{trace.WithLinks(links...)}
	}
	ctx, span := o.tracer.Start(ctx, name, opts...)
	if span.IsRecording() { // the attributes cost allocations: only for a span that keeps them
		if resource != "" {
			span.SetAttributes(attribute.String(keyResource, resource), attribute.String(keyHolder, holder))
		}
		if fence != 0 {
			span.SetAttributes(attribute.Int64(keyFence, fence))
		}
	}
	return ctx, op{o: o, span: span, resource: resource, start: time.Now()}
}

// acquireSpan is what an acquisition's span leaves on its request for the
// Lease made from it: the span to link renewals and releases to.
type acquireSpan struct {
	o  *obs
	sc trace.SpanContext
}

// leaseOtel is what a Lease carries for its instrumentation.
type leaseOtel struct {
	acquired clock.Instant // the request's send instant, on the holder's clock
	span     *acquireSpan  // nil when no instrumented Coordinator in this process granted it
}

// linked reports whether l's acquisition span can be linked to: a span of a
// tracer that records nothing (the default, OpenTelemetry's global one
// before a provider is set) has no valid context, and a link to it, which
// costs three allocations, would be dropped.
func (l *Lease) linked() bool {
	return l != nil && l.otel.span != nil && l.otel.span.sc.IsValid()
}

// link is the link to l's acquisition span, if any.
func (l *Lease) link() []trace.Link {
	if !l.linked() {
		return nil
	}
	return []trace.Link{{SpanContext: l.otel.span.sc}}
}

// startAcquire opens Acquire's span (one acquisition, also each attempt of
// AcquireWait).
func (o *obs) startAcquire(ctx context.Context, req *AcquireRequest) (context.Context, op) {
	if o == nil || req == nil {
		return ctx, op{}
	}
	return o.start(ctx, "lease.Acquire", req.name(), req.Holder, 0)
}

// endAcquire records the acquisition's outcome, and leaves its span on req
// for the Lease.
func (p op) endAcquire(ctx context.Context, req *AcquireRequest, out *AcquireOutcome, errp *error) {
	if p.o == nil {
		return
	}
	outcome := acquireOutcome(*out, *errp)
	p.o.acquire.Record(ctx, time.Since(p.start).Seconds(), p.o.with("outcome", outcome, p.resource).Record...)
	if p.span.IsRecording() {
		switch {
		case out.OK:
			p.span.SetAttributes(attribute.Int64(keyFence, out.Grant.Fence))
		case *errp == nil:
			p.span.SetAttributes(attribute.String("fencegate.held_by", out.HeldBy), attribute.Int64("fencegate.held_fence", out.Fence))
		}
	}
	if out.OK {
		s := p.o.unlinked
		if sc := p.span.SpanContext(); sc.IsValid() {
			s = &acquireSpan{o: p.o, sc: sc}
		}
		req.span.Store(s)
	}
	telemetry.End(p.span, outcome, *errp)
}

func acquireOutcome(out AcquireOutcome, err error) string {
	switch {
	case err == nil && out.OK:
		return "granted"
	case err == nil:
		return "held"
	case errors.Is(err, ErrBusy):
		return "busy"
	}
	return "error"
}

// completed fills in l's instrumentation from req, the request it was
// granted, and records the headroom of its grant.
func (req *AcquireRequest) completed(l *Lease) {
	l.otel = leaseOtel{acquired: req.SentAt(), span: req.span.Load()}
	if s := l.otel.span; s != nil {
		s.o.headroom.Record(context.Background(), l.Remaining().Seconds(), s.o.with("", "", l.token.Name()).Record...)
	}
}

// startWait opens AcquireWait's span.
func (o *obs) startWait(ctx context.Context, client *Client, resource string) (context.Context, op) {
	if o == nil || client == nil {
		return ctx, op{}
	}
	return o.start(ctx, "lease.AcquireWait", resource, client.Holder(), 0)
}

// endWait records AcquireWait's outcome.
func (p op) endWait(ctx context.Context, l **Lease, errp *error) {
	if p.o == nil {
		return
	}
	outcome := "error"
	switch {
	case *l != nil:
		outcome = "granted"
		if p.span.IsRecording() {
			p.span.SetAttributes(attribute.Int64(keyFence, (*l).token.Fence))
		}
	case ctx.Err() != nil:
		outcome = "cancelled"
	case errors.Is(*errp, ErrHeld):
		outcome = "held"
	}
	p.o.wait.Record(ctx, time.Since(p.start).Seconds(), p.o.with("outcome", outcome, p.resource).Record...)
	telemetry.End(p.span, outcome, *errp)
}

// released notes that w was woken by a release, for the hand-over latency.
func (w *waiter) released(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releasedAt = at
}

// handedOver records the hand-over to w, just granted, if a release woke it.
func (o *obs) handedOver(ctx context.Context, w *waiter) {
	if o == nil {
		return
	}
	w.mu.Lock()
	at := w.releasedAt
	w.mu.Unlock()
	if !at.IsZero() {
		o.handover.Record(ctx, time.Since(at).Seconds(), o.with("", "", w.resource).Record...)
	}
}

// startRenew opens Renew's span, linked to the acquisition of the lease.
func (o *obs) startRenew(ctx context.Context, req *RenewRequest) (context.Context, op) {
	if o == nil || req == nil {
		return ctx, op{}
	}
	return o.start(ctx, "lease.Renew", req.name(), req.Holder, req.Fence, req.lease.link()...)
}

// endRenew ends Renew's span with its outcome: renewed, expired or error.
func (p op) endRenew(out *RenewOutcome, errp *error) {
	if p.o == nil {
		return
	}
	outcome := "error"
	switch {
	case *errp != nil:
	case out.OK:
		outcome = "renewed"
	default:
		outcome = "expired"
	}
	telemetry.End(p.span, outcome, *errp)
}

// startRenewBatch opens RenewBatch's span, linked to the acquisition of
// every lease in it.
func (o *obs) startRenewBatch(ctx context.Context, reqs []*RenewRequest) (context.Context, op) {
	if o == nil {
		return ctx, op{}
	}
	var links []trace.Link
	for _, req := range reqs {
		if req != nil {
			links = append(links, req.lease.link()...)
		}
	}
	ctx, p := o.start(ctx, "lease.RenewBatch", "", "", 0, links...)
	if p.span.IsRecording() {
		p.span.SetAttributes(attribute.Int("fencegate.leases", len(reqs)))
	}
	return ctx, p
}

// endRenewBatch ends RenewBatch's span with how many leases it renewed.
func (p op) endRenewBatch(outs *[]RenewOutcome, errp *error) {
	if p.o == nil {
		return
	}
	if p.span.IsRecording() && *errp == nil {
		n := 0
		for _, out := range *outs {
			if out.OK {
				n++
			}
		}
		p.span.SetAttributes(attribute.Int("fencegate.renewed", n))
	}
	outcome := "renewed"
	if *errp != nil {
		outcome = "error"
	}
	telemetry.End(p.span, outcome, *errp)
}

// leaseKey carries the Lease a release is for, to link Release's span to
// its acquisition.
type leaseKey struct{}

// releasing returns ctx carrying l for Release's span.
func releasing(ctx context.Context, l *Lease) context.Context {
	if !l.linked() {
		return ctx
	}
	return context.WithValue(ctx, leaseKey{}, l)
}

// startRelease opens Release's span, linked to the acquisition of the lease
// when ctx carries it (Kept.Release, Hold).
func (o *obs) startRelease(ctx context.Context, token fence.Token) (context.Context, op) {
	if o == nil {
		return ctx, op{}
	}
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return o.start(ctx, "lease.Release", token.Name(), token.Holder, token.Fence, l.link()...)
}

// endRelease ends Release's span: released, or not (error otherwise).
func (p op) endRelease(released *bool, errp *error) {
	if p.o == nil {
		return
	}
	outcome := "error"
	switch {
	case *errp != nil:
	case *released:
		outcome = "released"
	default:
		outcome = "not_released"
	}
	telemetry.End(p.span, outcome, *errp)
}

// renewal counts one renewal of a kept lease.
func (o *obs) renewal(ctx context.Context, l *Lease, outcome string) {
	if o == nil {
		return
	}
	o.renewals.Add(ctx, 1, o.with("outcome", outcome, l.token.Name()).Add...)
}

// renewedOutcome is a successful renewal's outcome: late when an attempt
// before it failed.
func renewedOutcome(lastErr error) string {
	if lastErr != nil {
		return "late"
	}
	return "on_time"
}

// lose counts a kept lease lost for reason, and its hold.
func (o *obs) lose(ctx context.Context, l *Lease, reason string) {
	if o == nil {
		return
	}
	o.lost.Add(ctx, 1, o.with("reason", reason, l.token.Name()).Add...)
	o.held(ctx, l, "lost")
}

// held records the hold of l, kept until now, released or lost.
func (o *obs) held(ctx context.Context, l *Lease, outcome string) {
	if o == nil {
		return
	}
	d := l.client.clock.Now().Sub(l.otel.acquired)
	o.hold.Record(ctx, d.Seconds(), o.with("outcome", outcome, l.token.Name()).Record...)
}
