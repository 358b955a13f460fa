package checker

import (
	"testing"

	"github.com/lockproof/lockproof/history"
)

// TestReplayGivesUpPastItsLimit: an acquire of unknown outcome leads a
// replayed state two ways (it took effect, or not); an explanation's
// replay keeps at most its limit of states and says when it would have
// kept more (explain then gives the generic explanation: a history with
// hundreds of such ops replayed for minutes past the check's budget).
func TestReplayGivesUpPastItsLimit(t *testing.T) {
	o := &lop{kind: history.Acquire, result: history.Unknown, client: 1, call: 0, ret: 10, upto: 10,
		validFor: 1000, expireFor: 1001, token: 5, hasToken: true}
	rs := []replayed{{}}
	all, ok := stepAtMost(rs, o, 0)
	if !ok || len(all) < 2 {
		t.Fatalf("no limit: %d states, ok %v; want both outcomes of the unknown acquire", len(all), ok)
	}
	if got, ok := stepAtMost(rs, o, len(all)); !ok || len(got) != len(all) {
		t.Errorf("limit %d: %d states, ok %v; want all of them", len(all), len(got), ok)
	}
	if got, ok := stepAtMost(rs, o, len(all)-1); ok || len(got) > len(all)-1 {
		t.Errorf("limit %d: %d states, ok %v; want it to give up", len(all)-1, len(got), ok)
	}
	if again := step(append(rs, rs...), o); len(again) != len(all) {
		t.Errorf("a state replayed twice gives %d states; want %d (each once)", len(again), len(all))
	}
}
