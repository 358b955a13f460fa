package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/sim"
)

// shrinkMinDuration is the shortest run a shrink tries: a fault window
// lasts up to 3 TTLs of the simulation's 500ms, and the run lingers 2
// TTLs after the last one.
const shrinkMinDuration = 750 * time.Millisecond

// simShrink reduces the schedule of each regression of file: it drops
// faults from the mix one at a time, then halves the run, for as long as
// the run still shows the regression's finding (sim.FindingOf), and writes
// the shrunk regressions (their own digests: a shrunk schedule is another
// run) to out. Each candidate is one run, in worker processes; of the
// candidates of one round the first in order that shows the finding is
// taken, so a shrink is as reproducible as its runs.
func simShrink(ctx context.Context, file, out string, workers int, stdout, stderr io.Writer) int {
	regs, err := sim.ReadRegressions(file)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
		return exitBadInput
	}
	var shrunk []sim.Regression
	for i, reg := range regs {
		f, ok := sim.FindingOf(reg.Why)
		start := sim.ShrinkStep{Mix: strings.FieldsFunc(reg.Faults, func(r rune) bool { return r == '+' || r == ',' }),
			Duration: time.Duration(reg.DurationMs) * time.Millisecond}
		if reg.Faults == contract.FaultNone {
			start.Mix = nil
		}
		if !ok || reg.Faults == "swarm" {
			fmt.Fprintf(stdout, "kept %s seed %d as it is (%s: nothing to shrink)\n", reg.Lock, reg.Seed, reg.Why)
			shrunk = append(shrunk, reg)
			continue
		}
		base, err := shrinkRuns(ctx, reg, []sim.ShrinkStep{start}, 1)
		if err != nil {
			fmt.Fprintf(stderr, "lockproof sim: %s:%d: %v\n", file, i+1, err)
			return exitBadInput
		}
		if !f.Shows(base[0].Row) {
			fmt.Fprintf(stdout, "kept %s seed %d as it is: its run no longer shows %q\n", reg.Lock, reg.Seed, reg.Why)
			shrunk = append(shrunk, reg)
			continue
		}
		f = f.Narrowed(base[0].Row)
		best, bestRow, bestSHA := start, base[0].Row, base[0].SHA256
		for {
			var cands []sim.ShrinkStep
			for j := range best.Mix {
				cands = append(cands, sim.ShrinkStep{Mix: slices.Delete(slices.Clone(best.Mix), j, j+1), Duration: best.Duration})
			}
			if h := best.Duration / 2; h >= shrinkMinDuration {
				cands = append(cands, sim.ShrinkStep{Mix: best.Mix, Duration: h})
			}
			if len(cands) == 0 {
				break
			}
			rs, err := shrinkRuns(ctx, reg, cands, workers)
			if err != nil {
				fmt.Fprintf(stderr, "lockproof sim: %s:%d: %v\n", file, i+1, err)
				return exitBadInput
			}
			j := slices.IndexFunc(rs, func(r *sim.SeedResult) bool { return f.Shows(r.Row) })
			if j < 0 {
				break
			}
			best, bestRow, bestSHA = cands[j], rs[j].Row, rs[j].SHA256
		}
		why := reg.Why
		if best.Faults() != start.Faults() || best.Duration != start.Duration {
			why = fmt.Sprintf("%s; shrunk from %s, %v, %d ops", reg.Why, start.Faults(), start.Duration, base[0].Row.Ops)
		}
		fmt.Fprintf(stdout, "shrunk %s seed %d (%s): %s, %v, %d ops -> %s, %v, %d ops\n", reg.Lock, reg.Seed, reg.Why,
			start.Faults(), start.Duration, base[0].Row.Ops, best.Faults(), best.Duration, bestRow.Ops)
		shrunk = append(shrunk, sim.Regression{Lock: reg.Lock, Seed: reg.Seed, Faults: best.Faults(),
			DurationMs: best.Duration.Milliseconds(), Mix: reg.Mix, Clients: reg.Clients, SHA256: bestSHA, Why: why})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range shrunk {
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
			return exitBadInput
		}
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
		return exitBadInput
	}
	fmt.Fprintf(stdout, "shrunk regressions in %s (replay with lockproof sim --replay %s)\n", out, out)
	return exitOK
}

// shrinkRuns runs reg's seed under each step, each in worker processes
// of its own, up to workers at a time, and returns the results in order.
func shrinkRuns(ctx context.Context, reg sim.Regression, steps []sim.ShrinkStep, workers int) ([]*sim.SeedResult, error) {
	out := make([]*sim.SeedResult, len(steps))
	errs := make([]error, len(steps))
	sem := make(chan struct{}, max(workers, 1))
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f := simFlags{locks: reg.Lock, faults: s.Faults(), duration: s.Duration, mix: reg.Mix, clients: reg.Clients}
			rs, err := simRun(ctx, f, []sim.Job{{Lock: reg.Lock, Seed: reg.Seed}}, 1, false)
			if err != nil {
				errs[i] = fmt.Errorf("%s seed %d (%s, %v): %w", reg.Lock, reg.Seed, s.Faults(), s.Duration, err)
				return
			}
			out[i] = rs[0]
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
