package judge

import (
	"slices"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// TestSeedAndRow: a seed judged alone (the simulation's) is not failed
// for a must-break property it missed, nor for a fault that refused no
// stale op; a matrix row is, until its cell finds the break elsewhere.
// Both judge a verdict the prediction forbids and an unexcused violation
// alike.
func TestSeedAndRow(t *testing.T) {
	exp := locker.AllHold()
	exp.Set(contract.WantViolated, contract.PropResource)
	exp.Rejected = true
	row := func() *contract.Row {
		return &contract.Row{Verdicts: contract.Verdicts{contract.PropLease: contract.Violated, contract.PropResource: contract.OK},
			Unexcused: []string{"liveness violated outside every window that excuses it (x, lines 1; windows: failover)"}}
	}
	kinds := func(r *contract.Row) []string {
		var ks []string
		for _, m := range r.MismatchDetails {
			ks = append(ks, m.Kind+" "+m.Property)
		}
		return ks
	}
	m, s := row(), row()
	Row(exp, m)
	Seed(exp, s)
	if want := []string{"verdict lease", "verdict resource", "unexcused liveness", "no-bite "}; !slices.Equal(kinds(m), want) {
		t.Errorf("Row: %v; want %v", kinds(m), want)
	}
	if want := []string{"verdict lease", "unexcused liveness"}; !slices.Equal(kinds(s), want) {
		t.Errorf("Seed: %v; want %v", kinds(s), want)
	}
	if m.AsExpected || s.AsExpected {
		t.Errorf("as expected: row %v, seed %v; want neither", m.AsExpected, s.AsExpected)
	}
}

// TestRecorded: the prediction a row records reads back what Record
// wrote, but for the fault's bite and the why.
func TestRecorded(t *testing.T) {
	exp := locker.AllHold()
	exp.Set(contract.WantViolated, contract.PropResource)
	exp.Set(contract.WantMay, contract.PropLease)
	exp.Set(contract.WantAny, contract.PropCalls)
	var r contract.Row
	Record(&r, exp)
	got := Recorded(&r)
	for _, p := range contract.PropertyIDs() {
		if got.Want(p) != exp.Want(p) {
			t.Errorf("%s: recorded %s, predicted %s", p, got.Want(p), exp.Want(p))
		}
	}
}
