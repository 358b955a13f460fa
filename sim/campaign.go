package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/jsonfile"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// The simulation's orchestration: a campaign of seeds (Campaign, Job),
// each run into one SeedResult (RunSeed), summed up per lock into sim.json
// (Totals, Summarize) and written as a run directory (WriteDir); and what a
// shrink must keep of a finding (Finding, ShrinkStep). `lockproof sim`
// spreads the jobs over worker processes and prints; the judging is
// package judge's.

// Campaign is what every seed of one `lockproof sim` run shares: the
// fault setting (Mix: "swarm", "none" or names), each run's length in
// virtual time, and the workload's mix and clients as lockproof run's
// flags give them ("" and 0: the simulation's defaults).
type Campaign struct {
	Faults   string
	Duration time.Duration
	Mix      string
	Clients  int
}

// Job is one seed of one lock, as a worker gets it.
type Job struct {
	Lock string `json:"lock"`
	Seed uint64 `json:"seed"`
}

// SeedResult is what a worker says of one job: the row (environment
// "sim"), the history's digest, and the history itself when the parent
// keeps it.
type SeedResult struct {
	Row     contract.Row    `json:"row"`
	SHA256  string          `json:"sha256"`
	History []byte          `json:"history,omitempty"`
	Check   json.RawMessage `json:"check,omitempty"` // check.json
}

// Interesting: a row the run directory keeps (with its history).
func Interesting(r contract.Row) bool {
	if !r.AsExpected || r.Error != "" {
		return true
	}
	for _, v := range r.Verdicts {
		if v == contract.Violated {
			return true
		}
	}
	return false
}

// RunSeed runs one job and makes its result.
func RunSeed(t *testing.T, reg *locker.Registry, c Campaign, wc workload.Config, faults []Fault, j Job) *SeedResult {
	start := time.Now()
	row := contract.Row{Lock: j.Lock, Fault: c.Faults, Seed: int64(j.Seed), Environment: contract.EnvSim,
		FaultName: Label(faults), History: path.Join(contract.ScenarioID(j.Lock, "sim", int64(j.Seed)), contract.HistoryFile)}
	r, err := Simulate(t, Scenario{Locks: reg, Lock: j.Lock, Seed: j.Seed, Duration: c.Duration, Faults: faults, Workload: wc})
	row.ElapsedMs = time.Since(start).Milliseconds()
	if err != nil {
		row.Error = err.Error()
		return &SeedResult{Row: row}
	}
	hist, digest, err := Encode(r.Ops)
	if err != nil {
		row.Error = err.Error()
		return &SeedResult{Row: row}
	}
	row.Ops = len(r.Ops)
	row.Verdicts = contract.Verdicts{}
	for _, p := range r.Check.Props {
		row.Verdicts[p.ID] = p.Verdict
	}
	judge.Record(&row, r.Expected)
	row.Mismatches, row.MismatchDetails, row.AsExpected = r.Mismatches, r.Details, r.AsExpected
	var ev []string
	for _, o := range r.Ops {
		if o.Kind == history.Fault && o.Evidence != "" {
			ev = append(ev, o.Evidence)
		}
	}
	row.FaultEvidence = strings.Join(ev, "; ")
	res := &SeedResult{Row: row, SHA256: digest}
	if Interesting(row) {
		// Only these reach the run directory: the others cost no pipe.
		res.History = hist
		if res.Check, err = json.Marshal(r.Check); err != nil {
			res.Row.Error = err.Error()
		}
	}
	return res
}

// Totals is sim.json: every seed of a campaign counted, per lock.
type Totals struct {
	Faults     string        `json:"faults"`
	DurationMs int64         `json:"duration_ms"`
	Mix        string        `json:"mix,omitempty"`
	Clients    int           `json:"clients,omitempty"`
	Runs       int           `json:"runs"`
	ElapsedMs  int64         `json:"elapsed_ms"`
	PerMinute  float64       `json:"runs_per_minute"`
	Locks      []*LockTotals `json:"locks"`
}

