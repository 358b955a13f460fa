package reports

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockproof/lockproof/checker"
)

// Status is the verdict of a whole report.
type Status string

// Report statuses.
const (
	// Pass: every scenario gave its expected verdicts and none is unknown.
	Pass Status = "pass"
	// Fail: some verdict is not what was expected.
	Fail Status = "fail"
	// Inconclusive: nothing unexpected, but some verdict is unknown or some
	// scenario's files are broken: the run shows nothing safe.
	Inconclusive Status = "inconclusive"
)

// Outcome is how one property's verdict compares to its expectation.
type Outcome string

// Outcomes of a property.
const (
	AsExpected Outcome = "as-expected"
	Unexpected Outcome = "unexpected"
	Undecided  Outcome = "unknown" // the verdict is unknown: never a pass
	NoExpected Outcome = "no-expectation"
)

// Report is the rendered view of a run; its JSON form is report.json.
type Report struct {
	Status   Status `json:"status"`
	Headline string `json:"headline"`
	Counts   Counts `json:"counts"`
	// Locks and Faults order the matrix's rows and columns.
	Locks     []string          `json:"locks"`
	Faults    []string          `json:"faults"`
	Scenarios []*ScenarioReport `json:"scenarios"`
}

// Counts sum a report up.
type Counts struct {
	Scenarios  int `json:"scenarios"`
	Unexpected int `json:"unexpected"` // property verdicts not as expected
	Unknown    int `json:"unknown"`    // property verdicts unknown
	Problems   int `json:"problems"`   // scenarios failed or with broken files
	NotRun     int `json:"not_run"`    // scenarios an interruption kept from running
}

// ScenarioReport is one scenario in a report.
type ScenarioReport struct {
	ID            string            `json:"id"`
	Lock          string            `json:"lock"`
	Fault         string            `json:"fault"`
	Seed          int64             `json:"seed"`
	Ops           int               `json:"ops"`
	Rejected      int               `json:"rejected"`
	History       string            `json:"history"`
	Check         string            `json:"check"`
	Visualization string            `json:"visualization,omitempty"`
	Properties    []PropertyOutcome `json:"properties"`
	Problems      []string          `json:"problems,omitempty"`
	Status        Status            `json:"status"`
	// ElapsedMs is the scenario's wall time; NotRun: an interruption kept
	// it from running.
	ElapsedMs int64           `json:"elapsed_ms,omitempty"`
	NotRun    bool            `json:"not_run,omitempty"`
	Plot      *Plot           `json:"-"`
	Result    *checker.Result `json:"-"`
	byName    map[string]*PropertyOutcome
}

// PropertyOutcome is one property of a scenario: its verdict, what was
// expected, and the evidence.
type PropertyOutcome struct {
	Property   string          `json:"property"` // lease, resource, liveness
	Verdict    checker.Verdict `json:"verdict"`
	Expected   checker.Verdict `json:"expected,omitempty"`
	Outcome    Outcome         `json:"outcome"`
	Violations int             `json:"violations,omitempty"`
	// Evidence: the first violation (rule, key, lines, explanation), why it
	// is unknown, or what a missed expected violation means.
	Evidence string `json:"evidence,omitempty"`
}

// propertyNames are the properties of a report, in matrix order.
func propertyNames() []string { return []string{"lease", "resource", "liveness"} }

// compare says how verdict v compares to expectation e. Only the line
// between violated and not-violated matters: n/a meets an expected ok.
func compare(v, e checker.Verdict) Outcome {
	switch {
	case v == checker.Unknown:
		return Undecided
	case e == "":
		return NoExpected
	case (v == checker.Violated) == (e == checker.Violated):
		return AsExpected
	}
	return Unexpected
}

// Build turns a loaded run into a report.
func Build(run *Run) *Report {
	r := &Report{}
	locks, faults := map[string]bool{}, map[string]bool{}
	for _, sc := range run.Scenarios {
		sr := buildScenario(sc)
		r.Scenarios = append(r.Scenarios, sr)
		locks[sc.Lock], faults[sc.Fault] = true, true
		r.Counts.Scenarios++
		if sc.NotRun {
			r.Counts.NotRun++
			continue
		}
		if len(sr.Problems) > 0 {
			r.Counts.Problems++
		}
		for _, p := range sr.Properties {
			switch p.Outcome {
			case Unexpected:
				r.Counts.Unexpected++
			case Undecided:
				r.Counts.Unknown++
			}
		}
	}
	r.Locks = ordered(locks, knownLocks())
	r.Faults = ordered(faults, knownFaults())
	sort.SliceStable(r.Scenarios, func(i, j int) bool {
		a, b := r.Scenarios[i], r.Scenarios[j]
		if a.Lock != b.Lock {
			return slices.Index(r.Locks, a.Lock) < slices.Index(r.Locks, b.Lock)
		}
		if a.Fault != b.Fault {
			return slices.Index(r.Faults, a.Fault) < slices.Index(r.Faults, b.Fault)
		}
		return a.Seed < b.Seed
	})
	switch {
	case r.Counts.Unexpected > 0:
		r.Status = Fail
		r.Headline = fmt.Sprintf("%d verdicts not as expected in %d scenarios", r.Counts.Unexpected, r.Counts.Scenarios)
		if r.Counts.Unknown > 0 {
			r.Headline += fmt.Sprintf("; %d unknown", r.Counts.Unknown)
		}
		if r.Counts.NotRun > 0 {
			r.Headline += fmt.Sprintf("; interrupted after %d of %d scenarios", r.Counts.Scenarios-r.Counts.NotRun, r.Counts.Scenarios)
		}
	case r.Counts.NotRun > 0:
		r.Status = Inconclusive
		r.Headline = fmt.Sprintf("interrupted after %d of %d scenarios (%d verdicts unknown among them); this run does not show the locks safe",
			r.Counts.Scenarios-r.Counts.NotRun, r.Counts.Scenarios, r.Counts.Unknown)
	case r.Counts.Unknown > 0 || r.Counts.Problems > 0:
		r.Status = Inconclusive
		r.Headline = fmt.Sprintf("inconclusive: %d verdicts unknown and %d scenarios failed or with broken files in %d scenarios; this run does not show the locks safe",
			r.Counts.Unknown, r.Counts.Problems, r.Counts.Scenarios)
	case r.Counts.Scenarios == 0:
		r.Status = Inconclusive
		r.Headline = "inconclusive: the run has no scenarios"
	default:
		r.Status = Pass
		r.Headline = fmt.Sprintf("all %d scenarios gave the expected verdicts", r.Counts.Scenarios)
	}
	return r
}

