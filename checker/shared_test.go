package checker

import (
	"context"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

func reading() opt { return func(o *history.Op) { o.Mode = history.ModeRead } }
func writing() opt { return func(o *history.Op) { o.Mode = history.ModeWrite } }

// permits is a hold of k permits; on an acquire, of a semaphore of n.
func permits(k, n int64) opt {
	return func(o *history.Op) {
		o.Mode, o.Permits = history.ModePermits, k
		if o.Kind == history.Acquire {
			o.Capacity = n
		}
	}
}

// TestSharedRules: the rule table of rw-exclusion and permits (lease
// property), on keys whose lease ops carry a mode.
func TestSharedRules(t *testing.T) {
	na := contract.NA
	okAll := want{lease: contract.OK, resource: na, liveness: na}
	bad := func(rule string, lines ...int) want {
		return want{lease: contract.Violated, resource: na, liveness: na, prop: contract.PropLeaseName, rule: rule, lines: lines}
	}
	runRuleCases(t, []ruleCase{
		{"readers overlap", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), reading()),
			rel("a", 4, 5, ok, hold(1), reading()),
			rel("b", 6, 7, ok, hold(1), reading()),
		), Options{}, okAll},
		{"a writer after the readers released", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), reading()),
			rel("a", 4, 5, ok, hold(1), reading()),
			rel("b", 6, 7, ok, hold(1), reading()),
			acq("c", 7, 8, ok, ttl(1000), tok(3), hold(1), writing()),
		), Options{}, okAll},
		{"a writer beside a reader", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			acq("c", 2, 3, ok, ttl(1000), tok(3), hold(1), writing()),
		), Options{}, bad(RuleRWExclusion, 1, 2)},
		{"a reader beside a writer", lined(
			acq("c", 0, 1, ok, ttl(1000), tok(3), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(1000), tok(4), hold(1), reading()),
		), Options{}, bad(RuleRWExclusion, 1, 2)},
		{"a writer once the reader's lease surely ran out", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), reading()),
			acq("c", 150, 151, ok, ttl(1000), tok(3), hold(1), writing()),
		), Options{}, okAll},
		{"a writer while the reader's renewal stands", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), reading()),
			renew("a", 50, 51, ok, ttl(100), hold(1), reading()),
			acq("c", 120, 121, ok, ttl(1000), tok(3), hold(1), writing()),
		), Options{}, bad(RuleRWExclusion, 1, 3)},
		{"a downgrade: the owner's read beside its write", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2), reading()),
			rel("a", 4, 5, ok, hold(1), writing()),
			acq("b", 6, 7, ok, ttl(1000), tok(2), hold(1), reading()),
		), Options{}, okAll},
		{"permits within capacity", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(2, 3)),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), permits(1, 3)),
			rel("a", 4, 5, ok, hold(1), permits(2, 0)),
			acq("c", 6, 7, ok, ttl(1000), tok(3), hold(1), permits(2, 3)),
		), Options{}, okAll},
		{"permits over capacity", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(2, 3)),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), permits(1, 3)),
			acq("c", 4, 5, ok, ttl(1000), tok(3), hold(1), permits(1, 3)),
		), Options{}, bad(RulePermits, 1, 2, 3)},
		{"a permit back once its lease surely ran out", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), permits(1, 1)),
			acq("b", 150, 151, ok, ttl(1000), tok(2), hold(1), permits(1, 1)),
		), Options{}, okAll},
		{"a nested read hold keeps its owner's older fence", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading()),
			acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), reading()),
			acq("a", 4, 5, ok, ttl(1000), tok(1), hold(2), reading()),
		), Options{}, okAll},
		{"a write hold's token not above a read's before it", lined(
			acq("a", 0, 1, ok, ttl(100), tok(5), hold(1), reading()),
			rel("a", 2, 3, ok, hold(1), reading()),
			acq("b", 4, 5, ok, ttl(1000), tok(4), hold(1), writing()),
		), Options{}, bad(RuleTokenOrder, 1, 3)},
		// Liveness: a crashed reader's hold surely expired, and nobody
		// else may hold: a writer must get the lock.
		{"liveness after a crashed reader", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), reading()),
			acq("b", 3000, 3001, fail, ttl(100), hold(1), writing()),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{2}}},
	})
}

// TestSharedClaims: a reader's claim is not broken by another reader's
// grant, and is by a writer's (claims property, rule claim-overlap).
func TestSharedClaims(t *testing.T) {
	claim := func(until float64) opt {
		return func(o *history.Op) { o.ValidUntil, o.HasValid = int64(until*1e6), true }
	}
	check := func(name string, second opt, want contract.Verdict) {
		t.Run(name, func(t *testing.T) {
			ops := lined(
				acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), reading(), claim(900)),
				acq("b", 2, 3, ok, ttl(1000), tok(2), hold(1), second),
			)
			res, err := Check(context.Background(), ops, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Of(contract.PropClaims).Verdict; got != want {
				t.Fatalf("claims %s, want %s: %+v", got, want, res.Of(contract.PropClaims))
			}
		})
	}
	check("a second reader", reading(), contract.OK)
	check("a writer", writing(), contract.Violated)
}

