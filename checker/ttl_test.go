package checker

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// ask is c's ttl op (the lock's server asked how long hold n is still
// valid) answering left ms (0: no time left; a fail: not held).
func ask(c string, call, ret float64, res history.Result, n uint64, left float64) history.Op {
	o := mk(history.TTL, c, "k", call, ret, res, hold(n))
	if res == history.OK && left > 0 {
		o.ValidUntil, o.HasValid = o.Call+int64(left*float64(msNs)), true
	}
	return o
}

// TestTTLClaims: what a lease's server says of its time left (ttl ops)
// is a claim like ValidUntil (claim-overlap), and a released lease must
// not be said valid (released-claim: package lock's review defect 7, a
// released nested lease answered with its outer hold's record).
func TestTTLClaims(t *testing.T) {
	cases := []claimCase{
		{"defect 7: a released nested lease said valid", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			acq("a", 10, 11, ok, ttl(200), tok(7), hold(2)),
			ask("a", 12, 13, ok, 2, 980),
			rel("a", 20, 21, ok, tok(7), hold(2)),
			ask("a", 22, 23, ok, 2, 970),
		), Options{}, contract.Violated, RuleReleasedClaim, []int{4, 5}, ""},
		{"a released nested lease said not held, its outer one valid", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			acq("a", 10, 11, ok, ttl(200), tok(7), hold(2)),
			ask("a", 12, 13, ok, 2, 980),
			rel("a", 20, 21, ok, tok(7), hold(2)),
			ask("a", 22, 23, fail, 2, 0),
			ask("a", 24, 25, ok, 1, 970),
			rel("a", 30, 31, ok, tok(7), hold(1)),
			ask("a", 32, 33, fail, 1, 0),
			acq("b", 40, 41, ok, ttl(1000), tok(8), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		// The rule needs the release to have returned first: one still
		// running, or of unknown outcome, may not have ended the hold yet.
		{"asked while the release ran", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			rel("a", 20, 30, ok, tok(7), hold(1)),
			ask("a", 25, 26, ok, 1, 970),
		), Options{}, contract.OK, "", nil, ""},
		{"asked after a release of unknown outcome", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			rel("a", 20, 21, unknown, tok(7), hold(1)),
			ask("a", 22, 23, ok, 1, 970),
		), Options{}, contract.OK, "", nil, ""},
		{"another hold's release says nothing of this one", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			acq("a", 10, 11, ok, ttl(200), tok(7), hold(2)),
			rel("a", 20, 21, ok, tok(7), hold(2)),
			ask("a", 22, 23, ok, 1, 970),
		), Options{}, contract.OK, "", nil, ""},
		{"no time left is no claim", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			rel("a", 20, 21, ok, tok(7), hold(1)),
			ask("a", 22, 23, ok, 1, 0),
		), Options{}, contract.NA, "", nil, ""},
		// While held, the answer is held to the key as ValidUntil is: it
		// counts from the ask's call, less the drift.
		{"a ttl answer past the key's expiry", lined(
			acq("a", 0, 1, ok, ttl(100), tok(7), hold(1)),
			ask("a", 10, 11, ok, 1, 500),
			acq("b", 150, 151, ok, ttl(100), tok(8), hold(1)),
		), Options{}, contract.Violated, RuleClaimOverlap, []int{2, 3}, ""},
		{"a ttl answer that the key outlived", lined(
			acq("a", 0, 1, ok, ttl(100), tok(7), hold(1)),
			ask("a", 10, 11, ok, 1, 90),
			acq("b", 100, 101, ok, ttl(100), tok(8), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
		{"a ttl answer ended by the hold's release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(7), hold(1)),
			ask("a", 10, 11, ok, 1, 990),
			rel("a", 20, 21, ok, tok(7), hold(1)),
			acq("b", 30, 31, ok, ttl(1000), tok(8), hold(1)),
		), Options{}, contract.OK, "", nil, ""},
	}
	runPropCases(t, cases)
}

// TestTTLAsksHaveDeadlines: a ttl op is a call, held to its context's
// deadline as every call is (late-return).
func TestTTLAsksHaveDeadlines(t *testing.T) {
	o := ask("a", 10, 1500, fail, 1, 0)
	due(110)(&o)
	runPropCases(t, []claimCase{{"a ttl ask back long after its deadline", lined(
		acq("a", 0, 1, ok, ttl(1000), hold(1)),
		o,
	), Options{CallSlack: 100 * time.Millisecond}, contract.Violated, RuleLateReturn, []int{2}, contract.PropCalls}})
}