func buildScenario(sc *Scenario) *ScenarioReport {
	sr := &ScenarioReport{
		ID: sc.ID, Lock: sc.Lock, Fault: sc.Fault, Seed: sc.Seed, Ops: sc.Ops, Rejected: sc.Rejected,
		History: sc.History, Check: sc.CheckPath, Visualization: sc.Visualization,
		Problems: sc.Problems, Plot: sc.Plot, Result: sc.Check, byName: map[string]*PropertyOutcome{},
		ElapsedMs: sc.ElapsedMs, NotRun: sc.NotRun,
	}
	verdicts := []checker.Verdict{sc.Lease, sc.Resource, sc.Liveness}
	expected := []checker.Verdict{sc.Expected.Lease, sc.Expected.Resource, sc.Expected.Liveness}
	var results []*checker.PropertyResult
	if sc.Check != nil {
		results = sc.Check.Properties()
	}
	sr.Status = Pass
	for i, name := range propertyNames() {
		po := PropertyOutcome{Property: name, Verdict: verdicts[i], Expected: expected[i]}
		po.Outcome = compare(po.Verdict, po.Expected)
		if results != nil {
			pr := results[i]
			po.Violations = pr.ViolationCount
			po.Evidence = evidence(pr)
		}
		if po.Outcome == Unexpected && po.Verdict != checker.Violated {
			po.Evidence = "no violation found: the harness did not catch what this lock is known to break"
		}
		switch po.Outcome {
		case Unexpected:
			sr.Status = Fail
		case Undecided:
			if sr.Status == Pass {
				sr.Status = Inconclusive
			}
		}
		sr.Properties = append(sr.Properties, po)
	}
	for i := range sr.Properties {
		sr.byName[sr.Properties[i].Property] = &sr.Properties[i]
	}
	if len(sr.Problems) > 0 && sr.Status == Pass {
		sr.Status = Inconclusive
	}
	return sr
}

func evidence(pr *checker.PropertyResult) string {
	switch pr.Verdict {
	case checker.Violated:
		if len(pr.Violations) > 0 {
			v := pr.Violations[0]
			s := fmt.Sprintf("%s on key %q, history lines %s: %s", v.Rule, v.Key, joinLines(v.Lines), v.Explanation)
			if pr.ViolationCount > 1 {
				s += fmt.Sprintf(" (%d violations in all)", pr.ViolationCount)
			}
			return s
		}
		return pr.Explanation
	case checker.Unknown:
		if len(pr.Undecided) > 0 {
			return fmt.Sprintf("key %q undecided: %s", pr.Undecided[0].Key, pr.Undecided[0].Reason)
		}
		return pr.Explanation
	}
	return ""
}

func joinLines(ls []int) string {
	s := ""
	for i, l := range ls {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(l)
	}
	return s
}

// Property returns the scenario's outcome for property name (lease,
// resource, liveness), or nil.
func (s *ScenarioReport) Property(name string) *PropertyOutcome {
	if s.byName == nil {
		return nil
	}
	return s.byName[name]
}

// knownLocks and knownFaults are the names of the contract, in the order
// the matrix shows them.
func knownLocks() []string {
	return []string{"setnx", "setnx-expire", "set-del", "get-del", "getset", "lua", "watchdog", "reentrant", "redlock", "fenced"}
}

func knownFaults() []string {
	return []string{"none", "latency", "partition", "pause-client", "pause-server", "failover", "crash-client", "clock-skew"}
}

// ordered lists the names of set: known ones in their order, then the rest sorted.
func ordered(set map[string]bool, known []string) []string {
	var out, rest []string
	for _, k := range known {
		if set[k] {
			out = append(out, k)
		}
	}
	for k := range set {
		if !slices.Contains(known, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Cell returns the scenarios of one lock under one fault (one per seed).
func (r *Report) Cell(lock, fault string) []*ScenarioReport {
	var out []*ScenarioReport
	for _, s := range r.Scenarios {
		if s.Lock == lock && s.Fault == fault {
			out = append(out, s)
		}
	}
	return out
}

// worst is the most severe verdict of a property over a cell's scenarios:
// violated, then unknown, then ok, then n/a.
func worst(ss []*ScenarioReport, prop string) checker.Verdict {
	rank := map[checker.Verdict]int{checker.NA: 0, checker.OK: 1, checker.Unknown: 2, checker.Violated: 3}
	var v checker.Verdict = checker.NA
	for _, s := range ss {
		if p := s.Property(prop); p != nil && rank[p.Verdict] > rank[v] {
			v = p.Verdict
		}
	}
	return v
}

// cellStatus is the worst scenario status in a cell.
func cellStatus(ss []*ScenarioReport) Status {
	st := Pass
	for _, s := range ss {
		switch s.Status {
		case Fail:
			return Fail
		case Inconclusive:
			st = Inconclusive
		}
	}
	return st
}
