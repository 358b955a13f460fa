package checker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestSharedModel: the lease model of modes (applyShared) on keys whose
// lease ops carry a mode: what only an order of the ops can show (a
// release or renewal of a hold its client no longer held, a token that
// went backwards, a writer admitted while a reader's release may not have
// landed yet is fine), and the orders it must find.
func TestSharedModel(t *testing.T) {
	na := contract.NA
	okAll := want{lease: contract.OK, resource: na, liveness: na}
	bad := func(rule string, lines ...int) want {
		return want{lease: contract.Violated, resource: na, liveness: na, prop: contract.PropLeaseName, rule: rule, lines: lines}
	}
	runRuleCases(t, []ruleCase{
		{"a writer admitted while the reader's release was under way", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			rel("a", 100, 200, ok, tok(1), hold(1), reading()),
			acq("b", 150, 160, ok, ttl(1000), tok(2), hold(1), writing()),
		), Options{}, okAll},
		{"a writer admitted before the reader's release was called", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			acq("b", 50, 60, ok, ttl(1000), tok(2), hold(1), writing()),
			rel("a", 100, 200, ok, tok(1), hold(1), reading()),
		), Options{}, bad(RuleRWExclusion, 1, 2)},
		{"a read hold released twice", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			rel("a", 2, 3, ok, tok(1), hold(1), reading()),
			rel("a", 4, 5, ok, tok(1), hold(1), reading()),
		), Options{}, bad(RuleNotOwner, 2, 3)},
		{"a read hold renewed after it surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), reading()),
			renew("a", 500, 501, ok, ttl(100), tok(1), hold(1), reading()),
		), Options{}, bad(RuleNotOwner, 1, 2)},
		{"nested reads released by count, in any order", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), reading()),
			acq("a", 2, 3, ok, ttl(200), tok(1), reading()),
			rel("a", 4, 5, ok, tok(1), reading()),
			rel("a", 6, 7, ok, tok(1), reading()),
			acq("b", 8, 9, ok, ttl(1000), tok(2), writing()),
		), Options{}, okAll},
		{"a release of a hold its client never took", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(1, 3)),
			rel("b", 2, 3, ok, tok(5), hold(1), permits(1, 0)),
		), Options{}, bad(RuleNotOwner, 1, 2)},
		{"permits taken back by their holders before the next", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(2, 3)),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), permits(1, 3)),
			rel("a", 10, 20, ok, tok(1), hold(1), permits(2, 0)),
			acq("c", 15, 25, ok, ttl(1000), tok(3), hold(1), permits(2, 3)),
		), Options{}, okAll},
		{"permits over the capacity in every order", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(2, 3)),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), permits(1, 3)),
			acq("c", 15, 25, ok, ttl(1000), tok(3), hold(1), permits(2, 3)),
			rel("a", 30, 40, ok, tok(1), hold(1), permits(2, 0)),
		), Options{}, bad(RulePermits, 1, 2, 3)},
		{"a writer's token below an earlier writer's", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(5), hold(1), writing()),
			rel("a", 2, 3, ok, tok(5), hold(1), writing()),
			acq("b", 4, 5, ok, ttl(1000), tok(4), hold(1), writing()),
		), Options{}, bad(RuleTokenOrder, 1, 3)},
		{"an acquire of unknown outcome blocks nobody", lined(
			acq("a", 0, 1, unknown, ttl(1000), hold(1), writing()),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), writing()),
			rel("b", 4, 5, ok, tok(2), hold(1), writing()),
		), Options{}, okAll},
	})
}

// TestSharedModelReview: what a review of the lease model of modes found
// (2026-12-07, against ff93e8c): a release of a hold that a conflicting
// grant to another client proved gone passed (the hold kept its expiry),
// and an acquire without a mode, released as a write, was never ended by
// the direct rules' spans (the raw modes differed), a false rw-exclusion.
func TestSharedModelReview(t *testing.T) {
	na := contract.NA
	okAll := want{lease: contract.OK, resource: na, liveness: na}
	bad := func(rule string, lines ...int) want {
		return want{lease: contract.Violated, resource: na, liveness: na, prop: contract.PropLeaseName, rule: rule, lines: lines}
	}
	runRuleCases(t, []ruleCase{
		{"a reader's release after a writer was granted", lined(
			acq("a", 0, 10, ok, ttl(100), tok(1), hold(1), reading()),
			acq("b", 100, 101, ok, ttl(1000), tok(2), hold(1), writing()),
			rel("a", 103, 104, ok, tok(1), hold(1), reading()),
		), Options{}, bad(RuleNotOwner, 2, 3)},
		{"a writer's release after a reader was granted", lined(
			acq("a", 0, 10, ok, ttl(100), tok(1), hold(1), writing()),
			acq("b", 100, 101, ok, ttl(1000), tok(2), hold(1), reading()),
			rel("a", 103, 104, ok, tok(1), hold(1), writing()),
		), Options{}, bad(RuleNotOwner, 2, 3)},
		{"a reader's release under way while the writer was granted", lined(
			acq("a", 0, 10, ok, ttl(100), tok(1), hold(1), reading()),
			rel("a", 99, 104, ok, tok(1), hold(1), reading()),
			acq("b", 100, 101, ok, ttl(1000), tok(2), hold(1), writing()),
		), Options{}, okAll},
		{"an exclusive hold released as a write, then a reader", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1)),
			rel("a", 2, 3, ok, tok(1), writing()),
			acq("b", 4, 5, ok, ttl(10000), tok(2), reading()),
		), Options{}, okAll},
	})
}

// TestSharedReleasedTwiceBehindACrowd: a hold released a second time
// behind a crowd of readers admitted and released side by side is
// decided by the direct rule releasedTwice (not-owner). The search alone
// visited every subset of the crowd's commuting ops, and 18 readers (37
// ops) ran out of a 10 s budget (review, 2026-12-07).
func TestSharedReleasedTwiceBehindACrowd(t *testing.T) {
	const n = 18
	var ops []history.Op
	for i := range n {
		ops = append(ops, acq(fmt.Sprintf("r%d", i), float64(i)*0.001, 100, ok, ttl(10000), tok(uint64(i+1)), hold(1), reading()))
	}
	for i := range n {
		ops = append(ops, rel(fmt.Sprintf("r%d", i), 200+float64(i)*0.001, 300, ok, tok(uint64(i+1)), hold(1), reading()))
	}
	ops = append(ops, rel("r0", 400, 401, ok, tok(1), hold(1), reading()))
	r, err := Check(context.Background(), lined(ops...), Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Of(contract.PropLease)
	if got.Verdict != contract.Violated || len(got.Violations) == 0 || got.Violations[0].Rule != RuleNotOwner ||
		fmt.Sprint(got.Violations[0].Lines) != fmt.Sprint([]int{n + 1, 2*n + 1}) {
		t.Fatalf("lease %s, %+v; want not-owner on lines %d,%d (the hold's first release, then its second)", got.Verdict, got.Violations, n+1, 2*n+1)
	}
}
