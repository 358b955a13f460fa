package contract

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Summary is summary.json: the one type of the file, which the matrix
// (`lockproof run`), the simulation (`lockproof sim`), the reports and
// lockproof.Run write and read alike.
type Summary struct {
	Scenarios []*Row `json:"scenarios"`
	// Cells sum the seeds of each lock × fault up (absent in files written
	// before cells were: the reports then sum them up themselves).
	Cells []*Cell `json:"cells,omitempty"`
	// Shard says which part of a plan the run holds (`run --shard K/N`);
	// absent for a whole plan, and for a merge of every shard.
	Shard *Shard `json:"shard,omitempty"`
	// Topology is the shape of the deployment the run ran on
	// (TopologySentinel, TopologyCluster); absent in files written before
	// there was a choice, which ran on the Sentinel topology.
	Topology string `json:"topology,omitempty"`
}

// Status sums a run up as `lockproof run` exits: ExitOK every verdict as
// predicted, ExitViolation some verdict not as predicted or some cell's
// detection rate a regression (Cell.Regressions), ExitUnknown some verdict
// unknown (and nothing unpredicted).
func (s *Summary) Status() int {
	unknown := false
	for _, sc := range s.Scenarios {
		if len(sc.Mismatches) > 0 {
			return ExitViolation
		}
		unknown = unknown || sc.Unknown()
	}
	for _, c := range s.Cells {
		if len(c.Regressions) > 0 {
			return ExitViolation
		}
	}
	if unknown {
		return ExitUnknown
	}
	return ExitOK
}

// WrittenTopology is a topology as summary.json writes it: "" for the
// Sentinel topology, so that a run on it writes the file it always wrote
// (TopologyOf reads it back).
func WrittenTopology(topology string) string {
	if topology == TopologySentinel {
		return ""
	}
	return topology
}

// TopologyOf is a summary's topology as read: TopologySentinel when the
// file says none.
func TopologyOf(s string) string { return cmp.Or(s, TopologySentinel) }

// Shard is one of Count parts of a run's plan: the plan's lock × fault
// cells, in plan order, cut into Count contiguous runs of cells (Range),
// the Index-th of which (1-based) this run holds. A cell is never split:
// its seeds are judged together (Cell). Cells is the plan's cell count.
// Merging the Count shards in Index order gives the rows and cells of the
// whole plan in plan order.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
	Cells int `json:"cells"`
}

// ErrBadShard: a shard that is not "K/N" with 1 <= K <= N.
var ErrBadShard = errors.New("bad shard")

// ParseShard reads "K/N" (1 <= K <= N).
func ParseShard(s string) (Shard, error) {
	k, n, ok := strings.Cut(s, "/")
	ki, kerr := strconv.Atoi(k)
	ni, nerr := strconv.Atoi(n)
	if !ok || kerr != nil || nerr != nil || ni < 1 || ki < 1 || ki > ni {
		return Shard{}, fmt.Errorf("%w: %q: want K/N with 1 <= K <= N, e.g. 2/4", ErrBadShard, s)
	}
	return Shard{Index: ki, Count: ni}, nil
}

// String is "K/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Range is the cells [lo, hi) of a plan of cells cells that the shard holds.
func (s Shard) Range(cells int) (lo, hi int) {
	return (s.Index - 1) * cells / s.Count, s.Index * cells / s.Count
}

