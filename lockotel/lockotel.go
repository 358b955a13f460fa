// Package lockotel makes OpenTelemetry metrics and spans of the calls of
// package lock: give lock.Options the Hooks that New returns.
//
// It is a module of its own, so that a user of the lock who does not ask
// for OpenTelemetry pulls none of it.
//
// Spans (tracer ScopeName), each with the attributes lock.key and
// lock.op, and lock.fence once known:
//
//   - "lock.acquire" (or "lock.try-acquire", "lock.acquire-read", ...):
//     the call; an error is recorded on it, except a try that found the
//     lock taken (lock.outcome "taken" says so);
//   - "lock.wait": a child of the acquire, from its place in line to the
//     call's end, with lock.queue, the line's length as it joined;
//   - "lock.hold": a child of the acquire, from the lease to its release
//     or loss (the loss recorded as its error);
//   - "lock.release" and "lock.renew" (the watchdog's renewals are
//     children of the acquire).
//
// Metrics (meter ScopeName), each with lock.op and, where the call has
// one, lock.outcome ("ok", "taken", "unknown", "not_held", "canceled",
// "error"); lock.key only with Options.KeyAttribute:
//
//   - lock.acquire.duration (s): acquire calls, the wait included;
//   - lock.wait.duration (s): the time a waiting acquire spent in line;
//   - lock.queue.length ({waiter}): the line's length at each join;
//   - lock.handoff.duration (s): from a hand-off's message to the lease;
//   - lock.hold.duration (s): leases, from the acquire to the release;
//   - lock.lost ({lease}): leases lost;
//   - lock.unknown_outcomes ({call}): calls whose reply was lost;
//   - lock.cleanups ({cleanup}): cleanups of such calls, lock.outcome
//     "done" or "gave_up";
//   - lock.renewals ({renewal}): renewals, the watchdog's and Renew's.
package lockotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockproof/lockproof/lock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/lockproof/lockproof/lockotel"

// Options configure New. The zero value uses the global providers.
type Options struct {
	// MeterProvider makes the metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the spans; nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// KeyAttribute puts the lock's key on the metrics too (spans always
	// carry it). Keys are often unbounded (one per order, per user), and
	// each key is then a time series of its own: set it only when your
	// keys are few.
	KeyAttribute bool

	_ struct{}
}

// Attribute keys.
const (
	KeyAttr     = attribute.Key("lock.key")
	OpAttr      = attribute.Key("lock.op")
	OutcomeAttr = attribute.Key("lock.outcome")
	FenceAttr   = attribute.Key("lock.fence")
	QueueAttr   = attribute.Key("lock.queue")
)

// New returns lock.Hooks whose Begin and Event feed the metrics and spans
// above (the other hooks are nil: set them on the result if you use them).
func New(o Options) (lock.Hooks, error) {
	mp, tp := o.MeterProvider, o.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	ob := &observer{tracer: tp.Tracer(ScopeName), keyAttr: o.KeyAttribute, holds: map[*lock.Lease]trace.Span{}}
	m := mp.Meter(ScopeName)
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		errs = append(errs, err)
		return h
	}
	count := func(name, desc, unit string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	ob.acquire = hist("lock.acquire.duration", "Duration of acquire calls, the wait in line included.")
	ob.wait = hist("lock.wait.duration", "Time a waiting acquire spent in the lock's line.")
	ob.handoff = hist("lock.handoff.duration", "Time from a hand-off's message to the waiter's lease.")
	ob.hold = hist("lock.hold.duration", "Time from an acquire to the release that ended its lease.")
	var err error
	ob.queue, err = m.Int64Histogram("lock.queue.length", metric.WithDescription("Length of the lock's line as a waiter joins it."), metric.WithUnit("{waiter}"))
	errs = append(errs, err)
	ob.lost = count("lock.lost", "Leases lost: their validity ran out, or a renewal found the lock gone.", "{lease}")
	ob.unknown = count("lock.unknown_outcomes", "Calls whose reply was lost: they may have taken effect.", "{call}")
	ob.cleanups = count("lock.cleanups", "Background cleanups of calls whose reply was lost.", "{cleanup}")
	ob.renewals = count("lock.renewals", "Lease renewals, the watchdog's and Renew's.", "{renewal}")
	if err := errors.Join(errs...); err != nil {
		return lock.Hooks{}, fmt.Errorf("lockotel: instruments: %w", err)
	}
	return lock.Hooks{Begin: ob.begin, Event: ob.event}, nil
}

type observer struct {
	tracer                            trace.Tracer
	acquire, wait, handoff, hold      metric.Float64Histogram
	queue                             metric.Int64Histogram
	lost, unknown, cleanups, renewals metric.Int64Counter
	keyAttr                           bool

	mu sync.Mutex
	// holds are the open "lock.hold" spans, by lease: key and fence do
	// not tell nested holds apart. A lease ends by its release or its
	// loss; with Hooks.Event set, the lock arms every lease's expiry, so
	// a lease nobody releases is lost and its span ended at its deadline.
	holds map[*lock.Lease]trace.Span
}

// call is one call's state, in its context.
type call struct {
	op, key  string
	start    time.Time
	span     trace.Span
	joined   time.Time
	waitSpan trace.Span
}

type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// isAcquire: the call makes a lease (an acquire of any kind, a reenter).
func isAcquire(op string) bool { return op != "release" && op != "renew" }

