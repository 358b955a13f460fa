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

// finding is what a shrunk schedule must still show of its regression:
// the properties it broke (a "first violated P" line), or, for a seed
// not as expected, one of the same properties not as predicted.
type finding struct {
	violated   []string // each must be violated again
	mismatched []string // one of them must be not as expected again
}

// findingOf reads a regression's why. ok false: nothing to keep (an
// unknown or failed run): such a line is left as it is.
func findingOf(why string) (finding, bool) {
	var f finding
	for _, part := range strings.Split(why, ",") {
		part = strings.TrimSpace(part)
		if p, ok := strings.CutPrefix(part, "first violated "); ok {
			f.violated = append(f.violated, strings.Fields(p)[0])
		}
	}
	if strings.Contains(why, "not as expected") {
		f.mismatched = contract.PropertyIDs()
	}
	return f, len(f.violated)+len(f.mismatched) > 0
}

// shows reports whether a run shows the finding.
func (f finding) shows(r contract.Row) bool {
	if r.Error != "" {
		return false
	}
	for _, p := range f.violated {
		if r.Verdicts[p] != contract.Violated {
			return false
		}
	}
	if len(f.mismatched) == 0 {
		return true
	}
	for _, m := range r.Mismatches {
		for _, p := range f.mismatched {
			if strings.HasPrefix(m, p+" ") {
				return true
			}
		}
	}
	return false
}

// narrowed is f held to the properties the baseline run of a seed not as
// expected missed (the why does not name them).
func (f finding) narrowed(base contract.Row) finding {
	if len(f.mismatched) == 0 {
		return f
	}
	var ps []string
	for _, m := range base.Mismatches {
		if p, _, ok := strings.Cut(m, " "); ok {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		f.mismatched = ps
	}
	return f
}

// shrinkStep is one schedule a shrink tries: a mix and a duration.
type shrinkStep struct {
	mix []string
	d   time.Duration
}

func (s shrinkStep) faults() string {
	if len(s.mix) == 0 {
		return contract.FaultNone
	}
	return strings.Join(s.mix, "+")
}

// simShrink reduces the schedule of each regression of file: it drops
// faults from the mix one at a time, then halves the run, for as long as
// the run still shows the regression's finding (findingOf), and writes
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
		f, ok := findingOf(reg.Why)
		start := shrinkStep{mix: strings.FieldsFunc(reg.Faults, func(r rune) bool { return r == '+' || r == ',' }),
			d: time.Duration(reg.DurationMs) * time.Millisecond}
		if reg.Faults == contract.FaultNone {
			start.mix = nil
		}
		if !ok || reg.Faults == "swarm" {
			fmt.Fprintf(stdout, "kept %s seed %d as it is (%s: nothing to shrink)\n", reg.Lock, reg.Seed, reg.Why)
			shrunk = append(shrunk, reg)
			continue
		}
		base, err := shrinkRuns(ctx, reg, []shrinkStep{start}, 1)
		if err != nil {
			fmt.Fprintf(stderr, "lockproof sim: %s:%d: %v\n", file, i+1, err)
			return exitBadInput
		}
		if !f.shows(base[0].Row) {
			fmt.Fprintf(stdout, "kept %s seed %d as it is: its run no longer shows %q\n", reg.Lock, reg.Seed, reg.Why)
			shrunk = append(shrunk, reg)
			continue
		}
		f = f.narrowed(base[0].Row)
		best, bestRow, bestSHA := start, base[0].Row, base[0].SHA256
		for {
			var cands []shrinkStep
			for j := range best.mix {
				cands = append(cands, shrinkStep{mix: slices.Delete(slices.Clone(best.mix), j, j+1), d: best.d})
			}
			if h := best.d / 2; h >= shrinkMinDuration {
				cands = append(cands, shrinkStep{mix: best.mix, d: h})
			}
			if len(cands) == 0 {
				break
			}
			rs, err := shrinkRuns(ctx, reg, cands, workers)
			if err != nil {
				fmt.Fprintf(stderr, "lockproof sim: %s:%d: %v\n", file, i+1, err)
				return exitBadInput
			}
			j := slices.IndexFunc(rs, func(r *simResult) bool { return f.shows(r.Row) })
			if j < 0 {
				break
			}
			best, bestRow, bestSHA = cands[j], rs[j].Row, rs[j].SHA256
		}
		why := reg.Why
		if best.faults() != start.faults() || best.d != start.d {
			why = fmt.Sprintf("%s; shrunk from %s, %v, %d ops", reg.Why, start.faults(), start.d, base[0].Row.Ops)
		}
		fmt.Fprintf(stdout, "shrunk %s seed %d (%s): %s, %v, %d ops -> %s, %v, %d ops\n", reg.Lock, reg.Seed, reg.Why,
			start.faults(), start.d, base[0].Row.Ops, best.faults(), best.d, bestRow.Ops)
		shrunk = append(shrunk, sim.Regression{Lock: reg.Lock, Seed: reg.Seed, Faults: best.faults(),
			DurationMs: best.d.Milliseconds(), Mix: reg.Mix, Clients: reg.Clients, SHA256: bestSHA, Why: why})
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
func shrinkRuns(ctx context.Context, reg sim.Regression, steps []shrinkStep, workers int) ([]*simResult, error) {
	out := make([]*simResult, len(steps))
	errs := make([]error, len(steps))
	sem := make(chan struct{}, max(workers, 1))
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f := simFlags{locks: reg.Lock, faults: s.faults(), duration: s.d, mix: reg.Mix, clients: reg.Clients}
			rs, err := simRun(ctx, f, []simJob{{Lock: reg.Lock, Seed: reg.Seed}}, 1, false)
			if err != nil {
				errs[i] = fmt.Errorf("%s seed %d (%s, %v): %w", reg.Lock, reg.Seed, s.faults(), s.d, err)
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
