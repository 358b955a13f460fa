package judge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// pausePredicts: a pause of a client breaks claims (the woken holder's
// checked write), and nothing else; every other fault (crowd) breaks
// nothing.
func pausePredicts(kind string) locker.Prediction {
	p := locker.AllHold()
	if kind == contract.FaultPauseClient {
		p.Set(contract.WantViolated, contract.PropClaims)
	}
	return p
}

// judged checks ops as a fair lock's crowd row and judges the row as the
// matrix does (runner: Unexcused, NoteStalls, Row).
func judged(t *testing.T, ops []history.Op) *contract.Row {
	t.Helper()
	res, err := checker.Check(context.Background(), ops, checker.Options{Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	return judgeResult(res, ops)
}

func judgeResult(res *checker.Result, ops []history.Op) *contract.Row {
	exp := pausePredicts(contract.FaultCrowd)
	row := &contract.Row{Verdicts: contract.Verdicts{}}
	Record(row, exp)
	for _, p := range res.Props {
		row.Verdicts[p.ID] = p.Verdict
	}
	b := Bounds{TTL: 500 * time.Millisecond}
	row.Unexcused = Unexcused(res, WindowsOf(ops), pausePredicts, b)
	NoteStalls(row, res, ops, exp, pausePredicts, b)
	Row(exp, row)
	return row
}

// overtaken is a fair queue's history: x waits in line from 12ms, y
// joins later and is served first at 300ms; extra ops follow.
func overtaken(extra ...history.Op) []history.Op {
	ret := func(o history.Op, call, r int64) history.Op {
		o.Call, o.Return, o.Completed = ms(call), ms(r), true
		return o
	}
	acq := history.Op{Kind: history.Acquire, Key: "k", Result: history.OK, TTLMillis: 1000}
	h, x, y := acq, acq, acq
	h.Client, x.Client, y.Client = "h", "x", "y"
	x.Wait, y.Wait = true, true
	x.InLine, x.HasInLine = ms(12), true
	rel := history.Op{Kind: history.Release, Key: "k", Result: history.OK}
	rh, ry := rel, rel
	rh.Client, ry.Client = "h", "y"
	ops := append([]history.Op{ret(h, 0, 1), ret(x, 10, 600), ret(y, 100, 300), ret(rh, 290, 291), ret(ry, 590, 591)}, extra...)
	for i := range ops {
		ops[i].Line = i + 1
	}
	return ops
}

func stall(client string, from, to int64) history.Op {
	return history.Op{Kind: history.Fault, Name: contract.FaultStall + " " + client, Call: ms(from), Return: ms(to), Completed: true}
}

// TestStallExcusesAFairnessBreak: issue 66's test. A waiter overtaken
// while its process stalled is excused, as a pause of it would be, and
// the row says so with the stall's length; the same history without the
// stall is not as predicted.
func TestStallExcusesAFairnessBreak(t *testing.T) {
	without := judged(t, overtaken())
	if without.AsExpected || without.Verdict(contract.PropFairness) != contract.Violated {
		t.Fatalf("without the stall: fairness %s, as expected %v; want violated, not as expected", without.Verdict(contract.PropFairness), without.AsExpected)
	}
	if without.Stalls != nil {
		t.Errorf("without the stall: stalls %+v, want none", without.Stalls)
	}
	with := judged(t, overtaken(stall("x", 250, 370)))
	if !with.AsExpected {
		t.Fatalf("with the stall: mismatches %q, want as expected", with.Mismatches)
	}
	want := contract.Stalls{Count: 1, LongestMs: 120, Excused: []contract.StallExcuse{{Property: contract.PropFairness, StallMs: 120}}}
	if with.Stalls == nil || with.Stalls.Count != want.Count || with.Stalls.LongestMs != want.LongestMs ||
		len(with.Stalls.Excused) != 1 || with.Stalls.Excused[0] != want.Excused[0] {
		t.Fatalf("stalls %+v, want %+v", with.Stalls, want)
	}
	if n := with.Stalls.Note(); !strings.Contains(n, "fairness excused by a stall of 120ms") {
		t.Errorf("note %q", n)
	}
	// A stall long before the wait excuses nothing, and says so.
	early := judged(t, overtaken(stall("x", 2, 8)))
	if early.AsExpected || early.Stalls == nil || len(early.Stalls.Excused) != 0 {
		t.Errorf("an early stall: as expected %v, stalls %+v; want not as expected, nothing excused", early.AsExpected, early.Stalls)
	}
}

// TestStallExcusesWhatAPauseMayCause: a break the run's prediction rules
// out but a pause may cause (claims) is excused near a stall, within a
// pause's reach (4 TTLs), and not beyond; a break no pause causes (the
// lease) is excused by no stall.
func TestStallExcusesWhatAPauseMayCause(t *testing.T) {
	for _, c := range []struct {
		name    string
		prop    string
		from    int64
		excused bool
	}{
		{"claims during the stall", contract.PropClaims, 1100, true},
		{"claims within 4 TTLs after it", contract.PropClaims, 3000, true},
		{"claims past 4 TTLs after it", contract.PropClaims, 3300, false},
		{"the lease during the stall", contract.PropLease, 1100, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops := []history.Op{stall("c0-1 c0-2", 1000, 1200)}
			row := judgeResult(violated(c.prop, c.from, c.from+50), ops)
			if row.AsExpected != c.excused {
				t.Fatalf("as expected %v (mismatches %q), want %v", row.AsExpected, row.Mismatches, c.excused)
			}
			if got := row.Stalls != nil && len(row.Stalls.Excused) == 1 && row.Stalls.Excused[0].StallMs == 200; got != c.excused {
				t.Errorf("stalls %+v, want excused %v", row.Stalls, c.excused)
			}
		})
	}
}