// Row is one scenario of summary.json: the one row type every stage
// reads and writes (reports.LoadedScenario).
//
// Its JSON form has one member per property after "ops", keyed by the
// property's ID ("lease": "ok", ...): the Verdicts. A type that embeds Row
// takes its JSON methods, so it must add no JSON fields of its own.
type Row struct {
	Lock  string `json:"lock"`
	Fault string `json:"fault"`
	Seed  int64  `json:"seed"`
	Ops   int    `json:"ops"`
	// Verdicts holds the verdict on each property (Properties), keyed by ID.
	Verdicts Verdicts `json:"-"`
	// Rejected counts the resource ops refused for a stale token.
	Rejected int `json:"rejected"`
	// Expected holds the verdicts the scenario is expected to give; a
	// property without one states no expectation.
	Expected Verdicts `json:"expected"`
	// History is the scenario's history file, relative to the run directory.
	History string `json:"history"`
	// Error and FaultError say that the scenario or its fault failed: the
	// scenario is inconclusive however its verdicts read (a fault that never
	// ran proves nothing), and the reports list them among the problems.
	Error      string `json:"error,omitempty"`
	FaultError string `json:"fault_error,omitempty"`
	// NotRun: the run was interrupted before this scenario (it has no
	// files); the report says the run was interrupted.
	NotRun bool `json:"not_run,omitempty"`
	// ElapsedMs is the scenario's wall time: run, check, files.
	ElapsedMs int64 `json:"elapsed_ms"`
	// Started is when the scenario started (RFC 3339, UTC); "" in files
	// written before it was recorded.
	Started string `json:"started,omitempty"`
	// FaultName is the fault window's name in the history; FaultEvidence
	// what the fault did (a scenario whose fault did not bite has a
	// fault_error saying so, and is inconclusive).
	FaultName     string `json:"fault_name,omitempty"`
	FaultEvidence string `json:"fault_evidence,omitempty"`
	// MayViolate lists the properties that may break in some seeds and not
	// in others: expected has no verdict for them.
	MayViolate []string `json:"may_violate,omitempty"`
	// FaultStartMs is when the fault window opened, from the history's start.
	FaultStartMs *int64 `json:"fault_start_ms,omitempty"`
	// DetectMs is, per violated property, the time from the start of the
	// fault window to the call of the op that completed its first violation.
	DetectMs map[string]int64 `json:"detect_ms,omitempty"`
	// Trace is the outcome of validating the history against the TLA+
	// model (TraceAccepted, TraceRejected, TraceError); empty when not
	// validated (no --tla-jar, or a lock the model does not describe).
	Trace string `json:"trace,omitempty"`
	// TraceLine is, for a rejected trace, the history line of the first
	// event no order could take.
	TraceLine int `json:"trace_line,omitempty"`
	// TraceError says why a validation gave no verdict.
	TraceError string `json:"trace_error,omitempty"`
	// TraceDisagrees says how the model's verdict and the checker's
	// disagree on the history (tla.Result.Disagreement): one verifier of
	// the contract passed what the other refused. Empty when they agree or
	// the trace was not validated; a disagreement is a mismatch.
	TraceDisagrees string `json:"trace_disagrees,omitempty"`
	// AsExpected: every verdict is known and matches the prediction;
	// Mismatches say which known verdicts do not.
	AsExpected bool     `json:"as_expected"`
	Mismatches []string `json:"mismatches,omitempty"`
	// MismatchDetails are the Mismatches in structured form, one each, in
	// order (additive, since 2026-11-29: absent in older files, whose
	// Mismatches alone say it). Row.AddMismatch keeps the two together.
	MismatchDetails []Mismatch `json:"mismatch_details,omitempty"`
	// Unexcused lists the violations that no fault window of the run
	// excuses: the property may break under the run's faults, but this
	// violation's witnesses lie outside every window of a fault that may
	// break it, and past the bound the contract gives that fault
	// (docs/DESIGN.md, "Judging"). Each is a mismatch too. Absent in files
	// written before violations were judged per window.
	Unexcused []string `json:"unexcused,omitempty"`
	// Stalls are the stalls the harness observed in the run's processes
	// (FaultStall windows in its history) and the verdicts they excused;
	// absent when there were none (and in files written before stalls
	// were measured, 2026-12-07).
	Stalls *Stalls `json:"stalls,omitempty"`
	// FoundElsewhere lists the properties predicted to break that this
	// seed did not show but another seed of its cell did: as expected.
	FoundElsewhere []string `json:"found_elsewhere,omitempty"`
	// Environment says what produced the row: EnvSim for a simulation
	// (`lockproof sim`); absent for a real-time run (processes, Docker or
	// a deployment of one's own, as the run's flags chose), and in every
	// file written before simulations were.
	Environment string `json:"environment,omitempty"`
	// SpecRecord is the fault point, durations and shape the scenario ran
	// with (its fields come last in the row).
	SpecRecord
}

// Mismatch is one way a row is not as its prediction says, in
// structured form (Row.MismatchDetails); Text is its line in
// Row.Mismatches.
type Mismatch struct {
	// Kind is MismatchVerdict, MismatchUnexcused, MismatchTrace or
	// MismatchNoBite.
	Kind string `json:"kind"`
	// Property is the property it is about; "" for a trace or no-bite.
	Property string `json:"property,omitempty"`
	// Verdict is the property's verdict, Expected what the prediction
	// wants of it (for an unexcused violation: the fault mix allows it,
	// but not where it happened).
	Verdict  Verdict `json:"verdict,omitempty"`
	Expected Want    `json:"expected,omitempty"`
	Text     string  `json:"text"`
}

