package runner

import (
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// TestProgressLineSaysTheStalls: the CLI's line of a row whose verdict a
// stall excused says so, with the stall's length; a row without stalls
// says nothing of them.
func TestProgressLineSaysTheStalls(t *testing.T) {
	row := &contract.Row{Lock: "fenced", Fault: contract.FaultCrowd, Seed: 1, Verdicts: contract.Verdicts{}, AsExpected: true}
	if l := progressLine(1, 1, row); strings.Contains(l, "stall") {
		t.Errorf("%q speaks of stalls, none seen", l)
	}
	row.Stalls = &contract.Stalls{Count: 3, LongestMs: 140, Excused: []contract.StallExcuse{{Property: contract.PropFairness, StallMs: 140}}}
	if l := progressLine(1, 1, row); !strings.Contains(l, "(stalls 3, longest 140ms; fairness excused by a stall of 140ms)") {
		t.Errorf("%q, want the stalls and what they excused", l)
	}
}
