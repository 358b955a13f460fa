package checker

import (
	"cmp"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

func claim(ms float64) opt {
	return func(o *history.Op) { o.ValidUntil, o.HasValid = int64(ms*float64(msNs)), true }
}
func hold(n uint64) opt { return func(o *history.Op) { o.Hold = n } }
func checkedFirst() opt { return func(o *history.Op) { o.Checked = true } }

// lost is a loss notice of c at ms.
func lost(c string, ms float64, opts ...opt) history.Op {
	return mk(history.Lost, c, "k", ms, ms, ok, opts...)
}

// claimCase is a hand-made history with its claims verdict and, when
// violated, the rule and lines of a violation it must report.
type claimCase struct {
	name    string
	ops     []history.Op
	opts    Options
	verdict contract.Verdict
	rule    string
	lines   []int
	prop    string // the property the case is about; "": validity claims
}

func TestClaims(t *testing.T) {
	notice := Options{LossBound: 50 * time.Millisecond}
	cases := []claimCase{
		{"honest hand-off", lined(
			acq("a", 0, 1, ok, ttl(1000), claim(990), hold(1)),
			rel("a", 5, 6, ok, hold(1)),
			acq("b", 7, 8, ok, ttl(1000), claim(997), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"no claim, no checked write: nothing to judge", lined(
			acq("a", 0, 1, ok, ttl(1000)),
			rel("a", 5, 6, ok),
		), Options{}, contract.NA, "", nil, ""},
		// G1 holds (a's lease surely expired at 102ms), but a was told 200ms.
		{"a claim twice the TTL", lined(
			acq("a", 0, 1, ok, ttl(100), claim(200), hold(1)),
			acq("b", 150, 151, ok, ttl(100), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{1, 2}, ""},
		// The waiter's lease counts from the attempt that picked the lock
		// up (about its return), so its claim runs past what G1 can
		// prove from its call: the claim catches a grant at 1.1s.
		{"a blocking acquire's claim counts from its pickup", lined(
			acq("a", 0, 500, ok, ttl(1000), claim(1490), hold(1), waits()),
			acq("b", 1100, 1101, ok, ttl(1000), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{1, 2}, ""},
		{"a released claim is over", lined(
			acq("a", 0, 1, ok, ttl(100), claim(200), hold(1)),
			rel("a", 50, 51, ok, hold(1)),
			acq("b", 150, 151, ok, ttl(100), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"a claim reported lost is over", lined(
			acq("a", 0, 1, ok, ttl(100), claim(200), hold(1)),
			lost("a", 120, hold(1)),
			acq("b", 150, 151, ok, ttl(100), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"releasing a nested hold does not end the outer claim", lined(
			acq("a", 0, 1, ok, ttl(1000), claim(990), hold(1)),
			acq("a", 2, 3, ok, ttl(100), claim(101), hold(2)),
			rel("a", 10, 11, ok, hold(2)),
			acq("b", 50, 51, ok, ttl(1000), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{1, 4}, ""},
		{"without lease numbers any release ends the claim", lined(
			acq("a", 0, 1, ok, ttl(1000), claim(990)),
			acq("a", 2, 3, ok, ttl(100), claim(101)),
			rel("a", 10, 11, ok),
			acq("b", 50, 51, ok, ttl(1000)),
		), Options{}, contract.OK, "", nil, ""},
		// The release took effect (b got the key) but the lock still
		// claimed the lease valid after it.
		{"an unknown release that still claims", lined(
			acq("a", 0, 1, ok, ttl(1000), claim(990), hold(1)),
			rel("a", 10, 11, unknown, claim(990), hold(1)),
			acq("b", 20, 21, ok, ttl(1000), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{1, 2, 3}, ""},
		{"an unknown release that withdrew the claim", lined(
			acq("a", 0, 1, ok, ttl(1000), claim(990), hold(1)),
			rel("a", 10, 11, unknown, hold(1)),
			acq("b", 20, 21, ok, ttl(1000), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		// b waited in line from 5ms: its lease, counted from its call,
		// lasts past 11ms, so it held the key at some instant of the
		// claim made then (before it, it would still hold at 11ms).
		{"a waiter in line served after an unknown release that still claims", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 5, 21, ok, ttl(1000), hold(1), waits()),
			rel("a", 10, 11, unknown, claim(990), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{2, 3}, ""},
		// b was called at 5ms with a 4ms TTL: its lease may have run out
		// before the claim was made at 11ms, so it proves nothing.
		{"a waiter whose lease may have ended before the claim", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 5, 21, ok, ttl(4), hold(1), waits()),
			rel("a", 10, 11, unknown, claim(990), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"a renewal's claim", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			renew("a", 50, 51, ok, ttl(100), claim(300), hold(1)),
			acq("b", 200, 201, ok, ttl(100), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{2, 3}, ""},
		// A paused holder: its check found the lease valid, then it slept
		// past the hand-off and wrote.
		{"a checked write after the key passed on", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			acq("b", 150, 151, ok, ttl(100), hold(1)),
			wr("a", 300, 301, rej, "a1", checkedFirst(), claim(99), hold(1)),
		), Options{}, contract.Violated, RuleCheckedWrite, []int{1, 2, 3}, ""},
		{"a checked write within the lease", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			wr("a", 30, 31, ok, "a1", checkedFirst(), claim(99), hold(1)),
			rel("a", 40, 41, ok, hold(1)),
			acq("b", 150, 151, ok, ttl(100), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"a loss notice after the release", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			rel("a", 5, 6, ok, hold(1)),
			lost("a", 7, hold(1)),
		), Options{}, contract.Violated, RuleFalseNotice, []int{2, 3}, contract.PropNotice},
		{"a loss notice of another hold after a release", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			acq("a", 2, 3, ok, ttl(100), claim(99), hold(2)),
			rel("a", 5, 6, ok, hold(1)),
			lost("a", 7, hold(2)),
		), Options{}, contract.OK, "", nil, contract.PropNotice},
		// A notice without a lease is about every hold of its client (as
		// it is for claims and loss-notice): false once every hold was
		// released ok before it, not while one may stand.
		{"a lease-less loss notice after every release", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			acq("a", 2, 3, ok, ttl(100), claim(99), hold(2)),
			rel("a", 4, 5, ok, hold(2)),
			rel("a", 6, 7, ok),
			lost("a", 8),
		), Options{}, contract.Violated, RuleFalseNotice, []int{4, 5}, contract.PropNotice},
		{"a lease-less loss notice while a hold stands", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			acq("a", 2, 3, ok, ttl(100), claim(99), hold(2)),
			rel("a", 4, 5, ok, hold(2)),
			lost("a", 8),
		), Options{}, contract.OK, "", nil, contract.PropNotice},
		{"a lease-less loss notice after an acquire of unknown outcome", lined(
			acq("a", 0, 1, ok, ttl(100), claim(99), hold(1)),
			rel("a", 4, 5, ok, hold(1)),
			acq("a", 6, 7, unknown, ttl(100), hold(2)),
			lost("a", 8),
		), Options{}, contract.OK, "", nil, contract.PropNotice},
		// Redis forgot a's key (no fault line): b took it at 101ms.
		{"the loss told within the bound", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			lost("a", 130, hold(1)),
			rd("a", 200, 201, ok, ""),
		), notice, contract.OK, "", nil, contract.PropNotice},
		{"the loss told late", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			lost("a", 180, hold(1)),
			rd("a", 200, 201, ok, ""),
		), notice, contract.Violated, RuleLossNotice, []int{1, 2}, contract.PropNotice},
		{"the loss never told", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			rd("a", 200, 201, ok, ""),
		), notice, contract.Violated, RuleLossNotice, []int{1, 2}, contract.PropNotice},
		{"a holder in a fault window is not due before it heals", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			fault("pause-client a", 90, 400),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			rd("a", 410, 411, ok, ""),
		), notice, contract.NA, "", nil, contract.PropNotice},
		// Excused, so not judged: with nothing else to judge, n/a (as the
		// calls property is when its only op was excused).
		{"a fault opening before the notice is due excuses it", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			fault("partition a", 120, 400),
			rd("a", 410, 411, ok, ""),
		), notice, contract.NA, "", nil, contract.PropNotice},
		{"the bound runs from the end of a fault open at the take-over", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			fault("key-loss a", 99, 102),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			lost("a", 200, hold(1)),
			rd("a", 300, 301, ok, ""),
		), notice, contract.Violated, RuleLossNotice, []int{1, 3}, contract.PropNotice},
		{"a notice within the bound from the fault's end", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			fault("pause-client a", 90, 400),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			lost("a", 430, hold(1)),
			rd("a", 500, 501, ok, ""),
		), notice, contract.OK, "", nil, contract.PropNotice},
		{"a holder that stopped is not examined", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			rel("b", 300, 301, ok, hold(1)),
		), notice, contract.NA, "", nil, contract.PropNotice},
		{"a lock without a loss bound is not held to one", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 100, 101, ok, ttl(1000), hold(1)),
			rd("a", 200, 201, ok, ""),
		), Options{}, contract.NA, "", nil, contract.PropNotice},
	}
	runPropCases(t, cases)
}

// runPropCases checks each case, and again with its lines reversed: the
// verdicts do not depend on the order of the lines.
func runPropCases(t *testing.T, cases []claimCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, ops := range [][]history.Op{tc.ops, reversed(tc.ops)} {
				r, err := Check(context.Background(), ops, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				assertClaims(t, r, tc)
			}
		})
	}
}

func reversed(ops []history.Op) []history.Op {
	rev := slices.Clone(ops)
	slices.Reverse(rev)
	return rev
}

func assertClaims(t *testing.T, r *Result, tc claimCase) {
	t.Helper()
	prop := cmp.Or(tc.prop, contract.PropClaims)
	pr := r.Of(prop)
	b, _ := json.MarshalIndent(pr, "", "  ")
	if pr.Verdict != tc.verdict {
		t.Fatalf("%s verdict %s, want %s\n%s", prop, pr.Verdict, tc.verdict, b)
	}
	if tc.rule == "" {
		return
	}
	for _, v := range pr.Violations {
		if v.Rule == tc.rule && reflect.DeepEqual(v.Lines, tc.lines) {
			return
		}
	}
	t.Errorf("no %s violation on lines %v:\n%s", tc.rule, tc.lines, b)
}
