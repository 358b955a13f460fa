package lockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/lockotel"
)

// run is a lock client whose hooks feed a manual metric reader and a span
// recorder, on a real redis-server.
type run struct {
	p      *redisproc.Process
	rdb    *redis.Client
	c      *lock.Client
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newRun(t *testing.T) *run {
	t.Helper()
	return newRunWith(t, lock.Options{TTL: 5 * time.Second}, nil)
}

// newRunWith is newRun with the lock's options given (the hooks are
// lockotel's, plus what edit sets on them).
func newRunWith(t *testing.T, opts lock.Options, edit func(*lock.Hooks)) *run {
	t.Helper()
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	hooks, err := lockotel.New(lockotel.Options{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&hooks)
	}
	opts.Hooks = hooks
	c, err := lock.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return &run{p: p, rdb: rdb, c: c, reader: reader, spans: spans}
}

// metrics collects the run's metrics: per instrument name, per
// lock.outcome (or "" without one), the count of a histogram's
// measurements or the sum of a counter, and a histogram's sum.
func (r *run) metrics(t *testing.T) (count map[string]map[string]int64, sum map[string]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	count, sum = map[string]map[string]int64{}, map[string]float64{}
	outcome := func(s attribute.Set) string {
		v, _ := s.Value(lockotel.OutcomeAttr)
		return v.AsString()
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, lockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			c := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					c[outcome(p.Attributes)] += int64(p.Count)
					sum[m.Name] += p.Sum
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					c[outcome(p.Attributes)] += int64(p.Count)
					sum[m.Name] += float64(p.Sum)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					c[outcome(p.Attributes)] += p.Value
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
			count[m.Name] = c
		}
	}
	return count, sum
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMetricsAndSpansOfARun: a holder, a try that finds the lock taken, a
// waiter handed the lock, a renewal, a lease lost, and a release whose
// reply is lost (the server paused) and is cleaned up once it answers:
// each shows in the metrics and the spans, with its outcome.
func TestMetricsAndSpansOfARun(t *testing.T) {
	r := newRun(t)
	ctx := ctxT(t)
	l1, err := r.c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.TryAcquire(ctx, "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := r.c.Acquire(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for {
		info, err := r.c.Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiting == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if err := l2.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	short, err := r.c.Acquire(ctx, "short", lock.WithTTL(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-short.Lost():
	case <-ctx.Done():
		t.Fatal("a 30ms lease nobody renews was not lost")
	}
	// A release whose reply never comes: the server is paused.
	if err := r.p.Pause(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = l2.Release(rctx)
	cancel()
	if rerr := r.p.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("a release to a paused server: %v; want ErrUnknownOutcome", err)
	}

	// The cleanup of that release runs once the server answers.
	var count map[string]map[string]int64
	var sum map[string]float64
	for {
		count, sum = r.metrics(t)
		if count["lock.cleanups"]["done"] == 1 || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range []struct {
		name, outcome string
		n             int64
	}{
		{"lock.acquire.duration", "ok", 3}, // l1, the waiter, short
		{"lock.acquire.duration", "taken", 1},
		{"lock.wait.duration", "ok", 1},
		{"lock.queue.length", "", 1},
		{"lock.handoff.duration", "", 1},
		{"lock.hold.duration", "ok", 1}, // l1: the unknown release held l2 for a time nobody knows
		{"lock.renewals", "ok", 1},
		{"lock.lost", "", 1},
		{"lock.unknown_outcomes", "", 1},
		{"lock.cleanups", "done", 1},
	} {
		if got := count[w.name][w.outcome]; got != w.n {
			t.Errorf("%s (outcome %q): %d, want %d (all: %v)", w.name, w.outcome, got, w.n, count[w.name])
		}
	}
	if q := sum["lock.queue.length"]; q != 1 {
		t.Errorf("the line's length as the waiter joined: %v, want 1", q)
	}
	if h := sum["lock.handoff.duration"]; h <= 0 || h > 5 {
		t.Errorf("the hand-off's age at its pickup: %vs, want more than 0 and at most the test's 5s", h)
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range r.spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	attr := spanAttr
	for _, s := range byName["lock.acquire"] {
		if attr(s, lockotel.KeyAttr).AsString() == "" || attr(s, lockotel.FenceAttr).AsInt64() == 0 {
			t.Errorf("acquire span without key or fence: %v", s.Attributes())
		}
	}
	if n := len(byName["lock.acquire"]); n != 3 {
		t.Errorf("%d acquire spans, want 3", n)
	}
	if s := byName["lock.try-acquire"]; len(s) != 1 || s[0].Status().Code == codes.Error || attr(s[0], lockotel.OutcomeAttr).AsString() != "taken" {
		t.Errorf("try-acquire spans: %v; want one, taken, not an error", s)
	}
	if s := byName["lock.wait"]; len(s) != 1 || attr(s[0], lockotel.QueueAttr).AsInt64() != 1 {
		t.Errorf("wait spans: %d; want one with lock.queue 1", len(s))
	}
	var lost, unknownRelease int
	for _, s := range byName["lock.hold"] {
		if s.Status().Code == codes.Error && attr(s, lockotel.OutcomeAttr).AsString() == "lost" {
			lost++
		}
	}
	for _, s := range byName["lock.release"] {
		if s.Status().Code == codes.Error && attr(s, lockotel.OutcomeAttr).AsString() == "unknown" && len(s.Events()) > 0 {
			unknownRelease++
		}
	}
	if n := len(byName["lock.hold"]); n != 3 || lost != 1 {
		t.Errorf("%d hold spans ended (%d lost); want 3 (l1 released, l2 released unknown, short lost)", n, lost)
	}
	if unknownRelease != 1 {
		t.Errorf("%d release spans with the unknown outcome recorded as an error, want 1", unknownRelease)
	}
	if n := len(byName["lock.renew"]); n != 1 {
		t.Errorf("%d renew spans, want 1", n)
	}
}
