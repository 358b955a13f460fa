// Package judge is lockproof's judging layer: everything that decides
// whether a run came out "as predicted", below the matrix (runner) and the
// simulation (sim), which judge alike through it.
//
//   - predict.go: what a lock is predicted to do under a fault (Predict,
//     PredictOn: its profile's prediction amended by its own
//     locker.Entry), where a fault strikes it (PointOf), its decisive
//     scenario (DecisiveOf), and the detection rate a must-break
//     promises (Promise);
//   - profiles.go: the profiles' predictions, a table of rows keyed by
//     profile and fault trait (contract.FaultTraits) that Predict reads;
//   - row.go: the checker's options and the waiters' bound a lock's entry
//     states (CheckOptions, WaitTimeout), a row and a cell judged against
//     the prediction (Row, Cells), a swarm's merged prediction (Mix);
//   - judge.go: which fault windows excuse a violation (Unexcused), and
//     what the stalls the harness observed excused (NoteStalls).
//
// One word for the concept: a prediction (locker.Prediction).
//
// Unexcused decides whether a run's violations are the ones its
// faults excuse. A prediction says which properties a fault may break; a
// run of several faults (a swarm seed) allows a break when any of them
// does. That alone let a lease break with nothing to do with a failover
// pass as predicted in every seed whose mix held one. Here a violation of
// a property is excused only by a window of a fault whose own prediction
// allows the break, when one of the violation's witnesses (the ops the
// checker names) overlaps that window or follows it within the bound the
// contract states (contract.ExcuseAfter). The matrix and the simulation
// judge alike.
package judge

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// Windows are a run's fault windows, in the history's time.
type Windows []Window

// Window is one fault window: its kind (contract.FaultKind of the op's
// name) and span; an open window (never closed) lasts to the history's
// end.
type Window struct {
	Kind       string
	Start, End int64
}

// WindowsOf returns the fault windows of ops.
func WindowsOf(ops []history.Op) Windows {
	var ws Windows
	end := int64(0)
	for _, o := range ops {
		end = max(end, o.Call, o.Return)
	}
	for _, o := range ops {
		if o.Kind != history.Fault {
			continue
		}
		w := Window{Kind: contract.FaultKind(o.Name), Start: o.Call, End: end}
		if o.Completed {
			w.End = o.Return
		}
		ws = append(ws, w)
	}
	return ws
}

// Bounds are what Unexcused needs besides the verdicts: the lease TTL of
// the run and the skew of a failover-skew's replica (contract.ExcuseAfter).
type Bounds struct {
	TTL, Skew time.Duration
}

// Unexcused lists each property that res found violated, that the run's
// prediction allows to break (may, or violated), and of whose violations
// none lies within a window that excuses it: one line each, naming the
// property, the first violation's rule and history lines. predict is the
// lock's prediction under one fault kind. Only the violations res lists
// are judged (checker.MaxViolations per property). A property the lock may
// break with no fault (predict(contract.FaultNone)) is excused anywhere. A
// property with no window of a fault that may break it at
// all is left to the prediction's own verdict: Unexcused says nothing of
// it.
func Unexcused(res *checker.Result, ws Windows, predict func(kind string) locker.Prediction, b Bounds) []string {
	if res == nil {
		return nil
	}
	var out []string
	// A break the lock's prediction allows with no fault at all (a known
	// defect of a frozen copy, say) needs no window.
	base := predict(contract.FaultNone)
	for _, pr := range res.Props {
		if pr.Verdict != contract.Violated || base.Want(pr.ID) != contract.WantOK {
			continue
		}
		var excusing Windows
		for _, w := range ws {
			// A stall excuses what a pause of its clients may cause.
			switch predict(contract.ExcusesAs(w.Kind)).Want(pr.ID) {
			case contract.WantMay, contract.WantViolated:
				excusing = append(excusing, w)
			case contract.WantAny:
				// No prediction: anything may happen, anywhere.
				excusing = append(excusing, Window{Kind: w.Kind, Start: 0, End: 1<<63 - 1})
			}
		}
		if len(excusing) == 0 {
			continue
		}
		// One violation near a window that may cause it excuses the
		// property: the others may be the checker's explanation of the
		// same break, which it places where the search failed, not where
		// the fault struck (a failover-skew's fences going back made the
		// search blame two leases long before it).
		if !slices.ContainsFunc(pr.Violations, func(v checker.Violation) bool { return excused(v, pr.ID, excusing, b) }) && len(pr.Violations) > 0 {
			v := pr.Violations[0]
			out = append(out, fmt.Sprintf("%s violated outside every window that excuses it (%s, lines %s; windows: %s)",
				pr.ID, v.Rule, lines(v.Lines), excusing.describe()))
		}
	}
	return out
}

