package checker

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeBudget and ErrHeapBudget are the causes of a check stopped by its
// budget (Options.Timeout, Options.MaxHeap): the reasons of undecided keys
// name them.
var (
	ErrTimeBudget = errors.New("time budget exhausted")
	ErrHeapBudget = errors.New("heap budget exhausted")
)

// Budget derives the context a check runs under: done after timeout
// (cause ErrTimeBudget) or once the live heap passes maxHeap bytes (cause
// ErrHeapBudget); 0 is no limit for either. stop releases it. Check
// applies Options.Timeout and Options.MaxHeap with it; a command that
// reads a history first derives its context with it too, so that the
// budget holds from the first line read (reading a history of millions
// of ops is where most of its memory goes).
func Budget(ctx context.Context, timeout time.Duration, maxHeap uint64) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	var stops []func() bool
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() {
			cancel(fmt.Errorf("%w (%v)", ErrTimeBudget, timeout.Round(time.Millisecond)))
		})
		stops = append(stops, t.Stop)
	}
	var wg sync.WaitGroup
	if maxHeap > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchHeap(ctx, maxHeap, cancel)
		}()
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
		wg.Wait()
	}
}

// watchHeap samples the live heap until ctx ends and cancels it with
// ErrHeapBudget once the heap passes limit.
func watchHeap(ctx context.Context, limit uint64, cancel context.CancelCauseFunc) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if v := sample[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > limit {
			cancel(fmt.Errorf("%w (%d MiB)", ErrHeapBudget, limit>>20))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stopGrace is how long keys still get their turn after the budget ran
// out: their searches stop at once, but the direct rules (which need no
// search, and whose violations stand on their own) go on that long, so a
// check stopped early still reports what they find on the keys it
// reaches. Keys not reached by then are not checked: unknown on every
// property. Without that end, a history of a million keys ran its direct
// rules for a minute past its budget, and past SIGTERM.
const stopGrace = 250 * time.Millisecond

// lateAfter returns a flag that turns true once ctx is done and grace has
// passed since; stop releases its timers (the flag is not read after).
func lateAfter(ctx context.Context, grace time.Duration) (late *atomic.Bool, stop func()) {
	late = new(atomic.Bool)
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(grace, func() { late.Store(true) })
		}
	})
	return late, func() {
		stopAfter()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// stopReason says why a search stopped: the budget ran out (time or memory)
// or the caller cancelled.
func (c *run) stopReason(where string) string {
	return fmt.Sprintf("%v: %s", context.Cause(c.ctx), where)
}
