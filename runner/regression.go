package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
)

// Regression is a violation found once, saved as a named scenario
// (<dir>/<name>.json) to be replayed: the same lock, fault, fault point,
// seed (which fixes the workload's randomness and the fault's schedule:
// its warm-up, its victims), durations and shape, and the property that
// broke. Replaying asserts that the property breaks again.
type Regression struct {
	Name  string `json:"name"`
	Lock  string `json:"lock"`
	Fault string `json:"fault"`
	Seed  uint64 `json:"seed"`
	// SpecRecord is the fault point, durations and shape to replay.
	contract.SpecRecord
	// Property is the property that broke: lease, resource or liveness.
	Property string `json:"property"`
	// Rule and Explanation describe the first violation found (informative).
	Rule        string `json:"rule,omitempty"`
	Explanation string `json:"explanation,omitempty"`
	// FaultName, FaultStartMs and DetectMs describe the schedule seen when
	// it was found (informative: the seed fixes it up to real timing).
	FaultName    string `json:"fault_name,omitempty"`
	FaultStartMs int64  `json:"fault_start_ms,omitempty"`
	DetectMs     int64  `json:"detect_ms,omitempty"`
	// Found is when it was found (RFC 3339).
	Found string `json:"found,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// CheckRegressionName checks a regression name: lower-case letters, digits,
// '.', '_' and '-', at most 100 characters, not starting with a punctuation mark.
func CheckRegressionName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: regression name %q: want lower-case letters, digits, '.', '_', '-' (e.g. set-del-pause)", ErrBadConfig, name)
	}
	return nil
}

// Spec is the scenario the regression replays.
func (r Regression) Spec() Spec {
	return specOf(r.SpecRecord, r.Lock, r.Fault, r.Seed)
}

func (r Regression) validate() error {
	if err := CheckRegressionName(r.Name); err != nil {
		return err
	}
	var missing []string
	if r.Lock == "" {
		missing = append(missing, "lock")
	}
	if r.Fault == "" {
		missing = append(missing, "fault")
	}
	if r.DurationMs <= 0 {
		missing = append(missing, "duration_ms (> 0)")
	}
	if r.TTLMs <= 0 {
		missing = append(missing, "ttl_ms (> 0)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: regression %q: missing %s", ErrBadConfig, r.Name, strings.Join(missing, ", "))
	}
	if !slices.Contains(contract.PropertyIDs(), r.Property) {
		return fmt.Errorf("%w: regression %q: property %q: want one of %v", ErrBadConfig, r.Name, r.Property, contract.PropertyIDs())
	}
	if r.Clients < 0 || r.HoldMs < 0 || r.ThinkMs < 0 || r.OpTimeoutMs < 0 {
		return fmt.Errorf("%w: regression %q: clients, hold_ms, think_ms and op_timeout_ms must be >= 0", ErrBadConfig, r.Name)
	}
	return nil
}

// regressionsFrom makes one regression per scenario of sum that broke
// something, named name (or name-<scenario> when there are several). Its
// property is the first violated one (lease, resource, liveness) that the
// lock's prediction says must break, else the first violated one.
func regressionsFrom(name string, sum *contract.Summary) ([]Regression, error) {
	if err := CheckRegressionName(name); err != nil {
		return nil, err
	}
	var out []Regression
	for _, s := range sum.Scenarios {
		prop := ""
		for _, p := range contract.PropertyIDs() {
			if s.Verdict(p) != contract.Violated {
				continue
			}
			if prop == "" || (s.Expected[p] == contract.Violated && s.Expected[prop] != contract.Violated) {
				prop = p
			}
		}
		if prop == "" {
			continue
		}
		r := Regression{Lock: s.Lock, Fault: s.Fault, Seed: uint64(s.Seed), SpecRecord: s.SpecRecord, Property: prop, FaultName: s.FaultName,
			DetectMs: s.DetectMs[prop], Found: time.Now().UTC().Format(time.RFC3339)}
		if s.FaultStartMs != nil {
			r.FaultStartMs = *s.FaultStartMs
		}
		if r.TTLMs == 0 {
			r.TTLMs = DefaultTTL.Milliseconds()
		}
		out = append(out, r)
	}
	for i := range out {
		out[i].Name = name
		if len(out) > 1 {
			out[i].Name = fmt.Sprintf("%s-%s", name, out[i].Spec().ID())
		}
	}
	return out, nil
}

// SaveRegressions saves the violations of sum, the summary of run directory
// runDir, as regressions in dir (see regressionsFrom), each with its first
// violation's rule and explanation from the scenario's check.json. It
// returns the files written.
func SaveRegressions(dir, runDir, name string, sum *contract.Summary) ([]string, error) {
	regs, err := regressionsFrom(name, sum)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, r := range regs {
		describeFirst(&r, filepath.Join(runDir, r.Spec().ID(), contract.CheckFile))
		p, err := saveRegression(dir, r)
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// describeFirst fills r's Rule and Explanation from a check.json, if readable.
func describeFirst(r *Regression, checkPath string) {
	b, err := os.ReadFile(checkPath)
	if err != nil {
		return
	}
	var res checker.Result
	if json.Unmarshal(b, &res) != nil {
		return
	}
	if pr := res.Of(r.Property); pr != nil && len(pr.Violations) > 0 {
		r.Rule, r.Explanation = pr.Violations[0].Rule, pr.Violations[0].Explanation
	}
}

// saveRegression writes r as dir/<name>.json (dir is created).
func saveRegression(dir string, r Regression) (string, error) {
	if err := r.validate(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("save regression %s: %w", r.Name, err)
	}
	p := filepath.Join(dir, r.Name+".json")
	if err := writeJSON(p, r); err != nil {
		return "", fmt.Errorf("save regression %s: %w", r.Name, err)
	}
	return p, nil
}

// LoadRegression reads dir/<name>.json.
func LoadRegression(dir, name string) (Regression, error) {
	if err := CheckRegressionName(name); err != nil {
		return Regression{}, err
	}
	return readRegression(filepath.Join(dir, name+".json"))
}

func readRegression(p string) (Regression, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return Regression{}, fmt.Errorf("read regression: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Regression
	if err := dec.Decode(&r); err != nil {
		return Regression{}, fmt.Errorf("%w: %s: %v", ErrBadConfig, p, err)
	}
	if err := r.validate(); err != nil {
		return Regression{}, fmt.Errorf("%s: %w", p, err)
	}
	if want := strings.TrimSuffix(filepath.Base(p), ".json"); r.Name != want {
		return Regression{}, fmt.Errorf("%w: %s: name %q does not match the file name", ErrBadConfig, p, r.Name)
	}
	return r, nil
}

// LoadRegressions reads every *.json regression in dir, sorted by name. A
// missing dir has none.
func LoadRegressions(dir string) ([]Regression, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read regressions: %w", err)
	}
	var out []Regression
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := readRegression(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ReplayAttempts is how many times Replay runs a regression's scenario
// before it calls the regression not reproduced. A saved violation is a
// timing window that a replay of the same seed hits almost always, not
// always (a loaded machine stretches the ops around it); the nightly
// judges a must-violate cell by "found in at least one seed" for the same
// reason. A property that holds in every attempt is a real regression.
const ReplayAttempts = 3

// ReplayResult is the outcome of replaying one regression.
type ReplayResult struct {
	Regression Regression
	// Scenario is the last attempt's row.
	Scenario *contract.Row
	// Verdict is the regression's property's verdict in the last attempt.
	Verdict contract.Verdict
	// Reproduced: the property broke again. Unknown: it could not be decided.
	Reproduced, Unknown bool
	// Attempts is how many replays ran (at most ReplayAttempts): the
	// first that reproduced it, or all of them.
	Attempts int
}

// Replay runs every regression (cfg's Specs, Locks, Faults and Seeds are
// replaced by the regressions' scenarios; two regressions of one scenario
// share its run) and reports which broke their property again. A
// regression not reproduced is replayed again, up to ReplayAttempts runs
// in all; attempt n > 1 runs in cfg.Out/attempt-n.
func Replay(ctx context.Context, cfg Config, regs []Regression) ([]ReplayResult, error) {
	for _, r := range regs {
		if err := r.validate(); err != nil {
			return nil, err
		}
	}
	out := make([]ReplayResult, len(regs))
	pending := make([]int, len(regs))
	for i := range regs {
		pending[i] = i
	}
	base := cfg.Out
	for attempt := 1; attempt <= ReplayAttempts && len(pending) > 0; attempt++ {
		if attempt > 1 {
			cfg.Out = filepath.Join(base, fmt.Sprintf("attempt-%d", attempt))
		}
		cfg.Specs = nil
		seen := map[string]bool{}
		for _, i := range pending {
			if s := regs[i].Spec(); !seen[s.ID()] {
				seen[s.ID()] = true
				cfg.Specs = append(cfg.Specs, s)
			}
		}
		sum, err := Run(ctx, cfg)
		if err != nil {
			return nil, err
		}
		byID := map[string]*contract.Row{}
		for _, s := range sum.Scenarios {
			byID[s.ID()] = s
		}
		var again []int
		for _, i := range pending {
			r := regs[i]
			s := byID[r.Spec().ID()]
			rr := ReplayResult{Regression: r, Scenario: s, Verdict: contract.Unknown, Attempts: attempt}
			if s != nil {
				rr.Verdict = s.Verdict(r.Property)
			}
			rr.Reproduced = rr.Verdict == contract.Violated
			rr.Unknown = rr.Verdict == contract.Unknown
			out[i] = rr
			if !rr.Reproduced && ctx.Err() == nil {
				again = append(again, i)
			}
		}
		pending = again
	}
	return out, nil
}