// excused reports whether violation v of property prop has a witness in
// one of ws or within its bound after it.
func excused(v checker.Violation, prop string, ws Windows, b Bounds) bool {
	if len(v.Ops) == 0 {
		return true // nothing to place in time: the prediction's verdict stands
	}
	for _, w := range ws {
		end := w.End
		if d := contract.ExcuseAfter(w.Kind, prop, b.TTL, b.Skew); d < 0 {
			end = 1<<63 - 1
		} else {
			end = satAdd(end, int64(d))
		}
		for _, o := range v.Ops {
			ret := int64(1<<63 - 1) // pending: to the end
			if o.Return != nil {
				ret = *o.Return
			}
			if o.Call <= end && ret >= w.Start {
				return true
			}
		}
	}
	return false
}

func satAdd(a, b int64) int64 {
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}

func lines(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, ",")
}

// describe names the windows' kinds, each once.
func (ws Windows) describe() string {
	var kinds []string
	for _, w := range ws {
		if !slices.Contains(kinds, w.Kind) {
			kinds = append(kinds, w.Kind)
		}
	}
	return strings.Join(kinds, ", ")
}

// NoteStalls records on row the stalls its history shows (contract.FaultStall
// windows: a process of the run that did not run for a while) and the
// verdicts they excused (contract.Row.Stalls; nil when there were none):
//   - a property the checker found holding only because a stall's window
//     excused what it would have found (checker.PropertyResult.StallLines:
//     a late or overtaken waiter, a late return);
//   - a property res found violated that exp, the run's prediction, says
//     holds, but that a pause of the stalled clients may break
//     (predict(contract.FaultPauseClient)), with a violation within a
//     stall's reach (contract.ExcuseAfter, as Unexcused reads it): the row
//     is as predicted (judgeRow drops its verdict mismatch).
//
// predict is the lock's prediction under one fault kind, as Unexcused's.
func NoteStalls(row *contract.Row, res *checker.Result, ops []history.Op, exp locker.Prediction, predict func(kind string) locker.Prediction, b Bounds) {
	row.Stalls = nil
	var stalls Windows
	for _, w := range WindowsOf(ops) {
		if w.Kind == contract.FaultStall {
			stalls = append(stalls, w)
		}
	}
	if len(stalls) == 0 {
		return
	}
	st := &contract.Stalls{Count: len(stalls)}
	for _, w := range stalls {
		st.LongestMs = max(st.LongestMs, time.Duration(w.End-w.Start).Milliseconds())
	}
	if res != nil {
		pause := predict(contract.FaultPauseClient)
		for _, pr := range res.Props {
			ms := pr.StallExcusedMs
			if pr.Verdict == contract.Violated && exp.Want(pr.ID) == contract.WantOK {
				switch pause.Want(pr.ID) {
				case contract.WantMay, contract.WantViolated, contract.WantAny:
					for _, w := range stalls {
						if slices.ContainsFunc(pr.Violations, func(v checker.Violation) bool { return excused(v, pr.ID, Windows{w}, b) }) {
							ms = max(ms, time.Duration(w.End-w.Start).Milliseconds())
						}
					}
				}
			}
			if ms > 0 {
				st.Excused = append(st.Excused, contract.StallExcuse{Property: pr.ID, StallMs: ms})
			}
		}
	}
	row.Stalls = st
}
