package checker

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// want is the expected verdict of each property and, for a violated one,
// a violation it must report (rule and lines).
type want struct {
	lease, resource, liveness contract.Verdict
	prop                      string // property of the expected violation
	rule                      string
	lines                     []int
}

// ruleCase is a hand-made history with the verdicts it must get.
type ruleCase struct {
	name string
	ops  []history.Op
	opts Options
	want want
}

// runRuleCases checks each case, and again with its lines reversed: the
// verdicts do not depend on the order of the lines.
func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Check(context.Background(), tc.ops, tc.opts)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			assertResult(t, r, tc.want)
			rev := append([]history.Op(nil), tc.ops...)
			slices.Reverse(rev)
			r2, err := Check(context.Background(), rev, tc.opts)
			if err != nil {
				t.Fatalf("Check reversed: %v", err)
			}
			assertResult(t, r2, tc.want)
		})
	}
}

func TestRules(t *testing.T) {
	slack := Options{LivenessSlack: 100 * time.Millisecond}
	runRuleCases(t, []ruleCase{
		// --- lease (G1) ---
		{"handoff after release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 5, 6, ok, tok(1)),
			acq("b", 7, 8, ok, ttl(1000), tok(2)),
			rel("b", 9, 10, ok, tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// Reentrance: a nested hold by the holder adds a hold; the key is
		// free only when every hold is released, and no hold or renewal
		// shortens what the lease was granted.
		{"nested holds released in any order free the key", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 2, 3, ok, ttl(500), tok(1)),
			rel("a", 4, 5, ok, tok(1)),
			rel("a", 6, 7, ok, tok(1)),
			acq("b", 8, 9, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"inner release keeps the lease held", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1)),
			rel("a", 4, 5, ok, tok(1)),
			acq("b", 6, 7, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA, prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 4}}},
		{"a shorter nested hold does not shorten the lease", lined(
			acq("a", 0, 1, ok, ttl(60000), tok(1)),
			acq("a", 2, 3, ok, ttl(50), tok(1)),
			rel("a", 4, 5, ok, tok(1)),
			acq("b", 200, 201, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA, prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{1, 4}}},
		{"a shorter renewal does not shorten the lease", lined(
			acq("a", 0, 1, ok, ttl(60000), tok(1)),
			renew("a", 2, 3, ok, ttl(50), tok(1)),
			acq("b", 200, 201, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA, prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{1, 3}}},
		{"a nested hold after the lease surely expired is a new lease", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("a", 500, 501, ok, ttl(100), tok(2)),
			rel("a", 502, 503, ok, tok(2)),
			acq("b", 504, 505, ok, ttl(100), tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"release concurrent with the next acquire", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 4, 9, ok, ttl(1000), tok(2)),
			rel("a", 7, 8, ok, tok(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"two holders", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 10, 11, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{1, 2}}},
		{"acquire after the lease surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 200, 201, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"acquire when the lease may have expired (drift window)", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)), // surely valid until 99ms
			acq("b", 99.5, 99.6, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// NoDrift (lockproof check --drift 0): every bound exact. Surely
		// valid until call+T, inclusive: an acquire at exactly that
		// instant overlaps the lease, one a nanosecond later does not
		// (a tiny drift had moved the bound 1ns the lenient way).
		{"no drift: an acquire at exactly call+T overlaps", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)), // surely valid until 100ms, inclusive
			acq("b", 100, 100, ok, ttl(100), tok(2)),
		), Options{Drift: NoDrift}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{1, 2}}},
		{"no drift: an acquire 1ns past call+T does not", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 100.000001, 100.000001, ok, ttl(100), tok(2)),
		), Options{Drift: NoDrift}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"acquire just before the lease may expire", lined(
			fault("latency", 0, 100),
			acq("a", 0, 1, ok, ttl(100), tok(1)), // surely valid until 99ms
			acq("b", 50, 98.9, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 3}}},
		{"no ttl never expires", lined(
			acq("a", 0, 1, ok, tok(1)),
			acq("b", 10000, 10001, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{1, 2}}},
		{"unknown acquire that never returned", lined(
			acq("a", 0, 0, unknown, ttl(200), noReturn()),
			acq("b", 50, 52, ok, ttl(2000), tok(9)),
			rel("b", 60, 61, ok, tok(9)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"unknown acquire that must have taken effect conflicts", lined(
			acq("a", 0, 1, unknown, ttl(1000)),
			acq("b", 10, 11, ok, ttl(1000), tok(2)),
			rel("a", 20, 21, ok),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{2, 3}}},
		{"unknown acquire taken effect, then released", lined(
			acq("a", 0, 1, unknown, ttl(1000)),
			rel("a", 20, 21, ok),
			acq("b", 30, 31, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"release by a non-owner", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("b", 5, 6, ok),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{1, 2}}},
		{"release with the wrong token", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 5, 6, ok, tok(7)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{1, 2}}},
		{"failed release by a non-owner is fine", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("b", 5, 6, fail),
			renew("b", 7, 8, fail),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"renew after the lease surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)), // surely expired after 102ms
			renew("a", 200, 201, ok, ttl(100), tok(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{1, 2}}},
		{"renew extends the lease", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			renew("a", 50, 51, ok, ttl(100), tok(1)), // surely valid until 149ms
			acq("b", 120, 121, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 3}}},
		{"unknown renew may not have taken effect", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			renew("a", 50, 51, unknown, ttl(100), tok(1)),
			acq("b", 120, 121, ok, ttl(100), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"renew after release", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			rel("a", 2, 3, ok, tok(1)),
			renew("a", 4, 5, ok, ttl(100), tok(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{2, 3}}},
		{"failed acquires are ignored", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 3, fail, ttl(1000)),
			acq("c", 2, 30, fail, ttl(1000)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"reentrant acquire by the holder", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 5, 6, ok, ttl(1000), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"reentrant acquire by the holder gets its own token back", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 5, 6, ok, ttl(1000), tok(1)),
			rel("a", 7, 8, ok, tok(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"same token again after release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 2, 3, ok, tok(1)),
			acq("a", 5, 6, ok, ttl(1000), tok(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleTokenOrder, lines: []int{1, 3}}},
		// --- token rules ---
		{"token reused by another client", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(5)),
			rel("a", 2, 3, ok, tok(5)),
			acq("b", 10, 11, ok, ttl(1000), tok(5)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleTokenOwner, lines: []int{1, 3}}},
		{"token goes down in real time", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(5)),
			rel("a", 2, 3, ok, tok(5)),
			acq("b", 10, 11, ok, ttl(1000), tok(4)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleTokenOrder, lines: []int{1, 3}}},
		{"token goes down in the only possible order", lined(
			acq("a", 0, 10, ok, ttl(1), tok(5)),
			acq("b", 5, 100, ok, ttl(10000), tok(4)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleTokenOrder, lines: []int{1, 2}}},
		{"concurrent acquires may order their tokens either way", lined(
			acq("a", 0, 10, ok, ttl(1), tok(5)),
			acq("b", 5, 100, ok, ttl(1), tok(6)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// --- resource (G2), fenced ---
		{"fenced handoff", lined(
			acq("a", 0, 2, ok, ttl(2000), tok(11)),
			rd("a", 3, 4, ok, "", tok(11)),
			wr("a", 5, 6, ok, "x", prev(""), tok(11)),
			rel("a", 7, 8, ok, tok(11)),
			acq("b", 4, 9, ok, ttl(2000), tok(12)),
			rd("b", 10, 11, ok, "x", tok(12)),
			wr("b", 12, 13, ok, "y", prev("x"), tok(12)),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"stale token accepted", lined(
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			wr("b", 405, 406, ok, "b1", tok(4)),
			wr("a", 701, 702, ok, "a1", tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleFencing, lines: []int{3, 4}}},
		{"stale token read accepted after a write", lined( // reads are fenced like writes
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			wr("b", 403, 404, ok, "b1", tok(4)),
			rd("a", 701, 702, ok, "b1", tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleFencing, lines: []int{3, 4}}},
		{"stale token read accepted after a read", lined(
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			rd("b", 405, 406, ok, "", tok(4)),
			rd("a", 701, 702, ok, "", tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleFencing, lines: []int{3, 4}}},
		{"stale token read rejected", lined(
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			wr("b", 403, 404, ok, "b1", tok(4)),
			rd("b", 405, 406, ok, "b1", tok(4)),
			rd("a", 701, 702, rej, "", tok(3)),
			wr("a", 703, 704, rej, "a1", prev("b1"), tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"concurrent fenced reads may order their tokens either way", lined(
			rd("a", 0, 10, ok, "", tok(3)),
			rd("b", 5, 15, ok, "", tok(4)),
		), Options{}, want{lease: contract.NA, resource: contract.OK, liveness: contract.NA}},
		{"unknown stale read is no violation", lined(
			wr("b", 0, 1, ok, "b1", tok(4)),
			rd("a", 2, 3, unknown, "", tok(3)),
			wr("a", 4, 5, rej, "a1", tok(3)),
		), Options{}, want{lease: contract.NA, resource: contract.OK, liveness: contract.NA}},
		{"stale read of a stale holder", lined( // its stale token is what breaks first
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			wr("b", 403, 404, ok, "b1", tok(4)),
			rd("a", 701, 702, ok, "", tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleFencing, lines: []int{3, 4}}},
		{"stale read of an unfenced stale holder", lined(
			acq("a", 0, 2, ok, ttl(200)),
			acq("b", 400, 402, ok, ttl(2000)),
			wr("b", 403, 404, ok, "b1"),
			rd("a", 701, 702, ok, ""),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleStaleRead, lines: []int{3, 4}}},
		{"stale token rejected", lined(
			acq("a", 0, 2, ok, ttl(200), tok(3)),
			acq("b", 400, 402, ok, ttl(2000), tok(4)),
			wr("b", 405, 406, ok, "b1", tok(4)),
			wr("a", 701, 702, rej, "a1", tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"stale write between the next holder's read and write", lined(
			// Fencing writes alone would not protect read-modify-write: a's
			// stale write (token 7 is still the largest written) lands
			// between b's read and b's write, and b's write erases it. b's
			// fenced read raised the fence to 9: accepting a's write broke it.
			acq("a", 0, 1, ok, ttl(100), tok(7)),
			wr("a", 2, 3, ok, "a1", prev(""), tok(7)),
			acq("b", 200, 201, ok, ttl(100), tok(9)),
			rd("b", 202, 203, ok, "a1", tok(9)),
			wr("a", 204, 205, ok, "a2", prev("a1"), tok(7)),
			wr("b", 206, 207, ok, "b1", prev("a1"), tok(9)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleFencing, lines: []int{4, 5}}},
		{"stale write between the next holder's read and write refused", lined(
			acq("a", 0, 1, ok, ttl(100), tok(7)),
			wr("a", 2, 3, ok, "a1", prev(""), tok(7)),
			acq("b", 200, 201, ok, ttl(100), tok(9)),
			rd("b", 202, 203, ok, "a1", tok(9)),
			wr("a", 204, 205, rej, "a2", prev("a1"), tok(7)),
			wr("b", 206, 207, ok, "b1", prev("a1"), tok(9)),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"unfenced reads still lose updates", lined(
			acq("a", 0, 1, ok, ttl(100)),
			wr("a", 2, 3, ok, "a1", prev("")),
			acq("b", 200, 201, ok, ttl(100)),
			rd("b", 202, 203, ok, "a1"),
			wr("a", 204, 205, ok, "a2", prev("a1")),
			wr("b", 206, 207, ok, "b1", prev("a1")),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleLostUpdate, lines: []int{5, 6}}},
		{"lost update", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			wr("a", 2, 3, ok, "x", prev(""), tok(1)),
			rel("a", 4, 5, ok, tok(1)),
			acq("b", 6, 7, ok, ttl(1000), tok(2)),
			wr("b", 8, 9, ok, "y", prev(""), tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleLostUpdate, lines: []int{2, 5}}},
		{"stale read", lined(
			wr("a", 2, 3, ok, "x", tok(1)),
			rd("b", 8, 9, ok, "", tok(2)),
		), Options{}, want{lease: contract.NA, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleStaleRead, lines: []int{1, 2}}},
		{"read of a value never written", lined(
			rd("b", 8, 9, ok, "ghost", tok(2)),
		), Options{}, want{lease: contract.NA, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleStaleRead, lines: []int{1}}},
		{"unknown write may have taken effect", lined(
			wr("a", 0, 0, unknown, "x", tok(1), noReturn()),
			rd("b", 10, 11, ok, "x", tok(2)),
		), Options{}, want{lease: contract.NA, resource: contract.OK, liveness: contract.NA}},
		{"unknown write may not have taken effect", lined(
			wr("a", 0, 1, unknown, "x", tok(1)),
			rd("b", 10, 11, ok, "", tok(2)),
		), Options{}, want{lease: contract.NA, resource: contract.OK, liveness: contract.NA}},
		{"unknown write not taking effect does not excuse a third value", lined(
			wr("a", 0, 1, unknown, "x", tok(1)),
			rd("b", 10, 11, ok, "z", tok(2)),
		), Options{}, want{lease: contract.NA, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleStaleRead, lines: []int{2}}},
		{"write that never returned takes effect late", lined(
			wr("a", 0, 0, unknown, "x", noReturn()),
			wr("b", 10, 11, ok, "y"),
			rd("c", 20, 21, ok, "x"),
		), Options{}, want{lease: contract.NA, resource: contract.OK, liveness: contract.NA}},
		{"token of another client accepted", lined(
			acq("a", 0, 1, ok, ttl(10), tok(1)),
			acq("b", 100, 101, ok, ttl(1000), tok(2)),
			wr("c", 110, 111, ok, "c", tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleTokenOwner, lines: []int{2, 3}}},
		{"read with the token of another client accepted", lined(
			acq("a", 0, 1, ok, ttl(10), tok(1)),
			acq("b", 100, 101, ok, ttl(1000), tok(2)),
			rd("c", 110, 111, ok, "", tok(2)),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleTokenOwner, lines: []int{2, 3}}},
		{"one token read by two clients", lined(
			rd("a", 0, 1, ok, "", tok(5)),
			rd("b", 2, 3, ok, "", tok(5)),
		), Options{}, want{lease: contract.NA, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleTokenOwner, lines: []int{1, 2}}},
		// --- resource (G2), unfenced ---
		{"unfenced stale holder", lined(
			acq("a", 0, 1, ok, ttl(100)),
			acq("b", 200, 201, ok, ttl(100)),
			wr("b", 210, 211, ok, "b"),
			wr("a", 300, 301, ok, "a"),
		), Options{}, want{lease: contract.OK, resource: contract.Violated, liveness: contract.NA,
			prop: contract.PropResourceName, rule: RuleStaleHolder, lines: []int{1, 2, 4}}},
		{"unfenced stale holder's read changes nothing", lined(
			acq("a", 0, 1, ok, ttl(100)),
			acq("b", 200, 201, ok, ttl(100)),
			wr("b", 210, 211, ok, "b"),
			rd("a", 300, 301, ok, "b"),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"unfenced holders in turn", lined(
			acq("a", 0, 1, ok, ttl(100)),
			wr("a", 2, 3, ok, "a", prev("")),
			rel("a", 4, 5, ok),
			acq("b", 6, 7, ok, ttl(100)),
			rd("b", 8, 9, ok, "a"),
			wr("b", 10, 11, ok, "b", prev("a")),
			acq("a", 20, 21, fail, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		{"unfenced op concurrent with the next acquire is not stale", lined(
			acq("a", 0, 1, ok, ttl(100)),
			acq("b", 90, 101, ok, ttl(100)),
			wr("a", 95, 99, ok, "a"),
		), Options{}, want{lease: contract.OK, resource: contract.OK, liveness: contract.NA}},
		// --- liveness (G3) ---
		{"crashed holder, then a failed acquire long after", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2000, 2001, fail, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated,
			prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{1, 2}}},
		// A holder that left, then tried once more on its closed lock and
		// was refused: the refusal changed nothing, it stopped holding at
		// its grant, and the key must come free after that lease.
		{"left holder, its own failed retry, then a failed acquire long after", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("a", 2, 3, fail, ttl(100)),
			acq("b", 2000, 2001, fail, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated,
			prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{1, 3}}},
		{"crashed holder, failed acquire within the slack", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 150, 151, fail, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"crashed holder, then a successful acquire", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 150, 151, fail, ttl(100)),
			acq("b", 300, 301, ok, ttl(100), tok(2)),
			rel("b", 302, 303, ok, tok(2)),
		), slack, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"crashed holder, failure explained by another acquire", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("c", 250, 251, ok, ttl(1000), tok(2)),
			acq("b", 300, 301, fail, ttl(100)),
			rel("c", 400, 401, ok, tok(2)),
		), slack, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"crashed holder, failure explained by an unknown acquire", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("c", 250, 0, unknown, ttl(1000), noReturn()),
			acq("b", 300, 301, fail, ttl(100)),
		), slack, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"crashed after renewing", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			renew("a", 50, 51, ok, ttl(100), tok(1)), // surely expired after 152ms
			acq("b", 260, 261, fail, ttl(100)),
		), slack, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated,
			prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{2, 3}}},
		{"crashed during its release", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			rel("a", 5, 0, unknown, tok(1), noReturn()),
			acq("b", 300, 301, fail, ttl(100)),
		), slack, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated,
			prop: contract.PropLivenessName, rule: RuleLiveness, lines: []int{1, 3}}},
		{"holder that released is not crashed", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			rel("a", 2, 3, ok, tok(1)),
			acq("b", 2000, 2001, fail, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"unknown attempts do not count", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2000, 2001, unknown, ttl(100)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
	})
}

// TestHoldNumbers: the lease model reads lease numbers (holdNumberCases).
func TestHoldNumbers(t *testing.T) {
	runRuleCases(t, holdNumberCases())
}

// holdNumberCases are the cases of holds told apart by their lease
// numbers: TestHoldNumbers checks them, and TestModelDifferential holds
// the trace spec to the same verdicts (every ok acquire has a token, so
// that the spec reads them).
func holdNumberCases() []ruleCase {
	return []ruleCase{
		// A release of unknown outcome may land late (its request on its
		// way when its caller gave up), but only on its own hold: ending
		// the client's newer hold with it is the lock's failure. Before
		// 2026-12-05 the late release of hold 1 ended hold 2 here, and two
		// holders at once passed (get-del under pause-client, whose
		// workload rushes releases, passed lease in half the seeds).
		{"late unknown release does not end a newer hold", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1)),
			rel("a", 10, 11, unknown, hold(1)),
			acq("a", 300, 301, ok, ttl(1000), tok(2), hold(2)), // hold 1 surely expired
			acq("b", 400, 401, ok, ttl(1000), tok(3), hold(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{3, 4}}},
		{"late unknown release ends its own hold", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 10, 11, unknown, hold(1)),
			acq("b", 100, 101, ok, ttl(1000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"late unknown release of a nested hold ends that hold only", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			rel("a", 10, 11, unknown, hold(2)),
			rel("a", 50, 51, ok, hold(1)),
			acq("b", 100, 101, ok, ttl(1000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"a release without a lease number may still end any hold of its client", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			rel("a", 10, 11, unknown),
			acq("a", 300, 301, ok, ttl(1000), tok(2)),
			acq("b", 400, 401, ok, ttl(1000), tok(3)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// Holds by lease number (issue 60, since 2026-12-07): a release of
		// lease L ends hold L and no other, whenever it lands, and an ok
		// release or renew of a number its client no longer holds is the
		// lock's failure, as the trace spec (TraceFencedLock.tla) reads it.
		// Before, the lease model counted holds: here the release of hold
		// 2 of unknown outcome took effect first and ended hold 2, the
		// second release of 2 took off hold 1, and b's acquire passed
		// (fenced-v2 × migrate, seed 1: the frozen lock's refused release
		// came back and freed its owner's outer hold).
		{"a late release of a nested hold does not end the outer hold", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(11), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(11), hold(2)),
			rel("a", 4, 5, unknown, tok(11), hold(2)),
			rel("a", 6, 7, ok, tok(11), hold(2)),
			acq("b", 8, 9, ok, ttl(10000), tok(12), hold(1)),
			rel("b", 10, 11, ok, tok(12), hold(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 5}}},
		{"a late release of a nested hold, then the outer release, frees the key", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(11), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(11), hold(2)),
			rel("a", 4, 5, unknown, tok(11), hold(2)),
			rel("a", 6, 7, ok, tok(11), hold(2)),
			rel("a", 8, 9, ok, tok(11), hold(1)),
			acq("b", 10, 11, ok, ttl(10000), tok(12), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"an ok release of a hold already released is not-owner", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(11), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(11), hold(2)),
			rel("a", 4, 5, ok, tok(11), hold(2)),
			rel("a", 6, 7, ok, tok(11), hold(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{3, 4}}},
		{"an ok renew of a hold already released is not-owner", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(11), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(11), hold(2)),
			rel("a", 4, 5, ok, tok(11), hold(2)),
			renew("a", 6, 7, ok, ttl(10000), tok(11), hold(2)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{3, 4}}},
		// A lost lease's release after its owner took the key again (the
		// workload's owned sections) must not end the newer hold.
		{"an ok release of a lost lease's hold while the client holds a newer one is not-owner", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1)),
			acq("a", 300, 301, ok, ttl(1000), tok(2), hold(2)),
			rel("a", 302, 303, ok, tok(2), hold(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleNotOwner, lines: []int{1, 3}}},
		{"a release of unknown outcome within its call ends its own hold only", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(1), hold(2)),
			rel("a", 4, 5, unknown, hold(2)),
			acq("b", 6, 7, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 4}}},
		{"holds end in any order, by number", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(1), hold(2)),
			rel("a", 4, 5, ok, hold(1)),
			renew("a", 6, 7, ok, ttl(10000), hold(2)),
			rel("a", 8, 9, ok, hold(2)),
			acq("b", 10, 11, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// A release whose number no acquire of its client on the key has
		// names no hold the model knows: it is read by count, and may end
		// either numbered hold (here hold 2, as hold 1's release follows).
		{"a release of an unknown number is read by count and may end any hold", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(1), hold(2)),
			rel("a", 4, 5, ok, hold(9)),
			rel("a", 6, 7, ok, hold(1)),
			acq("b", 8, 9, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"a release without a number ends a known hold, numbered or not", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(10000), tok(1)),
			acq("a", 4, 5, ok, ttl(10000), tok(1), hold(2)),
			rel("a", 6, 7, ok),
			rel("a", 8, 9, ok),
			rel("a", 10, 11, ok, hold(2)),
			acq("b", 12, 13, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// A hold of an acquire of unknown outcome may be taken back unseen
		// by its number: the owner's release of it then finds it gone.
		// (The renew of hold 2 says that its acquire took effect.)
		{"a numbered phantom hold taken back unseen", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, unknown, ttl(10000), tok(1), hold(2)),
			renew("a", 4, 5, ok, ttl(10000), tok(1), hold(2)),
			rel("a", 6, 7, ok, tok(1), hold(1)),
			acq("b", 8, 9, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		// The release of hold 2 ends hold 2, phantom or not, and hold 1,
		// which a knows of, stands. Read by count, the release took off a
		// known hold, and the phantom left could be taken back unseen.
		{"a release of a phantom hold leaves the known hold", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1)),
			acq("a", 2, 3, unknown, ttl(10000), tok(1), hold(2)),
			rel("a", 4, 5, ok, tok(1), hold(2)),
			acq("b", 6, 7, ok, ttl(10000), tok(2), hold(1)),
		), Options{}, want{lease: contract.Violated, resource: contract.NA, liveness: contract.NA,
			prop: contract.PropLeaseName, rule: RuleMutualExclusion, lines: []int{2, 4}}},
	}
}

func assertResult(t *testing.T, r *Result, w want) {
	t.Helper()
	got := [3]contract.Verdict{r.Of(contract.PropLease).Verdict, r.Of(contract.PropResource).Verdict, r.Of(contract.PropLiveness).Verdict}
	exp := [3]contract.Verdict{w.lease, w.resource, w.liveness}
	if got != exp {
		b, _ := json.MarshalIndent(r, "", "  ")
		t.Fatalf("verdicts (lease, resource, liveness) = %v, want %v\n%s", got, exp, b)
	}
	wantOverall := combine(exp[:]...)
	if r.Verdict != wantOverall {
		t.Errorf("overall verdict %s, want %s", r.Verdict, wantOverall)
	}
	if w.rule == "" {
		return
	}
	var pr *PropertyResult
	for i := range r.Props {
		if r.Props[i].Property == w.prop {
			pr = &r.Props[i]
		}
	}
	for _, v := range pr.Violations {
		if v.Property != w.prop {
			t.Errorf("violation %+v filed under %s", v, w.prop)
		}
		if v.Rule == w.rule && reflect.DeepEqual(v.Lines, w.lines) {
			if v.Explanation == "" || len(v.Ops) != len(v.Lines) {
				t.Errorf("violation without explanation or ops: %+v", v)
			}
			return
		}
	}
	b, _ := json.MarshalIndent(pr, "", "  ")
	t.Errorf("no %s violation of rule %s on lines %v; got:\n%s", w.prop, w.rule, w.lines, b)
}
