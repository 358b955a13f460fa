package workload

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// What the lock keeps in Redis (locker.Footprinter) is sampled apart from
// the critical sections: for each key, every Config.FootprintEvery of the
// run, by the first of its clients that has not crashed, and once more
// when every client has stopped and closed its lock (whose Close waits
// for its background cleanups), so that a lock that leaks shows above its
// bound (locker.Entry.Footprint; the footprint property). Only a lock that
// states a bound is sampled: every other lock's history, and the draws of
// every seed, are what they were. The sampler draws nothing from the
// clients' streams.

// DefaultFootprintEvery is Config.FootprintEvery's default.
const DefaultFootprintEvery = 250 * time.Millisecond

// footprintOffset puts the samples off the round instants of the run
// (a fault's moment, another timer's) at which goroutines woken together
// run in an order Go does not fix: a simulated seed replays more often.
const footprintOffset = 37 * time.Microsecond

// footprinting reports whether the workload samples its lock's footprint:
// the lock states a bound, and its Locker measures.
func (w *Workload) footprinting() bool {
	if w.cfg.FootprintEvery < 0 || len(w.Clients) == 0 {
		return false
	}
	e, ok := w.cfg.Locks.Lookup(w.cfg.Lock)
	if !ok || e.Footprint == nil {
		return false
	}
	_, ok = w.Clients[0].locker.(locker.Footprinter)
	return ok
}

// sampleFootprints samples every key each Config.FootprintEvery until ctx
// is done.
func (w *Workload) sampleFootprints(ctx context.Context, rec *history.Recorder) {
	every := w.cfg.FootprintEvery
	if every == 0 {
		every = DefaultFootprintEvery
	}
	t := time.NewTimer(every + footprintOffset)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.sampleKeys(ctx, rec)
		t.Reset(every)
	}
}

// settleFootprints closes every client's lock, at once, waiting for their
// background cleanups (a second at most: a lock's Close waits that long),
// and samples every key once more.
func (w *Workload) settleFootprints(rec *history.Recorder) {
	var wg sync.WaitGroup
	for _, c := range w.Clients {
		if c.Gate.Crashed() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cc, ok := c.locker.(locker.ContextCloser); ok {
				ctx, cancel := context.WithTimeout(context.Background(), settleBudget)
				defer cancel()
				_ = cc.CloseContext(ctx) // cleanups left running are the bound's unknown calls
				return
			}
			_ = c.locker.Close()
		}()
	}
	wg.Wait()
	w.sampleKeys(context.Background(), rec)
}

// settleBudget bounds how long the end of a run waits for the locks'
// background cleanups before its last sample.
const settleBudget = 2 * time.Second

// sampleKeys samples each key once, by the first of its clients that has
// not crashed.
func (w *Workload) sampleKeys(ctx context.Context, rec *history.Recorder) {
	seen := map[string]bool{}
	for _, c := range w.Clients {
		if seen[c.Key] || c.Gate.Crashed() {
			continue
		}
		fp, ok := c.locker.(locker.Footprinter)
		if !ok {
			continue
		}
		seen[c.Key] = true
		var got locker.Footprint
		op := history.Op{Client: c.Name, Kind: history.Footprint, Key: c.Key}
		// Not c.recording: its in-flight op is the client's main flow's.
		_, err := recording{rec: rec, gate: c.Gate}.lockEdit(ctx, op, ctxNormal, w.cfg.OpTimeout, func(ctx context.Context) (err error) {
			got, err = fp.Footprint(ctx, c.Key)
			return err
		}, func(o *history.Op, res history.Result) {
			if res == history.OK {
				o.Records, o.HasRecords = max(got.Records, 0), true
				o.Bytes, o.HasBytes = max(got.Bytes, 0), true
			}
		})
		if err != nil && !errors.Is(err, errStop) {
			w.cfg.Logger.Warn("footprint sample", "client", c.Name, "key", c.Key, "err", err)
		}
	}
}
