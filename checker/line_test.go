package checker

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
)

// TestACrowdedLineIsDecided: 32 waiters in line on one key, each waiting
// about a TTL (so that at every hand-off the previous holder's lease, counted
// from its call, may have expired) and every tenth release of unknown
// outcome: decided, clean and with a stale read. Before
// the search ranked ok acquires by token, 200 such ops ran out of a 10 s
// budget.
func TestACrowdedLineIsDecided(t *testing.T) {
	for _, bad := range []bool{false, true} {
		ops := crowdedHistory(600, 32, bad)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := Check(ctx, ops, Options{Timeout: 20 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		lease := r.Of(contract.PropLease)
		if !bad && (r.Verdict != contract.OK || lease.Verdict != contract.OK) {
			t.Errorf("clean line: %s, lease %s (%s); want ok", r.Verdict, lease.Verdict, lease.Explanation)
		}
		if bad && (r.Verdict != contract.Violated || lease.Verdict == contract.Unknown) {
			t.Errorf("line with a stale read: %s, lease %s (%s); want violated, the lease decided", r.Verdict, lease.Verdict, lease.Explanation)
		}
	}
}
