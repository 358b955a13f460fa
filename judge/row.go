package judge

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// CheckOptions are the checker's options for a history of the lock e with
// leases of ttl: the bounds e promises its waiters (waiter liveness,
// fair queue, hand-off promptness), its holders (loss notice, for leases
// of ttl), its callers (calls) and Redis (footprint), and the budget. A
// matrix run and a simulated one (package sim) judge alike through it.
func CheckOptions(e locker.Entry, ttl, budget time.Duration) checker.Options {
	o := checker.Options{Timeout: budget, WaitBound: e.WaitBound, NotReentrant: e.NotReentrant}
	if e.LossBound != nil {
		o.LossBound = e.LossBound(ttl)
	}
	if e.Fair != nil {
		o.Fair, o.Bypass = true, e.Fair.Bypass
	}
	if e.Calls != nil {
		o.CallSlack, o.CloseRefuses = e.Calls.Slack, e.Calls.CloseRefuses
	}
	if b := e.Footprint; b != nil {
		o.Footprint = &checker.FootprintBound{Base: int64(b.Base), PerHold: int64(b.PerHold), PerWaiter: int64(b.PerWaiter),
			PerUnknown: int64(b.PerUnknown), BuriedFor: b.BuriedFor}
	}
	if e.Handoff != nil {
		o.Handoff = e.Handoff.Within
	}
	return o
}

// WaitTimeout is how long the waiters of the lock e wait: twice the
// promised bound, so that a broken promise shows as a waiter served late
// or giving up.
func WaitTimeout(e locker.Entry) time.Duration { return 2 * e.WaitBound }

// Record writes the prediction exp into a row: the verdict it expects of
// each property (Row.Expected), and the properties it allows to break
// (Row.MayViolate). The matrix and the simulation write their rows so.
func Record(row *contract.Row, exp locker.Prediction) {
	row.Expected, row.MayViolate = contract.Verdicts{}, nil
	for _, p := range contract.PropertyIDs() {
		if v := exp.Want(p).Verdict(); v != "" {
			row.Expected[p] = v
		}
		if exp.Want(p) == contract.WantMay {
			row.MayViolate = append(row.MayViolate, p)
		}
	}
}

// Row judges a row of the matrix against the prediction exp: its
// verdicts, its unexcused violations (Unexcused, already in the row), a
// validated trace with the model, and whether the fault bit (rejected >
// 0 where exp needs it). It sets the row's mismatches and AsExpected: the
// one judgment of "as predicted" that summary.json, the exit code, the
// reports and the simulation all read. A must-break property the row
// missed is a mismatch until Cells finds it on another seed of the cell.
func Row(exp locker.Prediction, row *contract.Row) { judgeRow(exp, row, false) }

// Seed judges a seed that stands alone, with no cell of seeds around it
// (a simulation's): as Row does, except that a property exp says must
// break and the seed did not break is no mismatch (one seed of a
// timing-dependent fault may miss what the next finds; a campaign says of
// a break no seed found, sim.LockTotals.Missed), nor is a fault that
// refused no stale op (a simulated row counts none, Row.Rejected).
func Seed(exp locker.Prediction, row *contract.Row) { judgeRow(exp, row, true) }

func judgeRow(exp locker.Prediction, row *contract.Row, alone bool) {
	row.Mismatches, row.MismatchDetails = nil, nil
	for _, p := range contract.PropertyIDs() {
		v, w := row.Verdict(p), exp.Want(p)
		if alone && w == contract.WantViolated {
			continue
		}
		// A property the row predates (not checked) decides nothing.
		if v != contract.Unknown && v != contract.NotChecked && !w.Matches(v) && !stallExcused(row, p, v) {
			row.AddMismatch(contract.VerdictMismatch(p, v, w))
		}
	}
	if row.Trace == contract.TraceRejected {
		row.AddMismatch(contract.Mismatch{Kind: contract.MismatchTrace, Text: fmt.Sprintf("trace rejected by the model at line %d", row.TraceLine)})
	}
	if row.TraceDisagrees != "" {
		row.AddMismatch(contract.Mismatch{Kind: contract.MismatchTrace, Text: row.TraceDisagrees})
	}
	for _, u := range row.Unexcused {
		row.AddMismatch(contract.UnexcusedMismatch(u, exp.Want))
	}
	if !alone && exp.Rejected && row.Rejected == 0 && !row.Unknown() {
		row.AddMismatch(contract.Mismatch{Kind: contract.MismatchNoBite, Text: "rejected 0, expected > 0 (the fault did not bite)"})
	}
	settle(row)
}

