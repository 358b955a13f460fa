package checker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestStallExcusesAnOvertakenWaiter: a waiter overtaken while its process
// stalled (a contract.FaultStall window the workload measured) is
// excused, as under a pause of that client, and the property's result
// names the stall; without the stall the same history breaks the fair
// queue; beside an injected fault's window the stall is not what excused
// it.
func TestStallExcusesAnOvertakenWaiter(t *testing.T) {
	overtaken := func(extra ...history.Op) []history.Op {
		return lined(append([]history.Op{
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 600, ok, ttl(1000), waits(), inLine(12)),
			acq("y", 100, 300, ok, ttl(1000), waits()),
			rel("h", 290, 291, ok),
			rel("y", 590, 591, ok),
		}, extra...)...)
	}
	fifo := Options{Fair: true}
	for _, c := range []struct {
		name    string
		ops     []history.Op
		verdict contract.Verdict
		lines   []int
		ms      int64
	}{
		{"no stall", overtaken(), contract.Violated, nil, 0},
		{"a stall of x's process while it waited", overtaken(fault("stall x", 250, 370)), contract.NA, []int{6}, 120},
		{"a stall before the wait", overtaken(fault("stall x", 2, 8)), contract.Violated, nil, 0},
		{"a stall beside a pause: the pause excuses", overtaken(fault("pause-client x", 200, 400), fault("stall x", 250, 370)), contract.NA, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Check(context.Background(), c.ops, fifo)
			if err != nil {
				t.Fatal(err)
			}
			pr := res.Of(contract.PropFairness)
			if pr.Verdict != c.verdict {
				t.Fatalf("fairness %s, want %s (%+v)", pr.Verdict, c.verdict, pr.Violations)
			}
			if !slices.Equal(pr.StallLines, c.lines) || pr.StallExcusedMs != c.ms {
				t.Errorf("stall lines %v (%dms), want %v (%dms)", pr.StallLines, pr.StallExcusedMs, c.lines, c.ms)
			}
			for _, p := range res.Props {
				if p.ID != contract.PropFairness && len(p.StallLines) > 0 {
					t.Errorf("%s names stalls %v: only the fair queue's waiter was late", p.ID, p.StallLines)
				}
			}
		})
	}
}

// TestStallExcusesALateReturnByItsLength: a call back late while its
// process stalled is excused only as far as the stall explains it (twice
// the stalled time within the call, plus stallCatchUp); a call seconds
// late with a short stall inside it is the lock's, as fenced-v2's
// resource call past its ctx is (issue 66: one stall per run under load
// hid it). An injected pause still excuses whatever it overlaps.
func TestStallExcusesALateReturnByItsLength(t *testing.T) {
	slack := Options{CallSlack: 100 * time.Millisecond}
	late := func(ret float64, extra ...history.Op) []history.Op {
		return lined(append([]history.Op{
			acq("a", 0, 1, ok, ttl(1000), due(1000)),
			wr("a", 10, ret, unknown, "x", due(1010)),
		}, extra...)...)
	}
	for _, c := range []struct {
		name    string
		ops     []history.Op
		verdict contract.Verdict
		lines   []int
	}{
		{"2s late, no stall", late(3110), contract.Violated, nil},
		{"2s late, a stall of 60ms inside", late(3110, fault("stall a", 500, 560)), contract.Violated, nil},
		{"100ms late, a stall of 60ms inside", late(1210, fault("stall a", 500, 560)), contract.OK, []int{3}},
		{"2s late, a pause inside", late(3110, fault("pause-client a", 500, 560)), contract.OK, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Check(context.Background(), c.ops, slack)
			if err != nil {
				t.Fatal(err)
			}
			pr := res.Of(contract.PropCalls)
			if pr.Verdict != c.verdict || !slices.Equal(pr.StallLines, c.lines) {
				t.Fatalf("calls %s, stall lines %v; want %s, %v (%+v)", pr.Verdict, pr.StallLines, c.verdict, c.lines, pr.Violations)
			}
		})
	}
}
