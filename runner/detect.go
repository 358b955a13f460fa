package runner

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
)

// DetectConfig is a detection-speed measurement: each specimen's decisive
// scenario (DecisiveScenarios) run over Seeds.
type DetectConfig struct {
	// Config runs the scenarios (Seeds default to 1-20; Locks and Faults
	// are ignored, Specs replaced).
	Config
	// Locks to measure; default every lock with a weakness (all but fenced).
	Locks []string
	// Target is the fault time within which a violation must be found; a
	// later one counts as a miss. Default 10s.
	Target time.Duration
}

// DetectRow is the detection speed of one specimen.
type DetectRow struct {
	Lock, Fault, Property string
	// Point is the decisive scenario's fault point.
	Point contract.Point
	// Seeds run; Found: seeds that showed the violation; Misses: seeds that
	// did not, or only after Target; Unknown: seeds whose verdict is unknown.
	Seeds, Found, Misses, Unknown int
	// Median and Max of the detection times of the seeds that found it.
	Median, Max time.Duration
	// Times are the detection times, per seed in order (-1: not found).
	Times []time.Duration
	// Target is the DetectConfig's.
	Target time.Duration
}

// MeetsTarget reports whether the specimen was found within the target on
// at least 19 of 20 seeds (95% of the seeds run, rounded up).
func (r DetectRow) MeetsTarget() bool {
	need := (r.Seeds*19 + 19) / 20
	return r.Seeds > 0 && r.Seeds-r.Misses-r.Unknown >= need
}

// Detect runs each specimen's decisive scenario over the seeds and measures
// the fault time until its first violation (contract.Row.DetectMs). It returns
// one row per lock, in Locks order, and the run's summary (Config.Out holds
// the run directory).
func Detect(ctx context.Context, dc DetectConfig) ([]DetectRow, *contract.Summary, error) {
	if dc.Target <= 0 {
		dc.Target = 10 * time.Second
	}
	if len(dc.Seeds) == 0 {
		for s := uint64(1); s <= 20; s++ {
			dc.Seeds = append(dc.Seeds, s)
		}
	}
	if dc.Registry == nil {
		return nil, nil, fmt.Errorf("%w: Registry is required (zoo.Builtin() holds the built-in locks)", ErrBadConfig)
	}
	var plan []judge.Decisive
	for _, d := range judge.DecisiveOf(dc.Registry) {
		if e, _ := dc.Registry.Lookup(d.Lock); judge.Predict(e, d.Fault).Want(d.Property) != contract.WantViolated {
			continue // its decisive property must hold (the fenced lock's): nothing to detect
		}
		if len(dc.Locks) == 0 || slices.Contains(dc.Locks, d.Lock) {
			plan = append(plan, d)
		}
	}
	if len(plan) == 0 {
		return nil, nil, fmt.Errorf("%w: detect: no broken lock among %v", ErrBadConfig, dc.Locks)
	}
	cfg := dc.Config
	cfg.Specs = nil
	for _, d := range plan {
		for _, s := range dc.Seeds {
			cfg.Specs = append(cfg.Specs, Spec{Lock: d.Lock, Fault: d.Fault, Seed: s, Point: d.Point})
		}
	}
	sum, err := Run(ctx, cfg)
	if err != nil {
		return nil, sum, err
	}
	byID := map[string]*contract.Row{}
	for _, s := range sum.Scenarios {
		byID[s.ID()] = s
	}
	var rows []DetectRow
	for _, d := range plan {
		row := DetectRow{Lock: d.Lock, Fault: d.Fault, Property: d.Property, Point: d.Point, Target: dc.Target}
		var found []time.Duration
		for _, seed := range dc.Seeds {
			row.Seeds++
			s := byID[Spec{Lock: d.Lock, Fault: d.Fault, Seed: seed}.ID()]
			t := time.Duration(-1)
			switch {
			case s == nil || s.Verdict(d.Property) == contract.Unknown:
				row.Unknown++
			case s.Verdict(d.Property) == contract.Violated:
				if ms, ok := s.DetectMs[d.Property]; ok {
					t = time.Duration(ms) * time.Millisecond
					found = append(found, t)
					row.Found++
					if t > dc.Target {
						row.Misses++
					}
				} else {
					row.Misses++ // violated, but with no fault window to time it from
				}
			default:
				row.Misses++
			}
			row.Times = append(row.Times, t)
		}
		if len(found) > 0 {
			row.Median, _ = contract.Median(found) // sorts found
			row.Max = found[len(found)-1]
		}
		rows = append(rows, row)
	}
	return rows, sum, nil
}

// WriteDetectMarkdown writes rows as a Markdown table.
func WriteDetectMarkdown(w io.Writer, rows []DetectRow, target time.Duration) {
	fmt.Fprintf(w, "| lock | fault | property | seeds | found | median | max | misses (not found or > %v) | unknown | target met |\n", target)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fault := r.Fault
		if !r.Point.IsZero() {
			fault += " (" + r.Point.String() + ")"
		}
		med, mx := "-", "-"
		if r.Found > 0 {
			med, mx = fmtDur(r.Median), fmtDur(r.Max)
		}
		met := "yes"
		if !r.MeetsTarget() {
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %s | %s | %d | %d | %s |\n",
			r.Lock, fault, r.Property, r.Seeds, r.Found, med, mx, r.Misses, r.Unknown, met)
	}
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