// stallExcused reports whether a violation v of property p is one a
// stall of the run excused (NoteStalls): a pause of the stalled clients
// may cause it, and one lay within its reach.
func stallExcused(row *contract.Row, p string, v contract.Verdict) bool {
	return v == contract.Violated && row.Stalls != nil &&
		slices.ContainsFunc(row.Stalls.Excused, func(e contract.StallExcuse) bool { return e.Property == p })
}

// settle decides a judged row's AsExpected from its mismatches: none, and
// every verdict known.
func settle(row *contract.Row) { row.AsExpected = len(row.Mismatches) == 0 && !row.Unknown() }

// Recorded is the prediction a row records (Record's inverse): the
// verdict it expects of each property, and the properties it may
// violate; a property with neither has no prediction. Whether the fault
// must bite (Prediction.Rejected) and why are not recorded. The reports
// judge through it the rows a summary.json holds unjudged (a file written
// by hand, with no as_expected): Row(Recorded(r), r), then Cells.
func Recorded(row *contract.Row) locker.Prediction {
	var p locker.Prediction
	for _, id := range contract.PropertyIDs() {
		if w := contract.WantOf(row.Expected[id], slices.Contains(row.MayViolate, id)); w != "" {
			p.Set(w, id)
		}
	}
	return p
}

// Cells sums each lock × fault of rows up over its seeds and settles the
// rows of must-break properties: a seed that missed what another seed of
// its cell found is as predicted (FoundElsewhere), not a mismatch. It
// judges rows by cell and returns the cells in
// plan order; exps[i] is the prediction for rows[i] (its spec's).
func Cells(rows []*contract.Row, exps []locker.Prediction) []*contract.Cell {
	type id struct{ lock, fault string }
	var order []id
	byCell := map[id][]*contract.Row{}
	expOf := map[id]locker.Prediction{}
	for i, r := range rows {
		if r == nil || r.NotRun {
			continue
		}
		k := id{r.Lock, r.Fault}
		if _, ok := byCell[k]; !ok {
			order = append(order, k)
			expOf[k] = exps[i]
		}
		byCell[k] = append(byCell[k], r)
	}
	var cells []*contract.Cell
	for _, k := range order {
		rs := byCell[k]
		exp := expOf[k]
		c := &contract.Cell{Lock: k.lock, Fault: k.fault, Found: map[string]int{}, Rate: map[string]float64{}, DetectMedianMs: map[string]int64{},
			Want: map[string]contract.Want{}, Why: exp.Why}
		for _, p := range contract.PropertyIDs() {
			var det []int64
			anywhere := false // violated on some seed, conclusive or not
			for _, r := range rs {
				if r.Verdict(p) != contract.Violated {
					continue
				}
				anywhere = true
				if r.Unknown() {
					continue // not a seed of the rate: it proves nothing of the fault
				}
				c.Found[p]++
				if d, ok := r.DetectMs[p]; ok {
					det = append(det, d)
				}
			}
			if m, ok := contract.Median(det); ok {
				c.DetectMedianMs[p] = m
			}
			c.Want[p] = exp.Want(p)
			if exp.Want(p) != contract.WantViolated || !anywhere {
				continue
			}
			// Found on some seed: the seeds that missed it are as expected.
			for _, r := range rs {
				if r.DropMismatch(contract.VerdictMismatch(p, r.Verdict(p), contract.WantViolated).Text) {
					r.FoundElsewhere = append(r.FoundElsewhere, p)
					settle(r)
				}
			}
		}
		c.AsExpected = true
		for _, r := range rs {
			if !r.Unknown() {
				c.Seeds++
			}
			c.AsExpected = c.AsExpected && r.AsExpected
		}
		for p, n := range c.Found {
			if c.Seeds > 0 {
				c.Rate[p] = float64(n) / float64(c.Seeds)
			}
		}
		Promise(c, exp)
		cells = append(cells, c)
	}
	return cells
}

// Mix merges lock e's predictions under each fault of a run of several
// (a swarm seed), and under none: a property is ok when every one says
// so; a prediction of "violated" under one fault of a mix becomes "may"
// (another fault may keep it from biting); one without a prediction stays
// so. A run of one fault gets that fault's prediction.
func Mix(e locker.Entry, faults []string) locker.Prediction {
	if len(faults) == 1 {
		return Predict(e, faults[0])
	}
	out := Predict(e, contract.FaultNone)
	for _, f := range faults {
		p := Predict(e, f)
		for _, id := range contract.PropertyIDs() {
			switch w, have := p.Want(id), out.Want(id); {
			case w == contract.WantOK || have == contract.WantAny:
			case w == contract.WantAny:
				out.Set(contract.WantAny, id)
			default:
				out.Set(contract.WantMay, id)
			}
		}
		if p.Why != "" {
			out.Because(p.Why)
		}
	}
	return out
}
