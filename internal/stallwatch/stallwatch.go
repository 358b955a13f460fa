// Package stallwatch measures the stalls of its own process that nobody
// injected: how late a short ticker fires (the process waited for a core,
// or the runtime stopped the world), merged with the runtime's own count
// of its stop-the-world pauses (runtime/metrics). The chaos workload runs
// one watcher per process and records each stall longer than a threshold
// as a window in the history (docs/DESIGN.md, "Stalls"), which the judge
// reads as a pause of that process's clients.
//
// Real time only: a simulation's clock is virtual and never stalls.
package stallwatch

import (
	"context"
	"runtime/metrics"
	"time"
)

// Defaults of Watch: a tick every 5ms; a stall is a tick 50ms late or
// more (or a rise of that much in the runtime's total pause time between
// two ticks).
const (
	Every     = 5 * time.Millisecond
	Threshold = 50 * time.Millisecond
)

// pausesMetric is the runtime's histogram of its stop-the-world pauses.
const pausesMetric = "/sched/pauses/total/gc:seconds"

// Watch ticks every every until ctx is done and calls record with the
// window of each stall of at least threshold: [the instant the tick was
// due, the instant it fired]. A tick late by less is no stall, but the
// runtime's pause time counted since the last tick is: a GC pause the
// ticker hid (it fired on time after one) is recorded as a window that
// long, ending at the tick. record is called on Watch's goroutine.
func Watch(ctx context.Context, every, threshold time.Duration, record func(start, end time.Time)) {
	watch(ctx, every, threshold, time.Now, record)
}

// watch is Watch on the clock now (a test's).
func watch(ctx context.Context, every, threshold time.Duration, now func() time.Time, record func(start, end time.Time)) {
	if every <= 0 {
		every = Every
	}
	if threshold <= 0 {
		threshold = Threshold
	}
	t := time.NewTicker(every)
	defer t.Stop()
	sample := []metrics.Sample{{Name: pausesMetric}}
	paused := pauseTotal(sample)
	due := now().Add(every)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := now()
		p := pauseTotal(sample)
		gc := p - paused
		paused = p
		switch late := at.Sub(due); {
		case late >= threshold:
			record(due, at)
		case gc >= threshold:
			record(at.Add(-gc), at)
		}
		// The next tick is due every after this one: a ticker drops the
		// ticks it missed, and one late stall is one window.
		due = at.Add(every)
	}
}

// pauseTotal is an upper bound of the runtime's stop-the-world pause time
// so far: the histogram's counts times their buckets' upper bounds (the
// last bucket's lower bound when it is unbounded); 0 when the runtime has
// no such metric.
func pauseTotal(s []metrics.Sample) time.Duration {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s[0].Value.Float64Histogram()
	var total float64
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		hi := h.Buckets[i+1]
		if hi > 1e9 { // +Inf
			hi = h.Buckets[i]
		}
		total += float64(n) * hi
	}
	return time.Duration(total * float64(time.Second))
}
