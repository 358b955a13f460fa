package checker

import (
	"testing"
	"time"
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
		), w100, want{lease: OK, resource: NA, liveness: OK}},
		{"served late after a release", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), w100, want{lease: OK, resource: NA, liveness: Violated, prop: PropLiveness, rule: RuleWaiterLiveness, lines: []int{2, 3}}},
		{"gave up although the crashed holder's lease had surely expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 500, fail, ttl(100), waits()),
		), w100, want{lease: OK, resource: NA, liveness: Violated, prop: PropLiveness, rule: RuleWaiterLiveness, lines: []int{1, 2}}},
		{"gave up while the holder's lease may still be valid", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 500, fail, ttl(100), waits()),
		), w100, want{lease: OK, resource: NA, liveness: OK}},
		{"a dead waiter ahead costs no more than the bound", lined(
			acq("d", 1, 2, unknown, ttl(1000), noReturn(), waits()),
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("b", 3, 250, ok, ttl(1000), tok(2), waits()),
		), w200, want{lease: OK, resource: NA, liveness: OK}},
		{"a dead waiter ahead held the waiter up past the bound", lined(
			acq("d", 1, 2, unknown, ttl(1000), noReturn(), waits()),
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("b", 3, 700, ok, ttl(1000), tok(2), waits()),
		), w200, want{lease: OK, resource: NA, liveness: Violated, prop: PropLiveness, rule: RuleWaiterLiveness, lines: []int{3, 4}}},
		{"an unknown release leaves the holder possible until expiry", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, unknown, tok(1)),
			acq("b", 2, 600, ok, ttl(1000), tok(2), waits()),
		), w100, want{lease: OK, resource: NA, liveness: OK}},
		{"an inner release leaves the outer hold", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("a", 2, 3, ok, ttl(100), tok(1)),
			rel("a", 50, 51, ok, tok(1)),
			acq("b", 4, 300, ok, ttl(1000), tok(2), waits()),
			rel("a", 250, 251, ok, tok(1)),
		), w100, want{lease: OK, resource: NA, liveness: OK}},
		{"a waiter that another holder went before is judged after that holder", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			rel("a", 100, 101, ok, tok(1)),
			acq("c", 5, 110, ok, ttl(1000), tok(2), waits()),
			rel("c", 300, 301, ok, tok(2)),
			acq("b", 6, 350, ok, ttl(1000), tok(3), waits()),
		), w100, want{lease: OK, resource: NA, liveness: OK}},
		{"a fault window excuses a late waiter", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
			fault("pause-server m", 150, 350),
		), w100, want{lease: OK, resource: NA, liveness: NA}},
		{"a fault window before the wait excuses nothing", lined(
			fault("crash-client d", 0, 1),
			acq("a", 2, 3, ok, ttl(1000), tok(1)),
			acq("b", 4, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), w100, want{lease: OK, resource: NA, liveness: Violated, prop: PropLiveness, rule: RuleWaiterLiveness, lines: []int{3, 4}}},
		{"a one-shot acquire is not a waiter", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1)),
			acq("b", 2, 500, fail, ttl(100)),
		), w100, want{lease: OK, resource: NA, liveness: NA}},
		{"no promise, no check", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1)),
			acq("b", 2, 400, ok, ttl(1000), tok(2), waits()),
			rel("a", 100, 101, ok, tok(1)),
		), Options{}, want{lease: OK, resource: NA, liveness: NA}},
	})
}
