package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/history"
)

// Run runs every client until ctx is done, recording into rec. It returns
// when all workers have stopped (a crashed client stops at once, leaving its
// operation in flight). Operations in flight when ctx ends complete on their
// own deadlines and are recorded.
func (w *Workload) Run(ctx context.Context, rec *history.Recorder) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(w.Clients)+len(w.Procs))
	for _, p := range w.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx, rec); err != nil {
				errs <- fmt.Errorf("process client %s: %w", p.Name, err)
			}
		}()
	}
	sampling := w.footprinting()
	var sampler sync.WaitGroup
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	if sampling {
		sampler.Go(func() { w.sampleFootprints(sctx, rec) })
	}
	if !w.cfg.Replayable {
		// Real time: the stalls of this process are its clients' pauses
		// that nobody injected (watchStalls); the child processes watch
		// their own.
		names := make([]string, len(w.Clients))
		for i, c := range w.Clients {
			names[i] = c.Name
		}
		defer watchStalls(ctx, rec, names)()
	}
	for _, c := range w.Clients {
		c.rec.Store(rec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.stopped.Store(true)
			if err := w.worker(ctx, rec, c); err != nil {
				errs <- fmt.Errorf("client %s: %w", c.Name, err)
			}
		}()
	}
	wg.Wait()
	for _, c := range w.Clients {
		c.watchers.Wait()
	}
	stopSampling()
	sampler.Wait()
	if sampling {
		w.settleFootprints(rec)
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// errStop ends a worker without error (its client crashed).
var errStop = errors.New("client stopped")

func (w *Workload) worker(ctx context.Context, rec *history.Recorder, c *Client) error {
	seq := 0
	for ctx.Err() == nil {
		if err := sleepRand(ctx, c.rng, w.cfg.Think); err != nil {
			return nil
		}
		if err := c.Gate.Wait(ctx); err != nil {
			return nil // crashed
		}
		seq++
		err := w.section(ctx, rec, c, seq)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sleepRand(ctx context.Context, rng *rand.Rand, max time.Duration) error {
	if max <= 0 {
		return ctx.Err()
	}
	return sleepFor(ctx, time.Duration(rng.Int64N(int64(max)+1)))
}

// sleepFor waits d, or until ctx is done (its error).
func sleepFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return env.Sleep(ctx, d)
}
