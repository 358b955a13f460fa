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

// TestALongLineStaysOutOfPorcupinesCache: a line of 32 waiters 60k ops long
// is one chunk of 40k lease ops (no quiescent point). Porcupine's cache
// keeps a bitset of the whole chunk per node, so asking it first ran the
// heap up by gigabytes; the exact search decides the line within a heap
// budget of 1 GiB (it peaks near 150 MiB).
func TestALongLineStaysOutOfPorcupinesCache(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60k-op history")
	}
	r, err := Check(context.Background(), crowdedHistory(60_000, 32, false), Options{Timeout: 5 * time.Minute, MaxHeap: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if lease := r.Of(contract.PropLease); r.Verdict != contract.OK {
		t.Errorf("a 60k-op line: %s, lease %s (%s); want ok within the heap budget", r.Verdict, lease.Verdict, lease.Explanation)
	}
}

// TestPendingOpsAtScale: the crashed-clients shape at scale (20k ops, 400
// clients that crashed in a section, an acquire and a write each that never
// returned) gets the verdicts it was built with: the clean history holds,
// and each spoilt twin breaks the property its end breaks, with the lease or
// the resource decided (not unknown).
func TestPendingOpsAtScale(t *testing.T) {
	for _, c := range []struct{ end, prop string }{{"", ""}, {"mutual-exclusion", contract.PropLease}, {"stale-read", contract.PropResource}} {
		r, err := Check(context.Background(), crashedHistory(20_000, 400, c.end), Options{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{contract.PropLease, contract.PropResource} {
			want := contract.OK
			if p == c.prop {
				want = contract.Violated
			}
			if got := r.Of(p); got.Verdict != want {
				t.Errorf("%q end: %s %s (%s); want %s", c.end, p, got.Verdict, got.Explanation, want)
			}
		}
	}
}
