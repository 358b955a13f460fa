package runner

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/tla"
)

// newRow is a summary row with the spec's identity and expectation.
func (m *matrix) newRow(s Spec) *contract.Row {
	row := &contract.Row{}
	row.SpecRecord = recordOf(s)
	row.Lock, row.Fault, row.Seed = s.Lock, s.Fault, int64(s.Seed)
	row.History = path.Join(s.ID(), contract.HistoryFile)
	row.Started = time.Now().UTC().Format(time.RFC3339Nano)
	row.Verdicts = contract.Verdicts{}
	judge.Record(row, s.exp)
	return row
}

// failed is the row of a scenario that could not run: unknown verdicts, an
// empty history and a check.json saying why (redacted: the error may
// quote a lock's process or a server).
func (m *matrix) failed(s Spec, err error) *contract.Row {
	row := m.newRow(s)
	why := m.red.String(err.Error())
	row.Error = why
	for _, p := range contract.PropertyIDs() {
		row.Verdicts[p] = contract.Unknown
	}
	dir := filepath.Join(m.cfg.Out, s.ID())
	if e := os.MkdirAll(dir, 0o755); e == nil {
		hp := filepath.Join(dir, contract.HistoryFile)
		if _, e := os.Stat(hp); e != nil {
			_ = os.WriteFile(hp, nil, 0o644)
		}
		_ = writeJSON(filepath.Join(dir, contract.CheckFile), unknownResult(why))
	}
	return row
}

// unknownResult is a checker result with every verdict unknown because of
// why (an error's text).
func unknownResult(why string) *checker.Result {
	r := &checker.Result{Verdict: contract.Unknown}
	for _, p := range contract.Properties() {
		r.Props = append(r.Props, checker.PropertyResult{ID: p.ID, Property: p.Name, Verdict: contract.Unknown,
			Explanation: "not checked: " + why})
	}
	return r
}

// checkOptions are the checker's options for s: CheckOptions for its
// lock and TTL, with the run's budget.
func (m *matrix) checkOptions(s Spec) checker.Options {
	return judge.CheckOptions(s.entry, s.TTL, m.cfg.CheckTimeout)
}

// waitTimeout is WaitTimeout for s's lock.
func (m *matrix) waitTimeout(s Spec) time.Duration { return judge.WaitTimeout(s.entry) }