// Mismatch kinds.
const (
	// MismatchVerdict: a verdict the prediction does not allow.
	MismatchVerdict = "verdict"
	// MismatchUnexcused: a violation the prediction allows under the
	// run's faults, outside every window that excuses it.
	MismatchUnexcused = "unexcused"
	// MismatchTrace: the TLA+ model refused the history, or disagrees
	// with the checker on it.
	MismatchTrace = "trace"
	// MismatchNoBite: a fenced lock's fault refused no stale op, where
	// its prediction needs one (the fault did not bite).
	MismatchNoBite = "no-bite"
)

// VerdictMismatch is property p's verdict v against the prediction w.
func VerdictMismatch(p string, v Verdict, w Want) Mismatch {
	return Mismatch{Kind: MismatchVerdict, Property: p, Verdict: v, Expected: w, Text: fmt.Sprintf("%s %s, expected %s", p, v, w)}
}

// UnexcusedMismatch is a line of an unexcused violation (judge.Unexcused
// writes it, the property first), with what the prediction wants of its
// property (want: the prediction's Want).
func UnexcusedMismatch(line string, want func(property string) Want) Mismatch {
	p, _, _ := strings.Cut(line, " ")
	return Mismatch{Kind: MismatchUnexcused, Property: p, Verdict: Violated, Expected: want(p), Text: line}
}

// AddMismatch records m in both forms.
func (r *Row) AddMismatch(m Mismatch) {
	r.Mismatches = append(r.Mismatches, m.Text)
	r.MismatchDetails = append(r.MismatchDetails, m)
}

// Details are the row's mismatches in structured form: MismatchDetails,
// or, in a file written before they were, each of Mismatches read back
// from its text (MismatchOf).
func (r *Row) Details() []Mismatch {
	if len(r.MismatchDetails) == len(r.Mismatches) {
		return r.MismatchDetails
	}
	out := make([]Mismatch, len(r.Mismatches))
	for i, t := range r.Mismatches {
		out[i] = MismatchOf(t)
	}
	return out
}

// MismatchOf reads a mismatch back from its line in Row.Mismatches (its
// Text), as the judge writes them: "P V, expected W" (a verdict), "P
// violated outside every window..." (unexcused), "trace ..." (the model),
// "rejected 0, ..." (no-bite). A line of none of these forms has no kind
// and no property: it is about the row.
func MismatchOf(text string) Mismatch {
	m := Mismatch{Text: text}
	first, rest, _ := strings.Cut(text, " ")
	switch {
	case slices.Contains(PropertyIDs(), first) && strings.HasPrefix(rest, "violated outside every window"):
		m.Kind, m.Property, m.Verdict = MismatchUnexcused, first, Violated
	case slices.Contains(PropertyIDs(), first):
		m.Kind, m.Property = MismatchVerdict, first
		if v, w, ok := strings.Cut(rest, ", expected "); ok {
			m.Verdict, m.Expected = Verdict(v), Want(w)
		}
	case first == "trace":
		m.Kind = MismatchTrace
	case strings.HasPrefix(text, "rejected 0, expected > 0"):
		m.Kind = MismatchNoBite
	}
	return m
}

// DropMismatch removes the mismatch whose text is text, from both forms,
// and reports whether there was one.
func (r *Row) DropMismatch(text string) bool {
	i := slices.Index(r.Mismatches, text)
	if i < 0 {
		return false
	}
	r.Mismatches = slices.Delete(r.Mismatches, i, i+1)
	r.MismatchDetails = slices.DeleteFunc(r.MismatchDetails, func(m Mismatch) bool { return m.Text == text })
	return true
}

// ID is the row's scenario directory name (its History's folder).
func (r *Row) ID() string { return path.Dir(r.History) }

// Verdict returns the verdict of the property of ID prop (PropLease, ...);
// Unknown when the row has none.
func (r *Row) Verdict(prop string) Verdict {
	if v, ok := r.Verdicts[prop]; ok {
		return v
	}
	return Unknown
}

// Unknown reports whether the row is inconclusive (not Conclusive): some
// verdict is unknown, or the scenario or its fault failed (Error,
// FaultError). A fault that never ran proves nothing, so such a row is
// never as predicted, and the run exits ExitUnknown for it unless a
// verdict contradicts the prediction.
func (r *Row) Unknown() bool { return !r.Conclusive() }

// EnvSim is Row.Environment for a simulation: in-process nodes, a
// simulated network, virtual time.
const EnvSim = "sim"