// LockTotals counts one lock's seeds.
type LockTotals struct {
	Lock       string `json:"lock"`
	Seeds      int    `json:"seeds"`
	AsExpected int    `json:"as_expected"`
	Unknown    int    `json:"unknown"`
	Failed     int    `json:"failed"`
	// Violated counts, per property, the seeds that broke it; First is
	// the first seed (in the order run) that did: seeds to first finding.
	Violated map[string]int    `json:"violated"`
	First    map[string]uint64 `json:"first"`
	// Missed lists the properties that one fault alone (--faults F)
	// predicts broken and no seed broke.
	Missed []string `json:"missed,omitempty"`
	// NotAsExpected are the seeds whose verdicts the predictions do not
	// allow, with why (the first 20).
	NotAsExpected []string `json:"not_as_expected,omitempty"`
}

// Line is the lock's line of `lockproof sim`'s output.
func (l *LockTotals) Line() string {
	var found []string
	for _, id := range contract.PropertyIDs() {
		if n := l.Violated[id]; n > 0 {
			found = append(found, fmt.Sprintf("%s on %d (first seed %d)", id, n, l.First[id]))
		}
	}
	s := fmt.Sprintf("%-12s %d seeds: %d as expected, %d not, %d unknown, %d failed", l.Lock, l.Seeds, l.AsExpected,
		l.Mismatched(), l.Unknown, l.Failed)
	if len(found) > 0 {
		s += "; violated: " + strings.Join(found, ", ")
	}
	if len(l.Missed) > 0 {
		s += "; MISSED (predicted broken, never broke): " + strings.Join(l.Missed, ", ")
	}
	for _, n := range l.NotAsExpected {
		s += "\n  " + n
	}
	return s
}

// Summarize counts the results of a campaign per lock, in locks' order.
func Summarize(c Campaign, locks []string, results []*SeedResult, elapsed time.Duration) *Totals {
	s := &Totals{Faults: c.Faults, DurationMs: c.Duration.Milliseconds(), Mix: c.Mix, Clients: c.Clients,
		Runs: len(results), ElapsedMs: elapsed.Milliseconds()}
	if elapsed > 0 {
		s.PerMinute = float64(len(results)) / elapsed.Minutes()
	}
	by := map[string]*LockTotals{}
	for _, l := range locks {
		by[l] = &LockTotals{Lock: l, Violated: map[string]int{}, First: map[string]uint64{}}
		s.Locks = append(s.Locks, by[l])
	}
	predicted := map[string]map[string]bool{} // lock -> properties a single fault predicts broken
	for _, r := range results {
		l := by[r.Row.Lock]
		l.Seeds++
		switch {
		case r.Row.Error != "":
			l.Failed++
			l.note(fmt.Sprintf("seed %d: failed: %s", r.Row.Seed, r.Row.Error))
			continue
		case !r.Row.Conclusive():
			l.Unknown++
			l.note(fmt.Sprintf("seed %d (%s): unknown verdicts", r.Row.Seed, r.Row.FaultName))
		case r.Row.AsExpected:
			l.AsExpected++
		default:
			l.note(fmt.Sprintf("seed %d (%s): %s", r.Row.Seed, r.Row.FaultName, strings.Join(r.Row.Mismatches, "; ")))
		}
		if predicted[l.Lock] == nil {
			predicted[l.Lock] = map[string]bool{}
		}
		for id, v := range r.Row.Expected {
			if v == contract.Violated {
				predicted[l.Lock][id] = true
			}
		}
		for id, v := range r.Row.Verdicts {
			if v != contract.Violated {
				continue
			}
			if l.Violated[id] == 0 {
				l.First[id] = uint64(r.Row.Seed)
			}
			l.Violated[id]++
		}
	}
	for _, l := range s.Locks {
		for id := range predicted[l.Lock] {
			if l.Violated[id] == 0 {
				l.Missed = append(l.Missed, id)
			}
		}
		slices.Sort(l.Missed)
	}
	return s
}

// Mismatched counts the seeds that were decided and failed or
// unknown neither, and broke a prediction.
func (l *LockTotals) Mismatched() int { return l.Seeds - l.AsExpected - l.Unknown - l.Failed }

// note keeps the first 20 seeds not as expected.
func (l *LockTotals) note(s string) {
	if len(l.NotAsExpected) < 20 {
		l.NotAsExpected = append(l.NotAsExpected, s)
	}
}

// Status is `lockproof sim`'s exit code: 1 for a seed not as expected or a predicted
// break never seen, 3 for an unknown verdict or a failed run.
func (s *Totals) Status() int {
	code := contract.ExitOK
	for _, l := range s.Locks {
		if l.Mismatched() > 0 || len(l.Missed) > 0 {
			return contract.ExitViolation
		}
		if l.Unknown+l.Failed > 0 {
			code = contract.ExitUnknown
		}
	}
	return code
}

