package checker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// holdOp is an acquire of client 1 naming hold n (0: none), of unknown
// outcome when phantom.
func holdOp(n uint64, phantom bool) *lop {
	o := &lop{kind: history.Acquire, client: 1, result: history.OK, hold: n}
	if phantom {
		o.result = history.Unknown
	}
	return o
}

// numbers lists s's numbered holds, a phantom one as its negative.
func numbers(s state) []int {
	var out []int
	for i, l := range s.leases[:s.nLeases] {
		if s.phantomAt(i) {
			out = append(out, -int(l))
		} else {
			out = append(out, int(l))
		}
	}
	return out
}

// TestHoldSet: a state keeps its numbered holds as a set (sorted, each
// with its phantom bit), so that the same holds taken in another order
// are the same state (the searches' memo and Porcupine's dedup rely on
// it), and ending one keeps the others' bits.
func TestHoldSet(t *testing.T) {
	s := state{holder: 1}
	for _, o := range []*lop{holdOp(5, false), holdOp(2, true), holdOp(9, false), holdOp(0, true), holdOp(7, true)} {
		s = addHold(s, o)
	}
	if got, want := numbers(s), []int{-2, 5, -7, 9}; !slices.Equal(got, want) || s.holds != 5 || s.phantoms != 3 {
		t.Fatalf("holds %v (%d, %d phantoms); want %v (5, 3 phantoms)", got, s.holds, s.phantoms, want)
	}
	r := state{holder: 1}
	for _, o := range []*lop{holdOp(0, true), holdOp(7, true), holdOp(9, false), holdOp(2, true), holdOp(5, false)} {
		r = addHold(r, o)
	}
	if r != s {
		t.Errorf("the same holds in another order: %+v, want %+v", r, s)
	}
	n := endLease(s, 1) // hold 5
	if got, want := numbers(n), []int{-2, -7, 9}; !slices.Equal(got, want) || n.holds != 4 || n.phantoms != 3 {
		t.Errorf("hold 5 ended: %v (%d, %d phantoms); want %v (4, 3 phantoms)", got, n.holds, n.phantoms, want)
	}
	n = endLease(n, 1) // hold 7, a phantom
	if got, want := numbers(n), []int{-2, 9}; !slices.Equal(got, want) || n.holds != 3 || n.phantoms != 2 {
		t.Errorf("hold 7 ended: %v (%d, %d phantoms); want %v (3, 2 phantoms)", got, n.holds, n.phantoms, want)
	}
	last := endLease(addHold(state{holder: 1, hasHolderTok: true, holderTok: 3, hasLastTok: true, lastTok: 3}, holdOp(4, false)), 0)
	if last != (state{hasLastTok: true, lastTok: 3}) {
		t.Errorf("the last hold ended: %+v; want the key free, the fence kept", last)
	}
}

// TestHoldSetOverflow: past maxLeases numbered holds, a state reads
// every hold by count until the key is free (lenient, never a refusal).
func TestHoldSetOverflow(t *testing.T) {
	s := state{holder: 1}
	for n := range uint64(maxLeases + 1) {
		s = addHold(s, holdOp(n+1, false))
	}
	if !s.untracked || s.nLeases != 0 || s.holds != maxLeases+1 {
		t.Fatalf("%d numbered holds: %+v; want untracked, %d holds by count", maxLeases+1, s, maxLeases+1)
	}
	rel := &lop{kind: history.Release, client: 1, result: history.OK, hold: 1, upto: inf, expireFor: inf}
	s.expiredAfter = inf
	n, r := apply(s, rel)
	if r != rOK || n.holds != maxLeases {
		t.Errorf("a release of hold 1, read by count: %v, %d holds; want ok, %d", r, n.holds, maxLeases)
	}
	if n, _ = apply(n, rel); n.holds != maxLeases-1 {
		t.Errorf("hold 1 released again, read by count: %d holds; want %d", n.holds, maxLeases-1)
	}
}

// TestCountEnds: a release that names no hold ends a known hold, numbered
// or not, while there is one (the trace spec's Ended), and any hold when
// every one is a phantom.
func TestCountEnds(t *testing.T) {
	s := state{holder: 1}
	for _, o := range []*lop{holdOp(1, false), holdOp(0, false), holdOp(0, true), holdOp(2, true), holdOp(3, false)} {
		s = addHold(s, o)
	}
	var ends []state
	countEnds(s, func(n state) bool { ends = append(ends, n); return true })
	var got [][]int
	for _, n := range ends {
		if n.holds != 4 {
			t.Errorf("%+v: %d holds; want 4", n, n.holds)
		}
		got = append(got, numbers(n))
	}
	// A plain known hold first; then numbered known holds 1 and 3, never
	// the phantom 2.
	want := [][]int{{1, -2, 3}, {-2, 3}, {1, -2}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("a release by count leaves %v; want %v", got, want)
	}
	if ends[0].phantoms != 2 {
		t.Errorf("the plain hold ended was a phantom: %d phantoms left; want 2", ends[0].phantoms)
	}
	all := state{holder: 1}
	for _, o := range []*lop{holdOp(0, true), holdOp(4, true)} {
		all = addHold(all, o)
	}
	ends = nil
	countEnds(all, func(n state) bool { ends = append(ends, n); return true })
	if len(ends) != 2 {
		t.Errorf("every hold a phantom: %d ends; want 2 (either)", len(ends))
	}
	if vs := vanishes(all, nil); len(vs) != 2 || len(bases(all)) != 4 {
		t.Errorf("two phantoms: %d taken back, %d bases; want 2 and 4 (neither, either, both)", len(vs), len(bases(all)))
	}
}

// TestUnreleasedNumbersAreCounted: the phantom holds of acquires of
// unknown outcome whose numbers no other op names are read by count
// (numberHolds), so that the search does not tell them apart: numbered,
// every subset of them taken back unseen was a state of its own (getset
// × reset, 88 unknown acquires: out of budget where the count passed in a
// second). Here 30 of them stack on a's lease; a's release and b's
// acquire need them all taken back.
func TestUnreleasedNumbersAreCounted(t *testing.T) {
	ops := []history.Op{acq("a", 0, 1, ok, ttl(100000), hold(1))}
	for i := range 30 {
		ops = append(ops, acq("a", float64(10+10*i), float64(11+10*i), unknown, ttl(100000), hold(uint64(2+i))))
	}
	ops = append(ops,
		rel("a", 1000, 1001, ok, hold(1)),
		acq("b", 1010, 1011, ok, ttl(1000), hold(1)),
		rel("b", 1020, 1021, ok, hold(1)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := Check(ctx, lined(ops...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Of(contract.PropLease).Verdict; v != contract.OK {
		t.Fatalf("lease %s (%s); want ok", v, r.Of(contract.PropLease).Explanation)
	}
}
