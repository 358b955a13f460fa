package checker

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestWaiterLiveness pins the waiter-liveness rule (G3 for waiters) on both
// sides: a blocking acquire must get the key within WaitBound of the moment
// no other client may hold it, dead waiters ahead of it included.
func TestWaiterLiveness(t *testing.T) {
	w100 := Options{WaitBound: 100 * time.Millisecond}
	w200 := Options{WaitBound: 200 * time.Millisecond}
	runRuleCases(t, []ruleCase{
		{"served within the bound after a release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 160, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"served late after a release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{2, 3}}},
		{"gave up although the crashed holder's lease had surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 500, fail, ttl(100), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{1, 2}}},
		{"gave up while the holder's lease may still be valid", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 500, fail, ttl(100), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"a dead waiter ahead costs no more than the bound", lined(
			acq("d", 1, 2, unknown, ttl(1000), noReturn(), waits()),
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("b", 3, 250, ok, ttl(1000), tok(2), waits()),
		), w200, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"a dead waiter ahead held the waiter up past the bound", lined(
			acq("d", 1, 2, unknown, ttl(1000), noReturn(), waits()),
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("b", 3, 700, ok, ttl(1000), tok(2), waits()),
		), w200, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{3, 4}}},
		// An acquire of unknown outcome under a pause of its client may
		// land when the pause ends (run.landBy): its lease runs from then.
		{"an unknown acquire held by a fault lands when it heals", lined(
			fault("pause-client a", 10, 500),
			acq("a", 20, 100, unknown, ttl(100)),
			acq("b", 510, 650, ok, ttl(1000), tok(2), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"an unknown acquire outside any fault lands by its return", lined(
			acq("a", 20, 100, unknown, ttl(100)),
			acq("b", 510, 650, ok, ttl(1000), tok(2), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{2}}},
		{"an unknown release leaves the holder possible until expiry", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, unknown, tok(1)),
			acq("b", 2, 600, ok, ttl(1000), tok(2), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"an inner release leaves the outer hold", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 2, 3, ok, ttl(100), tok(1)),
			rel("a", 50, 51, ok, tok(1)),
			acq("b", 4, 300, ok, ttl(1000), tok(2), waits()),
			rel("a", 250, 251, ok, tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"a waiter that another holder went before is judged after that holder", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("c", 5, 110, ok, ttl(1000), tok(2), waits()),
			rel("c", 300, 301, ok, tok(2)),
			acq("b", 6, 350, ok, ttl(1000), tok(3), waits()),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
		{"a fault window excuses a late waiter", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
			fault("pause-server m", 150, 350),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"a window of a fault that keeps Redis serving excuses nothing", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
			fault("pubsub-reset m", 150, 350),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{2, 3}}},
		{"a fault window before the wait excuses nothing", lined(
			fault("crash-client d", 0, 1),
			acq("a", 2, 3, ok, ttl(1000), tok(1)),
			acq("b", 4, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{3, 4}}},
		{"a one-shot acquire is not a waiter", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 500, fail, ttl(100)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
		{"no promise, no check", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), Options{}, want{lease: contract.OK, resource: contract.NA, liveness: contract.NA}},
	})
}

// TestTokenOrderExemptionExcludesB: the direct token-order rule exempts a
// client that gets its own token again only while another of its leases
// with that token may still be valid; the new acquire itself never counts
// (docs/DESIGN.md: the "may hold" exception excludes B). Run on the direct
// rule alone, as when the search runs out of budget.
func TestTokenOrderExemptionExcludesB(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want bool
	}{
		{"own token again after the lease surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(5)),
			acq("a", 500, 501, ok, ttl(100), tok(5)),
		), true},
		{"own token again while the lease may be valid", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(5)),
			acq("a", 500, 501, ok, ttl(100), tok(5)),
		), false},
	} {
		p, err := prepare(tc.ops, DefaultDrift)
		if err != nil {
			t.Fatal(err)
		}
		c := &run{ctx: context.Background(), p: p}
		vs := c.tokenChecks(p.keys[0])
		if got := len(vs) > 0; got != tc.want {
			t.Errorf("%s: token-order violations %v; want some: %v", tc.name, vs, tc.want)
		}
	}
}

// TestHoldSpansEndAtExpiry: a span whose lease surely expired is over; a
// renewal called after that does not reopen it, and a later acquire opens
// a span of its own (docs/DESIGN.md, waiter-liveness).
func TestHoldSpansEndAtExpiry(t *testing.T) {
	w100 := Options{WaitBound: 100 * time.Millisecond}
	runRuleCases(t, []ruleCase{
		{"a late unknown renewal does not excuse a late waiter", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 400, fail, ttl(100), waits()),
			renew("a", 300, 301, unknown, ttl(100), tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{1, 2}}},
		{"an acquire after the waiter returned does not stretch the span before it", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 400, fail, ttl(100), waits()),
			acq("a", 700, 701, ok, ttl(1000), tok(2)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.Violated, prop: contract.PropLivenessName, rule: RuleWaiterLiveness, lines: []int{1, 2}}},
		{"a renewal in time keeps the span", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 260, fail, ttl(100), waits()),
			renew("a", 80, 81, ok, ttl(100), tok(1)),
		), w100, want{lease: contract.OK, resource: contract.NA, liveness: contract.OK}},
	})
}