// WriteDir writes a campaign's run directory: sim.json, the histories
// and check.json of the interesting seeds (Interesting), summary.json
// with their rows (environment "sim"), and regressions.jsonl.
func WriteDir(dir string, c Campaign, sum *Totals, results []*SeedResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rows []*contract.Row
	var regs []Regression
	first := map[string]bool{}
	for _, r := range results {
		if r.History == nil {
			continue
		}
		why := ""
		switch {
		case r.Row.Error != "":
			why = "failed"
		case !r.Row.Conclusive():
			why = "unknown"
		case !r.Row.AsExpected:
			why = "not as expected"
		}
		for _, id := range contract.PropertyIDs() {
			if r.Row.Verdicts[id] == contract.Violated && !first[r.Row.Lock+" "+id] {
				first[r.Row.Lock+" "+id] = true
				why = strings.TrimPrefix(why+", first violated "+id, ", ")
			}
		}
		p := filepath.Join(dir, filepath.FromSlash(r.Row.History))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, r.History, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(p), contract.CheckFile), r.Check, 0o644); err != nil {
			return err
		}
		rows = append(rows, &r.Row)
		if why != "" {
			// The seed's own mix, not "swarm": a swarm draws from the
			// catalogue, which grows, and the regression must replay.
			regs = append(regs, Regression{Lock: r.Row.Lock, Seed: uint64(r.Row.Seed), Faults: r.Row.FaultName,
				DurationMs: c.Duration.Milliseconds(), Mix: c.Mix, Clients: c.Clients, SHA256: r.SHA256, Why: why})
		}
	}
	var errs []error
	errs = append(errs, jsonfile.Write(filepath.Join(dir, contract.SimFile), sum))
	errs = append(errs, jsonfile.Write(filepath.Join(dir, contract.SummaryFile), &contract.Summary{Scenarios: rows}))
	var b bytes.Buffer
	for _, r := range regs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b.Write(append(line, '\n'))
	}
	errs = append(errs, os.WriteFile(filepath.Join(dir, contract.RegressionsFile), b.Bytes(), 0o644))
	return errors.Join(errs...)
}

// Finding is what a shrunk schedule must still show of its regression:
// the properties it broke (a "first violated P" line), or, for a seed
// not as expected, one of the same properties not as predicted.
type Finding struct {
	Violated   []string // each must be violated again
	Mismatched []string // one of them must be not as expected again
}

// FindingOf reads a regression's why. ok false: nothing to keep (an
// unknown or failed run): such a line is left as it is.
func FindingOf(why string) (Finding, bool) {
	var f Finding
	for _, part := range strings.Split(why, ",") {
		part = strings.TrimSpace(part)
		if p, ok := strings.CutPrefix(part, "first violated "); ok {
			f.Violated = append(f.Violated, strings.Fields(p)[0])
		}
	}
	if strings.Contains(why, "not as expected") {
		f.Mismatched = contract.PropertyIDs()
	}
	return f, len(f.Violated)+len(f.Mismatched) > 0
}

// Shows reports whether a run shows the finding.
func (f Finding) Shows(r contract.Row) bool {
	if r.Error != "" {
		return false
	}
	for _, p := range f.Violated {
		if r.Verdicts[p] != contract.Violated {
			return false
		}
	}
	if len(f.Mismatched) == 0 {
		return true
	}
	for _, m := range r.Mismatches {
		for _, p := range f.Mismatched {
			if strings.HasPrefix(m, p+" ") {
				return true
			}
		}
	}
	return false
}

// Narrowed is f held to the properties the baseline run of a seed not as
// expected missed (the why does not name them).
func (f Finding) Narrowed(base contract.Row) Finding {
	if len(f.Mismatched) == 0 {
		return f
	}
	var ps []string
	for _, m := range base.Mismatches {
		if p, _, ok := strings.Cut(m, " "); ok {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		f.Mismatched = ps
	}
	return f
}

// ShrinkStep is one schedule a shrink tries: a mix and a duration.
type ShrinkStep struct {
	Mix      []string
	Duration time.Duration
}

// Faults names the step's mix as a regression does ("none" when empty).
func (s ShrinkStep) Faults() string {
	if len(s.Mix) == 0 {
		return contract.FaultNone
	}
	return strings.Join(s.Mix, "+")
}
