package checker

import (
	"context"
	"testing"
)

// TestMaximalKeepsToBudget: the starts a chunk ends in are pruned by
// comparing the starts of one state only, and a spent budget stops the
// pruning (the caller reports unknown): before, every pair was compared
// whatever the budget, and a read-write lock's chunk that ended in 223k
// starts ran for minutes past a 3-second check budget.
func TestMaximalKeepsToBudget(t *testing.T) {
	var ends []start
	for i := range 6000 {
		ends = append(ends, start{st: state{now: int64(i % 3)}, floating: []int{i}})
	}
	ends = append(ends, start{st: state{now: 1}, floating: []int{1}}) // a duplicate of ends[1]
	if got := maximal(context.Background(), ends); len(got) != len(ends)-1 {
		t.Errorf("kept %d of %d starts, want all but the duplicate", len(got), len(ends))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := maximal(ctx, ends); len(got) >= len(ends)-1 {
		t.Errorf("kept %d of %d starts with the budget spent: the pruning went on past it", len(got), len(ends))
	}
	// Dominance: a start whose floating ops are a strict subset of another
	// start's of the same state goes; of another state it stays.
	got := maximal(context.Background(), []start{
		{st: state{now: 1}, floating: []int{1}},
		{st: state{now: 1}, floating: []int{1, 2}},
		{st: state{now: 2}, floating: []int{1}},
	})
	if len(got) != 2 || len(got[0].floating) != 2 || got[1].st.now != 2 {
		t.Errorf("maximal kept %+v, want the second and the third", got)
	}
}
