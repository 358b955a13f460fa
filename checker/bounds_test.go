package checker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// manyKeyOps is a history of n keys, each with one ok acquire and its
// release.
func manyKeyOps(n int) []history.Op {
	ops := make([]history.Op, 0, 2*n)
	for i := range n {
		key, at := fmt.Sprintf("k%06d", i), float64(10*i)
		ops = append(ops,
			mk(history.Acquire, "c", key, at, at+1, ok, ttl(5), tok(uint64(i+1))),
			mk(history.Release, "c", key, at+2, at+3, ok, tok(uint64(i+1))))
	}
	return lined(ops...)
}

// TestUndecidedIsBounded: a check stopped before it decided any key lists
// MaxUndecided keys per property, the first in key order, and counts them
// all; its explanation says how many more. Before, it listed every key
// (a million on a history of a million keys, in check.json and on
// stderr).
func TestUndecidedIsBounded(t *testing.T) {
	const keys = 1000
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Check(ctx, manyKeyOps(keys), Options{})
	if err != nil {
		t.Fatal(err)
	}
	lease := r.Of(contract.PropLease)
	if r.Verdict != contract.Unknown || lease.Verdict != contract.Unknown {
		t.Fatalf("verdict %s, lease %s; want unknown", r.Verdict, lease.Verdict)
	}
	if lease.UndecidedCount != keys || len(lease.Undecided) != MaxUndecided || lease.Undecided[0].Key != "k000000" {
		t.Fatalf("lease: %d undecided, %d listed, from %+v; want %d, %d, from k000000", lease.UndecidedCount, len(lease.Undecided), lease.Undecided[:min(1, len(lease.Undecided))], keys, MaxUndecided)
	}
	if more := fmt.Sprintf("; and %d more keys", keys-MaxUndecided); !strings.HasSuffix(lease.Explanation, more) {
		t.Errorf("lease explanation %.200q... does not end with %q", lease.Explanation, more)
	}
}

// TestBudgetStopsEveryKey: keys the budget and its grace (stopGrace) did
// not reach are not checked at all: unknown on every property, even those
// with nothing to check on the keys reached (here the resource has no op).
// Before, every key's direct rules ran however long past the budget.
func TestBudgetStopsEveryKey(t *testing.T) {
	ops := manyKeyOps(100_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	r, err := Check(ctx, ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// Past the grace, the keys are not checked, or not even prepared.
	res := r.Of(contract.PropResource)
	if res.Verdict != contract.Unknown || !strings.Contains(res.Explanation, "not checked") {
		t.Fatalf("resource %s (%.200q); want unknown, the keys past the grace not checked", res.Verdict, res.Explanation)
	}
	if took > 10*stopGrace {
		t.Errorf("a cancelled check took %v (grace %v)", took, stopGrace)
	}
}