// TestPermitsLiveness: a try for permits that fit once the other holds
// surely expired must not fail (liveness, on a semaphore's key).
func TestPermitsLiveness(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"a crashed holder's permits never came back", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), permits(2, 3)),
			acq("b", 2, 3, ok, ttl(100), tok(2), hold(1), permits(1, 3)),
			rel("b", 4, 5, ok, hold(1), permits(1, 0)),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), permits(2, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{4}}},
		{"the permits are out", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1), permits(2, 3)),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), permits(2, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
		{"a waiter in line", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), permits(2, 3)),
			acq("b", 2900, 0, unknown, ttl(100), hold(1), permits(2, 3), waits(), noReturn()),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), permits(1, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: na}},
		{"a hold within the slack", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), permits(2, 3)),
			acq("c", 500, 501, fail, ttl(100), hold(1), permits(2, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
	})
}

// TestSharedFairness: on a key with modes a grant overtakes a waiter
// only when it kept the waiter out (keepsWaiting): a reader granted
// while a writer that joined before it waits passes it by; a reader
// beside a waiting reader, or permits that fit beside the waiter's, do
// not.
func TestSharedFairness(t *testing.T) {
	fifo := Options{Fair: true}
	cases := []struct {
		name    string
		ops     []history.Op
		verdict contract.Verdict
		lines   []int
	}{
		{"a reader passes a waiting writer", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), reading()),
			acq("x", 10, 600, ok, ttl(1000), tok(3), waits(), inLine(12), writing()),
			acq("y", 100, 101, ok, ttl(1000), tok(2), reading()),
			rel("h", 290, 291, ok, tok(1), reading()),
			rel("y", 590, 591, ok, tok(2), reading()),
		), contract.Violated, []int{2, 3}},
		{"a writer passes a waiting reader", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), writing()),
			acq("x", 10, 600, ok, ttl(1000), tok(3), waits(), inLine(12), reading()),
			acq("y", 100, 300, ok, ttl(1000), tok(2), waits(), writing()),
			rel("h", 290, 291, ok, tok(1), writing()),
			rel("y", 590, 591, ok, tok(2), writing()),
		), contract.Violated, []int{2, 3}},
		{"two readers behind a writer, served in either order", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), writing()),
			acq("x", 10, 320, ok, ttl(1000), tok(2), waits(), inLine(12), reading()),
			acq("y", 100, 300, ok, ttl(1000), tok(3), waits(), inLine(101), reading()),
			rel("h", 290, 291, ok, tok(1), writing()),
		), contract.OK, nil},
		{"the writer's own read (a downgrade) while a reader waits", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), writing()),
			acq("x", 10, 600, ok, ttl(1000), tok(2), waits(), inLine(12), writing()),
			acq("h", 100, 101, ok, ttl(1000), tok(1), reading()),
			rel("h", 290, 291, ok, tok(1), writing()),
			rel("h", 500, 501, ok, tok(1), reading()),
		), contract.OK, nil},
		{"permits that fit beside the waiter's", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), permits(3, 3)),
			acq("x", 10, 320, ok, ttl(1000), tok(2), waits(), inLine(12), permits(2, 3)),
			acq("y", 100, 300, ok, ttl(1000), tok(3), waits(), inLine(101), permits(1, 3)),
			rel("h", 290, 291, ok, tok(1), permits(3, 0)),
		), contract.OK, nil},
		{"permits that keep the waiter out beside the permits out", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), permits(2, 3)),
			acq("x", 10, 600, ok, ttl(1000), tok(2), waits(), inLine(12), permits(2, 3)),
			acq("y", 100, 101, ok, ttl(1000), tok(3), permits(1, 3)),
			rel("h", 290, 291, ok, tok(1), permits(2, 0)),
			rel("y", 590, 591, ok, tok(3), permits(1, 0)),
		), contract.Violated, []int{2, 3}},
		{"permits that fit beside the permits out", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), permits(1, 3)),
			acq("x", 10, 600, ok, ttl(1000), tok(2), waits(), inLine(12), permits(1, 3)),
			acq("y", 100, 101, ok, ttl(1000), tok(3), permits(1, 3)),
			rel("h", 290, 291, ok, tok(1), permits(1, 0)),
			rel("y", 590, 591, ok, tok(3), permits(1, 0)),
		), contract.OK, nil},
		{"permits that keep the waiter out", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1), permits(3, 3)),
			acq("x", 10, 600, ok, ttl(1000), tok(2), waits(), inLine(12), permits(2, 3)),
			acq("y", 100, 300, ok, ttl(1000), tok(3), waits(), inLine(101), permits(2, 3)),
			rel("h", 290, 291, ok, tok(1), permits(3, 0)),
			rel("y", 590, 591, ok, tok(3), permits(2, 0)),
		), contract.Violated, []int{2, 3}},
	}
	var props []claimCase
	for _, tc := range cases {
		props = append(props, claimCase{name: tc.name, ops: tc.ops, opts: fifo, verdict: tc.verdict,
			rule: ruleIf(tc.lines, RuleOvertaken), lines: tc.lines, prop: contract.PropFairness})
	}
	runPropCases(t, props)
}
