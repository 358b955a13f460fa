package checker

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestNotReentrantHolderAcquires: a lock that declares itself not
// reentrant (Options.NotReentrant) has its holder's second ok acquire
// while its lease surely stands judged as a second lease, a
// mutual-exclusion violation; a reentrant lock's is a nested hold.
func TestNotReentrantHolderAcquires(t *testing.T) {
	ops := []history.Op{
		mk(history.Acquire, "c1", "k", 0, 10, ok, ttl(1000), hold(1)),
		mk(history.Acquire, "c1", "k", 20, 30, ok, ttl(1000), hold(2)),
		mk(history.Release, "c1", "k", 40, 50, ok, hold(2)),
		mk(history.Release, "c1", "k", 60, 70, ok, hold(1)),
	}
	for _, tc := range []struct {
		notReentrant bool
		want         contract.Verdict
	}{{false, contract.OK}, {true, contract.Violated}} {
		r, err := Check(context.Background(), ops, Options{NotReentrant: tc.notReentrant, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Of(contract.PropLease).Verdict; got != tc.want {
			t.Errorf("NotReentrant %v: lease %s, want %s", tc.notReentrant, got, tc.want)
		}
	}
}

// TestUnknownAcquiresOfANonReentrantLock: setnx under the reset fault
// (issue 66: the README's matrix, setnx-reset-1, 2026-12-07): 460
// acquires of unknown outcome by two clients whose connections were reset,
// 16 ok ones, no tokens. Each unknown acquire by the holder could have
// been a nested hold to the lease model, and the states it built ran past
// the one-minute budget; setnx refuses its holder's acquire (SETNX finds
// the key), and with NotReentrant the history is decided (ok) in about 2 s
// of an idle core. The budget here is the matrix's minute: this is a
// verdict, not a timing.
func TestUnknownAcquiresOfANonReentrantLock(t *testing.T) {
	if testing.Short() {
		t.Skip("a history of 1,391 ops: the full test command checks it")
	}
	ops, err := history.ReadFile("testdata/setnx-reset-unknown-acquires.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), ops, Options{NotReentrant: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Of(contract.PropLease); got.Verdict != contract.OK {
		t.Fatalf("lease %s (%+v), want ok", got.Verdict, got)
	}
	// check.json records it, so that a check of the file decides alike.
	if !r.Options.NotReentrant {
		t.Errorf("options used %+v: want not_reentrant recorded", r.Options)
	}
}
