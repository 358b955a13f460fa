package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
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
	// Cells sum each lock × fault up over its seeds, in matrix order.
	Cells []*CellReport `json:"cells"`
	// Started is when the first scenario started (RFC 3339), if recorded.
	Started string `json:"started,omitempty"`
	// Topology is the deployment the run ran on when it is not the
	// Sentinel topology (contract.TopologyCluster); absent otherwise.
	Topology string `json:"topology,omitempty"`
}

// Counts sum a report up.
type Counts struct {
	Scenarios  int `json:"scenarios"`
	Unexpected int `json:"unexpected"` // property verdicts not as expected
	Unknown    int `json:"unknown"`    // property verdicts unknown
	Problems   int `json:"problems"`   // scenarios failed or with broken files
	NotRun     int `json:"not_run"`    // scenarios an interruption kept from running
	// Regressions counts the cells whose detection rate fell too far below
	// the promised one to be chance (CellReport.Regressions).
	Regressions int `json:"regressions"`
	// TraceValidated counts the scenarios whose history TLC validated
	// against the TLA+ model (accepted or rejected); TraceRejected the
	// rejected ones, which fail the run like a verdict not as expected.
	TraceValidated int `json:"trace_validated,omitempty"`
	TraceRejected  int `json:"trace_rejected,omitempty"`
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
	ElapsedMs int64 `json:"elapsed_ms,omitempty"`
	NotRun    bool  `json:"not_run,omitempty"`
	// Started is when the scenario started (RFC 3339); FaultName and
	// FaultStartMs the fault window it opened and when.
	Started       string `json:"started,omitempty"`
	FaultName     string `json:"fault_name,omitempty"`
	FaultEvidence string `json:"fault_evidence,omitempty"`
	FaultStartMs  *int64 `json:"fault_start_ms,omitempty"`
	// Trace, TraceLine and TraceError: the TLA+ trace validation of the
	// history (contract.Row Trace); Trace is "" when not validated.
	Trace      string `json:"trace,omitempty"`
	TraceLine  int    `json:"trace_line,omitempty"`
	TraceError string `json:"trace_error,omitempty"`
	// Page is the scenario's own HTML page, relative to the run directory.
	Page   string          `json:"page,omitempty"`
	Plot   *Plot           `json:"-"`
	Result *checker.Result `json:"-"`
	byName map[string]*PropertyOutcome
	// failed: the scenario or its fault failed (or it did not run): its
	// verdicts prove nothing of the fault, and a cell's tallies count it as
	// unknown, as summary.json's cells leave it out of their seeds.
	failed bool
}

// TraceAccepted, TraceRejected and TraceNoVerdict say how the scenario's
// trace validation came out (all false: not validated).
func (s *ScenarioReport) TraceAccepted() bool  { return s.Trace == contract.TraceAccepted }
func (s *ScenarioReport) TraceRejected() bool  { return s.Trace == contract.TraceRejected }
func (s *ScenarioReport) TraceNoVerdict() bool { return s.Trace == contract.TraceError }

// PropertyOutcome is one property of a scenario: its verdict, what was
// expected, and the evidence.
type PropertyOutcome struct {
	Property string           `json:"property"` // lease, resource, liveness
	Verdict  contract.Verdict `json:"verdict"`
	Expected contract.Verdict `json:"expected,omitempty"`
	// Want is the prediction in words: ok, violated, may (breaks on some
	// seeds) or "" (none recorded).
	Want    contract.Want `json:"want,omitempty"`
	Outcome Outcome       `json:"outcome"`
	// FoundElsewhere: predicted to break, missed on this seed and found on
	// another seed of its cell, which makes this seed as expected.
	FoundElsewhere bool `json:"found_elsewhere,omitempty"`
	Violations     int  `json:"violations,omitempty"`
	// Lines are the history lines of the first violation; DetectMs the time
	// from the fault to it.
	Lines    []int  `json:"lines,omitempty"`
	DetectMs *int64 `json:"detect_ms,omitempty"`
	// Evidence: the first violation (rule, key, lines, explanation), why it
	// is unknown, or what a missed expected violation means.
	Evidence string `json:"evidence,omitempty"`
}

// propertyNames are the properties of a report, in matrix order.
func propertyNames() []string { return contract.PropertyIDs() }

// compare says how verdict v compares to prediction want. Only the line
// between violated and not-violated matters: n/a meets an expected ok. A
// predicted break missed on this seed but found on another seed of its
// cell (foundElsewhere) is as expected.
func compare(v contract.Verdict, want contract.Want, foundElsewhere bool) Outcome {
	switch {
	case v == contract.NotChecked:
		return NoExpected // the property is newer than the row: nothing to compare
	case v == contract.Unknown:
		return Undecided
	case want == contract.WantMay:
		return AsExpected
	case want == contract.WantOK || want == contract.WantViolated:
		if (v == contract.Violated) == (want == contract.WantViolated) || want == contract.WantViolated && foundElsewhere {
			return AsExpected
		}
		return Unexpected
	}
	return NoExpected
}

