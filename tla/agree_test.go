package tla

import (
	"errors"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// TestDisagreement: the agreement of the model's verdict with the
// checker's, case by case (tla/README.md, "Model and checker").
func TestDisagreement(t *testing.T) {
	const (
		ok  = contract.OK
		bad = contract.Violated
		unk = contract.Unknown
		na  = contract.NA
	)
	accepted, rejected := Result{Accepted: true}, Result{Line: 7}
	windowed := func(r Result) Result { r.Windowed = true; return r }
	bounded := func(r Result) Result { r.Bounded = true; return r }
	said := func(r Result) Result { r.Said = true; return r }
	for _, tc := range []struct {
		name            string
		r               Result
		lease, resource contract.Verdict
		disagree        bool
	}{
		{"both pass", accepted, ok, ok, false},
		{"both pass, nothing on the resource", accepted, ok, na, false},
		{"both refuse the lease", rejected, bad, ok, false},
		{"both refuse the resource", rejected, ok, bad, false},
		{"accepted a resource violation", accepted, ok, bad, true},
		{"accepted a resource violation in a window", windowed(accepted), bad, bad, true},
		{"accepted a lease violation", accepted, bad, ok, true},
		{"accepted a lease violation in a failover window", windowed(accepted), bad, ok, false},
		{"rejected what the checker passes", rejected, ok, ok, true},
		{"rejected what the checker passes, in a window", windowed(rejected), ok, na, true},
		{"rejected a bounded trace the checker passes", bounded(rejected), ok, ok, false},
		{"rejected at what the lock said, which the checker passes", said(rejected), ok, ok, false},
		{"accepted what the lock said, which the checker refuses", accepted, bad, na, true},
		{"checker unknown on the lease", rejected, unk, ok, false},
		{"checker unknown on the resource", accepted, bad, unk, false},
	} {
		err := tc.r.Disagreement(tc.lease, tc.resource)
		if (err != nil) != tc.disagree || err != nil && !errors.Is(err, ErrDisagree) {
			t.Errorf("%s: %v; want disagreement %v", tc.name, err, tc.disagree)
		}
	}
}