// runOne runs, checks and files one scenario.
func (m *matrix) runOne(ctx context.Context, e env.Env, s Spec) *contract.Row {
	row := m.newRow(s)
	dir := filepath.Join(m.cfg.Out, s.ID())
	sc := chaos.Scenario{Lock: s.Lock, Fault: s.Fault, Seed: s.Seed, Duration: s.Duration, TTL: s.TTL,
		Clients: s.Clients, Logger: m.cfg.Logger.With("scenario", s.ID()), Redact: m.red.String}
	sc.Workload.Hold, sc.Workload.Think, sc.Workload.OpTimeout = s.Hold, s.Think, s.OpTimeout
	sc.Workload.Locks, sc.Workload.Mix, sc.Workload.WaitTimeout = m.cfg.Registry, m.cfg.Mix, m.waitTimeout(s)
	sc.Point = s.Point
	byo := e != nil && e.Kind() == env.BYO // nil: a test's Runner that needs none
	if byo {
		// A user's deployment: keys of this run alone, deleted after it.
		sc.KeyPrefix = m.keyPrefix(s)
	}
	rctx, cancel := context.WithTimeout(ctx, s.Duration+2*time.Minute)
	out, runErr := m.cfg.Runner(rctx, e, sc, dir)
	cancel()
	if byo {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := chaos.ClearKeys(cctx, e, sc.KeyPrefix); err != nil {
			row.Error = joinErr(row.Error, "delete the scenario's keys: "+err.Error())
		}
		cancel()
	}
	row.FaultName, row.FaultEvidence = out.FaultName, out.FaultEvidence
	if out.FaultErr != nil {
		row.FaultError = out.FaultErr.Error()
	}
	ops := out.Ops
	if runErr != nil {
		row.Error = runErr.Error()
		if ops == nil {
			// The history on disk is complete also on error; check what it holds.
			if got, err := history.ReadFile(filepath.Join(dir, contract.HistoryFile)); err == nil {
				ops = got
			}
		}
	}
	for i := range ops {
		// The injected fault's window: not a stall the run saw.
		if ops[i].Kind == history.Fault && !contract.Observed(contract.FaultKind(ops[i].Name)) {
			st := time.Duration(ops[i].Call).Milliseconds()
			row.FaultStartMs = &st
			break
		}
	}
	if runErr != nil && len(ops) == 0 {
		bad := m.failed(s, runErr)
		bad.FaultName, bad.FaultError, bad.FaultEvidence = row.FaultName, row.FaultError, row.FaultEvidence
		return bad
	}
	cctx, cancel := context.WithTimeout(ctx, 2*m.cfg.CheckTimeout+30*time.Second)
	defer cancel()
	res, err := checker.Check(cctx, ops, m.checkOptions(s))
	if err != nil {
		bad := m.failed(s, fmt.Errorf("check %s: %w", filepath.Join(dir, contract.HistoryFile), err))
		bad.FaultName, bad.FaultError, bad.FaultEvidence = row.FaultName, row.FaultError, row.FaultEvidence
		return bad
	}
	if err := writeJSON(filepath.Join(dir, contract.CheckFile), res); err != nil {
		row.Error = joinErr(row.Error, err.Error())
	}
	row.Ops = res.Counts.Ops
	row.Rejected = res.Counts.Rejected
	for _, p := range contract.PropertyIDs() {
		row.Verdicts[p] = contract.Unknown
		if pr := res.Of(p); pr != nil {
			row.Verdicts[p] = pr.Verdict
		}
	}
	if row.FaultStartMs != nil {
		row.DetectMs = detection(res, time.Duration(*row.FaultStartMs)*time.Millisecond, ops)
	}
	// A break the fault may cause counts only near its window.
	predict := func(kind string) locker.Prediction { return judge.PredictOn(s.entry, kind, m.cfg.Topology) }
	bounds := judge.Bounds{TTL: s.TTL, Skew: chaos.SkewBehind}
	row.Unexcused = judge.Unexcused(res, judge.WindowsOf(ops), predict, bounds)
	// The stalls the run's processes saw, and what they excused (a pause
	// of their clients' doing, not the lock's).
	judge.NoteStalls(row, res, ops, s.exp, predict, bounds)
	if check := m.cfg.Trace[s.Lock]; check != nil {
		tr, err := check(ctx, ops)
		switch {
		case err != nil:
			row.Trace, row.TraceError = contract.TraceError, err.Error()
		case tr.Accepted:
			row.Trace = contract.TraceAccepted
		default:
			row.Trace, row.TraceLine = contract.TraceRejected, tr.Line
		}
		if err == nil {
			// The differential: the model and the checker read one
			// contract, so they must judge this history alike.
			if d := tr.Disagreement(row.Verdicts[contract.PropLease], row.Verdicts[contract.PropResource]); d != nil {
				row.TraceDisagrees = d.Error()
			}
		}
	}
	if res.Verdict == contract.Violated {
		if err := visualize(cctx, filepath.Join(dir, contract.VisualizationFile), ops, res, m.cfg.CheckTimeout); err != nil {
			m.cfg.Logger.Warn("porcupine visualization", "scenario", s.ID(), "err", err)
		}
	}
	return row
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// detection returns, per violated property, the time from the fault
// window's start to the call of the op that completed the earliest of its
// listed violations (a violation is complete once its last op was called).
func detection(res *checker.Result, faultStart time.Duration, ops []history.Op) map[string]int64 {
	start := int64(-1)
	for i := range ops {
		if ops[i].Kind == history.Fault && !contract.Observed(contract.FaultKind(ops[i].Name)) && (start < 0 || ops[i].Call < start) {
			start = ops[i].Call
		}
	}
	if start < 0 {
		start = int64(faultStart)
	}
	out := map[string]int64{}
	for _, id := range contract.PropertyIDs() {
		pr := res.Of(id)
		if pr.Verdict != contract.Violated {
			continue
		}
		best := int64(-1)
		for _, v := range pr.Violations {
			last := int64(-1)
			for _, o := range v.Ops {
				last = max(last, o.Call)
			}
			if last >= 0 && (best < 0 || last < best) {
				best = last
			}
		}
		if best >= 0 {
			out[id] = max(0, time.Duration(best-start).Milliseconds())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func visualize(ctx context.Context, p string, ops []history.Op, res *checker.Result, timeout time.Duration) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := checker.Visualize(ctx, f, ops, res, checker.Options{Timeout: timeout}); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	return f.Close()
}

// TraceCheck validates one scenario's history against a model
// (tla.Validator.Validate): accepted, or the history line of the first
// event the model refused. An error means no verdict (no TLC, a timeout).
type TraceCheck func(ctx context.Context, ops []history.Op) (tla.Result, error)

// finish records a row, reports progress and rewrites summary.json.
func (m *matrix) finish(i int, row *contract.Row, start time.Time) {
	if err := m.runCtx.Err(); err != nil && !row.NotRun {
		// Cut short by the interrupt: its verdicts say nothing, and a
		// resumed run runs it again.
		row.NotRun = true
		row.Error = joinErr("interrupted: "+context.Cause(m.runCtx).Error(), row.Error)
	}
	row.ElapsedMs = time.Since(start).Milliseconds()
	redactRow(m.red, row)
	judge.Row(m.specs[i].exp, row)
	m.mu.Lock()
	m.rows[i] = row
	m.done++
	// Under the lock: scenarios finish concurrently, and Progress need not
	// be safe for concurrent use (a bytes.Buffer lost a line so).
	if w := m.cfg.Progress; w != nil && !row.NotRun {
		fmt.Fprintln(w, progressLine(m.done, len(m.specs), row))
	}
	m.mu.Unlock()
	if err := m.writeSummary(); err != nil {
		m.cfg.Logger.Warn(contract.SummaryFile, "err", err)
	}
}

// redactRow redacts the row's texts that may come from outside the
// harness: errors (a lock's, its process's stderr, a server's reply, a
// fault's), the fault's evidence, the model checker's output. Before the
// row is judged (its mismatches quote TraceDisagrees) and before
// anything reads it: summary.json, the progress line, the reports
// rendered from summary.json, Run's result. The other texts of a row are
// the harness's own (names, paths, verdicts, the checker's words about
// a history whose texts the recorder redacted);
// TestRedactRowCoversRow holds every text field of contract.Row to this
// division.
func redactRow(red *redact.Redactor, row *contract.Row) {
	for _, s := range []*string{&row.Error, &row.FaultError, &row.FaultEvidence, &row.TraceError, &row.TraceDisagrees} {
		*s = red.String(*s)
	}
}

// progressLine is one line of progress for a finished scenario.
func progressLine(done, total int, r *contract.Row) string {
	status := "as expected"
	switch {
	case len(r.Mismatches) > 0:
		status = "NOT AS EXPECTED: " + strings.Join(r.Mismatches, "; ")
	case r.Unknown():
		status = "UNKNOWN verdict"
	}
	if r.Error != "" {
		status += " (error: " + r.Error + ")"
	}
	if r.FaultError != "" {
		status += " (fault: " + r.FaultError + ")"
	}
	var det []string
	for _, p := range contract.PropertyIDs() {
		if d, ok := r.DetectMs[p]; ok {
			det = append(det, fmt.Sprintf("%s@%.1fs", p, float64(d)/1000))
		}
	}
	found := ""
	if len(det) > 0 {
		found = " found " + strings.Join(det, ",")
	}
	var verdicts strings.Builder
	for _, p := range contract.PropertyIDs() {
		fmt.Fprintf(&verdicts, "%s %-8s ", p, r.Verdict(p))
	}
	if n := r.Stalls.Note(); n != "" {
		status += " (" + n + ")"
	}
	return fmt.Sprintf("[%*d/%d] %-26s %srejected %-4d ops %-5d %5.1fs%s  %s",
		len(fmt.Sprint(total)), done, total, r.ID(), verdicts.String(), r.Rejected, r.Ops,
		float64(r.ElapsedMs)/1000, found, status)
}