// Conclusive reports whether the row decides its properties: no property
// has an unknown verdict, and neither the scenario nor its fault failed (a
// fault that never ran proves nothing; an interrupted scenario has an
// error). A property the row lacks, or reads as NotChecked, was added
// after the row was written: it decides nothing either way, and leaves the
// row conclusive on the others. The cells count only conclusive rows as
// seeds.
func (r *Row) Conclusive() bool {
	decided := false
	for _, id := range PropertyIDs() {
		switch v := r.Verdicts[id]; v {
		case Unknown:
			return false
		case "", NotChecked:
		default:
			decided = true
		}
	}
	if !decided {
		return false // a row that judged nothing decides nothing
	}
	return r.Error == "" && r.FaultError == ""
}

// Median is the one median of lockproof's numbers (the cells' detection
// times, `run --detect`'s table): the upper one of an even count; false
// when ds is empty. It sorts ds in place.
func Median[T cmp.Ordered](ds []T) (T, bool) {
	if len(ds) == 0 {
		var zero T
		return zero, false
	}
	slices.Sort(ds)
	return ds[len(ds)/2], true
}

// The values of Row.Trace.
const (
	// TraceAccepted: some order of the history consistent with real time
	// follows the model's rules.
	TraceAccepted = "accepted"
	// TraceRejected: no order does (TraceLine names where it stops).
	TraceRejected = "rejected"
	// TraceError: the validation gave no verdict (TraceError says why).
	TraceError = "error"
)

// Cell is one lock × fault of summary.json over its seeds: how often each
// property was found violated, and how fast. A property predicted to
// break is as expected when at least one seed shows it (one seed of a
// timing-dependent fault may miss what the next finds); a property that
// must hold holds on every seed.
type Cell struct {
	Lock  string `json:"lock"`
	Fault string `json:"fault"`
	// Seeds is how many seeds ran with known verdicts.
	Seeds int `json:"seeds"`
	// Found is, per violated property, on how many seeds; Rate the same
	// as a fraction of Seeds; DetectMedianMs the median detection time
	// over the seeds that found it.
	Found          map[string]int     `json:"found,omitempty"`
	Rate           map[string]float64 `json:"rate,omitempty"`
	DetectMedianMs map[string]int64   `json:"detect_median_ms,omitempty"`
	AsExpected     bool               `json:"as_expected"`
	// Want is the prediction per property (ok, violated, may, any); Why the
	// mechanism behind every prediction that is not plain ok.
	Want map[string]Want `json:"want,omitempty"`
	Why  string          `json:"why,omitempty"`
	// Promised is, per property predicted to break, the detection rate the
	// docs promise (docs/DESIGN.md, "Detection rates"); Regressions says
	// which found rates are too far below it to be chance: a regression of
	// the harness or of the fault, and the run fails.
	Promised    map[string]float64 `json:"promised_rate,omitempty"`
	Regressions []string           `json:"regressions,omitempty"`
}

// SpecRecord is how summary.json rows and saved regressions record a Spec's
// fault point, durations and workload shape (in milliseconds).
type SpecRecord struct {
	// After and Before are the fault point (Spec).
	After  string `json:"after,omitempty"`
	Before string `json:"before,omitempty"`
	// DurationMs and TTLMs are the workload's duration and lease length.
	DurationMs int64 `json:"duration_ms"`
	TTLMs      int64 `json:"ttl_ms"`
	// Clients, HoldMs and ThinkMs are the workload's shape (Spec).
	Clients int   `json:"clients,omitempty"`
	HoldMs  int64 `json:"hold_ms,omitempty"`
	ThinkMs int64 `json:"think_ms,omitempty"`
	// OpTimeoutMs bounds each operation (0: the default for the fault).
	OpTimeoutMs int64 `json:"op_timeout_ms,omitempty"`
}

// Stalls sums up a run's observed stalls (contract.FaultStall windows):
// how many, the longest, and the verdicts a stall excused.
type Stalls struct {
	Count     int   `json:"count"`
	LongestMs int64 `json:"longest_ms"`
	// Excused lists, per property, the longest stall whose window excused
	// a violation of it: without the stall the row would have shown it
	// (docs/DESIGN.md, "Stalls").
	Excused []StallExcuse `json:"excused,omitempty"`
}

// StallExcuse is a property whose violation a stall of StallMs excused.
type StallExcuse struct {
	Property string `json:"property"`
	StallMs  int64  `json:"stall_ms"`
}

// Note is the stalls in one phrase, for the CLI line and the reports
// ("" for none): "stalls 3, longest 120ms; fairness excused by a stall
// of 120ms".
func (s *Stalls) Note() string {
	if s == nil || s.Count == 0 {
		return ""
	}
	out := fmt.Sprintf("stalls %d, longest %dms", s.Count, s.LongestMs)
	for _, e := range s.Excused {
		out += fmt.Sprintf("; %s excused by a stall of %dms", e.Property, e.StallMs)
	}
	return out
}
