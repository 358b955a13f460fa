package checker

import (
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// Of pairs each contract property ID with its field of Result, the one
// place where the two meet.
func TestResultOf(t *testing.T) {
	var r Result
	want := map[string]*PropertyResult{contract.PropLease: &r.Lease, contract.PropResource: &r.Resource, contract.PropLiveness: &r.Liveness}
	for _, id := range contract.PropertyIDs() {
		if r.Of(id) != want[id] {
			t.Errorf("Of(%q) is not its field", id)
		}
	}
	if len(want) != len(contract.PropertyIDs()) {
		t.Errorf("contract lists %d properties; Result has %d", len(contract.PropertyIDs()), len(want))
	}
	if r.Of("nope") != nil {
		t.Error("Of(nope) names a property")
	}
}