// Outcome names err as the lock.outcome attribute does.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, lock.ErrUnknownOutcome):
		return "unknown"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Before taken: a wait that ran out of time says both.
		return "canceled"
	case errors.Is(err, lock.ErrNotAcquired):
		return "taken"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	}
	return "error"
}

func (o *observer) attrs(op, key string, more ...attribute.KeyValue) metric.MeasurementOption {
	kv := append([]attribute.KeyValue{OpAttr.String(op)}, more...)
	if o.keyAttr {
		kv = append(kv, KeyAttr.String(key))
	}
	return metric.WithAttributes(kv...)
}

func (o *observer) begin(ctx context.Context, c lock.Call) (context.Context, func(lock.Result)) {
	attrs := []attribute.KeyValue{KeyAttr.String(c.Key), OpAttr.String(c.Op)}
	if c.Fence != 0 {
		attrs = append(attrs, FenceAttr.Int64(int64(c.Fence)))
	}
	ctx, span := o.tracer.Start(ctx, "lock."+c.Op, trace.WithAttributes(attrs...))
	st := &call{op: c.Op, key: c.Key, start: time.Now(), span: span}
	ctx = context.WithValue(ctx, callKey{}, st)
	return ctx, func(r lock.Result) { o.end(ctx, st, r) }
}

func (o *observer) end(ctx context.Context, st *call, r lock.Result) {
	now := time.Now()
	out := Outcome(r.Err)
	opts := o.attrs(st.op, st.key, OutcomeAttr.String(out))
	switch {
	case isAcquire(st.op):
		o.acquire.Record(ctx, now.Sub(st.start).Seconds(), opts)
		if st.waitSpan != nil {
			o.wait.Record(ctx, now.Sub(st.joined).Seconds(), opts)
			st.waitSpan.SetAttributes(OutcomeAttr.String(out))
			st.waitSpan.End()
		}
		if r.Lease != nil && r.Err == nil {
			st.span.SetAttributes(FenceAttr.Int64(int64(r.Fence)))
			_, hold := o.tracer.Start(ctx, "lock.hold", trace.WithAttributes(
				KeyAttr.String(st.key), OpAttr.String(st.op), FenceAttr.Int64(int64(r.Fence))))
			o.mu.Lock()
			o.holds[r.Lease] = hold
			o.mu.Unlock()
		}
	case st.op == "release":
		if r.Held > 0 {
			o.hold.Record(ctx, r.Held.Seconds(), opts)
		}
		// A release ends its lease when it released (nil), found the hold
		// gone (ErrNotHeld) or may have (ErrUnknownOutcome); one that sent
		// nothing leaves the lease standing.
		if r.Err == nil || errors.Is(r.Err, lock.ErrNotHeld) || errors.Is(r.Err, lock.ErrUnknownOutcome) {
			o.endHold(r.Lease, out, nil)
		}
	case st.op == "renew":
		o.renewals.Add(ctx, 1, opts)
	}
	if out == "unknown" && !r.Joined {
		// A release that took a concurrent one's outcome sent nothing.
		o.unknown.Add(ctx, 1, o.attrs(st.op, st.key))
	}
	st.span.SetAttributes(OutcomeAttr.String(out))
	if r.Err != nil && out != "taken" {
		st.span.RecordError(r.Err)
		st.span.SetStatus(codes.Error, out)
	}
	st.span.End()
}

// endHold ends lease's hold span, with cause as its error if not nil.
func (o *observer) endHold(l *lock.Lease, out string, cause error) {
	if l == nil {
		return
	}
	o.mu.Lock()
	span, ok := o.holds[l]
	delete(o.holds, l)
	o.mu.Unlock()
	if !ok {
		return
	}
	span.SetAttributes(OutcomeAttr.String(out))
	if cause != nil {
		span.RecordError(cause)
		span.SetStatus(codes.Error, out)
	}
	span.End()
}

func (o *observer) event(ctx context.Context, e lock.Event) {
	switch e.Kind {
	case lock.EventJoin:
		if e.Queue > 0 {
			o.queue.Record(ctx, e.Queue, o.attrs(e.Op, e.Key))
		}
		if st := callOf(ctx); st != nil && st.waitSpan == nil {
			st.joined = time.Now()
			_, st.waitSpan = o.tracer.Start(ctx, "lock.wait", trace.WithAttributes(
				KeyAttr.String(e.Key), OpAttr.String(e.Op), QueueAttr.Int64(e.Queue)))
		}
	case lock.EventHandoff:
		if e.Took > 0 { // 0: the server could not tell the age
			o.handoff.Record(ctx, e.Took.Seconds(), o.attrs(e.Op, e.Key))
		}
		trace.SpanFromContext(ctx).AddEvent("handoff", trace.WithAttributes(
			attribute.Float64("lock.handoff.seconds", e.Took.Seconds())))
	case lock.EventLost:
		o.lost.Add(ctx, 1, o.attrs(e.Op, e.Key))
		o.endHold(e.Lease, "lost", e.Err)
	case lock.EventCleanup:
		out := "done"
		if e.Err != nil {
			out = "gave_up"
		}
		o.cleanups.Add(ctx, 1, o.attrs(e.Op, e.Key, OutcomeAttr.String(out)))
	}
}
