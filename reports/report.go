package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// Status is the verdict of a whole report.
type Status string

// Report statuses.
const (
	// Pass: every scenario came out as predicted (its row's judgment)
	// and none is unknown.
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
	Scenarios int `json:"scenarios"`
	// AsExpected and NotAsExpected count the scenarios as predicted and
	// not (their rows' judgment, summary.json's as_expected and
	// mismatches); the others are unknown, failed or not run.
	AsExpected    int `json:"as_expected"`
	NotAsExpected int `json:"not_as_expected"`
	// Unexpected counts the property verdicts not as expected; Unexcused
	// the violations a fault of the run may cause, outside every window of
	// one (each a mismatch of its row: summary.json's mismatch_details).
	Unexpected int `json:"unexpected"`
	Unexcused  int `json:"unexcused,omitempty"`
	Unknown    int `json:"unknown"`  // property verdicts unknown
	Problems   int `json:"problems"` // scenarios failed or with broken files
	NotRun     int `json:"not_run"`  // scenarios an interruption kept from running
	// Regressions counts the cells whose detection rate fell too far below
	// the promised one to be chance (CellReport.Regressions).
	Regressions int `json:"regressions"`
	// TraceValidated counts the scenarios whose history TLC validated
	// against the TLA+ model (accepted or rejected); TraceRejected the
	// rejected ones, which fail the run like a verdict not as expected.
	TraceValidated int `json:"trace_validated,omitempty"`
	TraceRejected  int `json:"trace_rejected,omitempty"`
	// TraceDisagrees counts the histories the model and the checker
	// disagree on; NoBite the scenarios whose fault refused no stale op
	// where it must; OtherMismatches any other mismatch of a row.
	TraceDisagrees  int `json:"trace_disagrees,omitempty"`
	NoBite          int `json:"no_bite,omitempty"`
	OtherMismatches int `json:"other_mismatches,omitempty"`
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
	// Mismatches are what the judge found not as predicted in the
	// scenario (summary.json's mismatch_details): its status is fail
	// when there is one.
	Mismatches []contract.Mismatch `json:"mismatches,omitempty"`
	Status     Status              `json:"status"`
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
	// Stalls are the stalls the run's processes saw and the verdicts
	// they excused (summary.json's stalls; nil for none).
	Stalls *contract.Stalls `json:"stalls,omitempty"`
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

// StallNote is the run's stalls in one phrase ("" for none).
func (s *ScenarioReport) StallNote() string { return s.Stalls.Note() }

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
	// StallMs is the longest stall that excused this property's verdict
	// (contract.Stalls); 0 for none.
	StallMs    int64 `json:"stall_excused_ms,omitempty"`
	Violations int   `json:"violations,omitempty"`
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

// outcome says how a property's verdict v compares with its prediction
// want, as the row's judgment says (package judge): unexpected when the
// judge found the property not as predicted (mismatched), unknown when
// the verdict is, else as expected where there is a prediction.
func outcome(v contract.Verdict, want contract.Want, mismatched bool) Outcome {
	switch {
	case mismatched:
		return Unexpected
	case v == contract.NotChecked:
		return NoExpected // the property is newer than the row: nothing to compare
	case v == contract.Unknown:
		return Undecided
	case want == contract.WantOK || want == contract.WantViolated || want == contract.WantMay:
		return AsExpected
	}
	return NoExpected
}

// judgedRows are run's rows as judged, in its order: a row summary.json
// holds judged (LoadedScenario.Judged, every row lockproof writes) as it
// is; any other (a file written by hand) a copy, judged by package judge
// against the prediction it records, as the matrix judges (judge.Row,
// then judge.Cells for the seeds that missed what their cell found). The
// report reads the judgment; it never decides "as predicted" itself.
func judgedRows(run *Run) []*contract.Row {
	rows := make([]*contract.Row, len(run.Scenarios))
	var fresh []*contract.Row
	var exps []locker.Prediction
	for i, sc := range run.Scenarios {
		if sc.Judged {
			rows[i] = &sc.Row
			continue
		}
		r := sc.Row
		r.FoundElsewhere = nil // judge.Cells finds them
		exp := judge.Recorded(&r)
		judge.Row(exp, &r)
		rows[i] = &r
		fresh, exps = append(fresh, &r), append(exps, exp)
	}
	judge.Cells(fresh, exps)
	return rows
}

// Build turns a loaded run into a report. Whether each scenario, each
// cell and the run came out as predicted is the judged rows' word
// (judgedRows): the report agrees with summary.json and the exit code.
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
	rows := judgedRows(run)
	for i, sc := range run.Scenarios {
		sr := buildScenario(sc, rows[i])
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
		}
		for _, p := range sr.Properties {
			if p.Outcome == Undecided {
				r.Counts.Unknown++
			}
		}
		switch sr.Status {
		case Fail:
			r.Counts.NotAsExpected++
		case Pass:
			r.Counts.AsExpected++
		}
		for _, m := range sr.Mismatches {
			switch {
			case m.Kind == contract.MismatchVerdict:
				r.Counts.Unexpected++
			case m.Kind == contract.MismatchUnexcused:
				r.Counts.Unexcused++
			case m.Kind == contract.MismatchTrace && sr.TraceRejected() && strings.HasPrefix(m.Text, "trace rejected"):
				r.Counts.TraceRejected++
			case m.Kind == contract.MismatchTrace:
				r.Counts.TraceDisagrees++
			case m.Kind == contract.MismatchNoBite:
				r.Counts.NoBite++
			default:
				r.Counts.OtherMismatches++
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
	r.Status, r.Headline = headline(r)
	return r
}

// headline is the run's status, as summary.json's rows and cells make
// the exit code (contract.Summary.Status), and its sentence: what is not
// as predicted, or, for a run as predicted, where its violations are
// (each one predicted).
func headline(r *Report) (Status, string) {
	c := r.Counts
	switch {
	case c.NotAsExpected > 0 || c.Regressions > 0:
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{
			{c.Unexpected, "verdicts not as expected"},
			{c.Unexcused, "violations outside every fault window that excuses them"},
			{c.TraceRejected, "traces rejected by the TLA+ model"},
			{c.TraceDisagrees, "traces the TLA+ model and the checker disagree on"},
			{c.NoBite, "faults that did not bite (no stale op refused)"},
			{c.OtherMismatches, "other mismatches"},
		} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		h := ""
		if c.NotAsExpected > 0 {
			h = strings.Join(parts, ", ") + fmt.Sprintf(" in %d of %d scenarios", c.NotAsExpected, c.Scenarios)
		}
		if c.Regressions > 0 {
			if h != "" {
				h += " and "
			}
			h += fmt.Sprintf("%d cells detect a predicted break too rarely (regression)", c.Regressions)
		}
		if c.Unknown > 0 {
			h += fmt.Sprintf("; %d unknown", c.Unknown)
		}
		if c.NotRun > 0 {
			h += fmt.Sprintf("; interrupted after %d of %d scenarios", c.Scenarios-c.NotRun, c.Scenarios)
		}
		return Fail, h
	case c.NotRun > 0:
		return Inconclusive, fmt.Sprintf("interrupted after %d of %d scenarios (%d verdicts unknown among them); this run does not show the locks safe",
			c.Scenarios-c.NotRun, c.Scenarios, c.Unknown)
	case c.Unknown > 0 || c.Problems > 0 || c.AsExpected < c.Scenarios:
		return Inconclusive, fmt.Sprintf("inconclusive: %d verdicts unknown and %d scenarios failed or with broken files in %d scenarios; this run does not show the locks safe",
			c.Unknown, c.Problems, c.Scenarios)
	case c.Scenarios == 0:
		return Inconclusive, "inconclusive: the run has no scenarios"
	}
	return Pass, fmt.Sprintf("all %d scenarios as predicted; %s", c.Scenarios, violationsWhere(r))
}

// violationsWhere says where a run as predicted found its violations:
// the cells (lock × fault) with one, each predicted.
func violationsWhere(r *Report) string {
	var where []string
	for _, c := range r.Cells {
		var found []string
		for _, p := range c.Properties {
			if p.Violated > 0 {
				found = append(found, fmt.Sprintf("%s %d/%d", p.Property, p.Violated, p.Decided()))
			}
		}
		if len(found) > 0 {
			where = append(where, fmt.Sprintf("%s × %s (%s)", c.Lock, c.Fault, strings.Join(found, ", ")))
		}
	}
	const most = 8
	n := len(where)
	switch {
	case n == 0:
		return "no violation found"
	case n > most:
		where = append(where[:most], fmt.Sprintf("%d more", n-most))
	}
	return fmt.Sprintf("violations, each predicted, in %d of %d cells: %s", n, len(r.Cells), strings.Join(where, ", "))
}

func buildScenario(sc *LoadedScenario, row *contract.Row) *ScenarioReport {
	sr := &ScenarioReport{
		ID: sc.ID, Lock: sc.Lock, Fault: sc.Fault, Seed: sc.Seed, Ops: sc.Ops, Rejected: sc.Rejected,
		History: sc.History, Check: sc.CheckPath, Visualization: sc.Visualization,
		Problems: sc.Problems, Plot: sc.Plot, Result: sc.Check, byName: map[string]*PropertyOutcome{},
		ElapsedMs: sc.ElapsedMs, NotRun: sc.NotRun, Started: sc.Started, FaultName: sc.FaultName, FaultEvidence: sc.FaultEvidence,
		FaultStartMs: sc.FaultStartMs, Page: sc.Page,
		Trace: sc.Trace, TraceLine: sc.TraceLine, TraceError: sc.TraceError,
		Mismatches: row.Details(),
		Stalls:     row.Stalls,
		failed:     sc.Error != "" || sc.FaultError != "" || sc.NotRun,
	}
	for _, name := range propertyNames() {
		po := PropertyOutcome{Property: name, Verdict: sc.Verdicts[name], Expected: sc.Expected[name],
			Want:           contract.WantOf(sc.Expected[name], slices.Contains(sc.MayViolate, name)),
			FoundElsewhere: slices.Contains(row.FoundElsewhere, name)}
		var mine *contract.Mismatch
		for i := range sr.Mismatches {
			if sr.Mismatches[i].Property == name {
				mine = &sr.Mismatches[i]
				break
			}
		}
		po.Outcome = outcome(po.Verdict, po.Want, mine != nil)
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
		case mine != nil && mine.Kind == contract.MismatchUnexcused:
			po.Evidence = mine.Text
		case po.Outcome == Unexpected && po.Verdict != contract.Violated:
			po.Evidence = "no violation found on any seed of this lock × fault: the harness did not catch what this lock is known to break"
		case po.FoundElsewhere && po.Verdict != contract.Violated:
			po.Evidence = "not found on this seed; found on another seed of this lock × fault, as predicted"
		}
		if row.Stalls != nil {
			for _, e := range row.Stalls.Excused {
				if e.Property == name {
					po.StallMs = e.StallMs
				}
			}
		}
		if po.StallMs > 0 && mine == nil {
			po.Evidence = strings.TrimPrefix(po.Evidence+"; ", "; ") + fmt.Sprintf("excused by a stall of %dms: a process of the run did not run then, as a paused client does not", po.StallMs)
		}
		sr.Properties = append(sr.Properties, po)
	}
	for i := range sr.Properties {
		sr.byName[sr.Properties[i].Property] = &sr.Properties[i]
	}
	// The row's judgment decides, as it decides the exit code: not as
	// predicted when the judge found a mismatch; undecided when a verdict
	// is unknown, the scenario or its fault failed, or its files are
	// broken (a report never calls those safe).
	switch {
	case len(sr.Mismatches) > 0:
		sr.Status = Fail
	case sc.NotRun:
		sr.Status = Pass // not run: counted apart (Counts.NotRun)
	case row.Unknown() || len(sr.Problems) > 0:
		sr.Status = Inconclusive
	default:
		sr.Status = Pass
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