// Build turns a loaded run into a report.
func Build(run *Run) *Report {
	r := &Report{}
	if t := contract.TopologyOf(run.Topology); t != contract.TopologySentinel {
		r.Topology = t
	}
	for _, sc := range run.Scenarios {
		if sc.Started != "" && (r.Started == "" || sc.Started < r.Started) {
			r.Started = sc.Started
		}
	}
	for _, sc := range run.Scenarios {
		sr := buildScenario(sc)
		r.Scenarios = append(r.Scenarios, sr)
		// The run's rows come in its plan's order (locks, then faults):
		// the first appearance orders the matrix, with no list of names
		// to keep in step with the registry.
		if !slices.Contains(r.Locks, sc.Lock) {
			r.Locks = append(r.Locks, sc.Lock)
		}
		if !slices.Contains(r.Faults, sc.Fault) {
			r.Faults = append(r.Faults, sc.Fault)
		}
		r.Counts.Scenarios++
		if sc.NotRun {
			r.Counts.NotRun++
			continue
		}
		if len(sr.Problems) > 0 {
			r.Counts.Problems++
		}
		switch sc.Trace {
		case contract.TraceAccepted:
			r.Counts.TraceValidated++
		case contract.TraceRejected:
			r.Counts.TraceValidated++
			r.Counts.TraceRejected++
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
	r.Cells = buildCells(r, run.Cells)
	for _, c := range r.Cells {
		if len(c.Regressions) > 0 {
			r.Counts.Regressions++
		}
	}
	switch {
	case r.Counts.Unexpected > 0 || r.Counts.Regressions > 0 || r.Counts.TraceRejected > 0:
		r.Status = Fail
		var parts []string
		if r.Counts.Unexpected > 0 {
			parts = append(parts, fmt.Sprintf("%d verdicts not as expected", r.Counts.Unexpected))
		}
		if r.Counts.TraceRejected > 0 {
			parts = append(parts, fmt.Sprintf("%d traces rejected by the TLA+ model", r.Counts.TraceRejected))
		}
		if r.Counts.Regressions > 0 {
			parts = append(parts, fmt.Sprintf("%d cells detect a predicted break too rarely (regression)", r.Counts.Regressions))
		}
		r.Headline = strings.Join(parts, " and ") + fmt.Sprintf(" in %d scenarios", r.Counts.Scenarios)
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

func buildScenario(sc *LoadedScenario) *ScenarioReport {
	sr := &ScenarioReport{
		ID: sc.ID, Lock: sc.Lock, Fault: sc.Fault, Seed: sc.Seed, Ops: sc.Ops, Rejected: sc.Rejected,
		History: sc.History, Check: sc.CheckPath, Visualization: sc.Visualization,
		Problems: sc.Problems, Plot: sc.Plot, Result: sc.Check, byName: map[string]*PropertyOutcome{},
		ElapsedMs: sc.ElapsedMs, NotRun: sc.NotRun, Started: sc.Started, FaultName: sc.FaultName, FaultEvidence: sc.FaultEvidence,
		FaultStartMs: sc.FaultStartMs, Page: sc.Page,
		Trace: sc.Trace, TraceLine: sc.TraceLine, TraceError: sc.TraceError,
		failed: sc.Error != "" || sc.FaultError != "" || sc.NotRun,
	}
	sr.Status = Pass
	for _, name := range propertyNames() {
		po := PropertyOutcome{Property: name, Verdict: sc.Verdicts[name], Expected: sc.Expected[name],
			Want:           contract.WantOf(sc.Expected[name], slices.Contains(sc.MayViolate, name)),
			FoundElsewhere: slices.Contains(sc.FoundElsewhere, name)}
		po.Outcome = compare(po.Verdict, po.Want, po.FoundElsewhere)
		if d, ok := sc.DetectMs[name]; ok {
			po.DetectMs = &d
		}
		if pr := sc.Check.Of(name); pr != nil {
			po.Violations = pr.ViolationCount
			po.Evidence = evidence(pr)
			if len(pr.Violations) > 0 {
				po.Lines = pr.Violations[0].Lines
			}
		}
		switch {
		case po.Outcome == Unexpected && po.Verdict != contract.Violated:
			po.Evidence = "no violation found on any seed of this lock × fault: the harness did not catch what this lock is known to break"
		case po.FoundElsewhere && po.Verdict != contract.Violated:
			po.Evidence = "not found on this seed; found on another seed of this lock × fault, as predicted"
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
	case contract.Violated:
		if len(pr.Violations) > 0 {
			v := pr.Violations[0]
			s := fmt.Sprintf("%s on key %q, history lines %s: %s", v.Rule, v.Key, joinLines(v.Lines), v.Explanation)
			if pr.ViolationCount > 1 {
				s += fmt.Sprintf(" (%d violations in all)", pr.ViolationCount)
			}
			return s
		}
		return pr.Explanation
	case contract.Unknown:
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
