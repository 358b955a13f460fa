package checker

import (
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// inspect is an ok inspect by c that found the key held by holder ("":
// free; "?": held by someone it did not name).
func inspect(c string, call, ret float64, holder string, opts ...opt) history.Op {
	o := mk(history.Inspect, c, "k", call, ret, ok, opts...)
	switch holder {
	case "":
	case "?":
		o.Held = true
	default:
		o.Held, o.Holder = true, holder
	}
	return o
}

// holds is an ok holds op by c that counted n holds of its own.
func holds(c string, call, ret float64, n int64) history.Op {
	o := mk(history.Holds, c, "k", call, ret, ok)
	o.HoldCount, o.HasHolds = n, true
	return o
}

func count(n int64) opt { return func(o *history.Op) { o.HoldCount, o.HasHolds = n, true } }

// TestInspectRules: the rule table of inspect-free, inspect-holder and
// hold-count (lease property).
func TestInspectRules(t *testing.T) {
	na := contract.NA
	okAll := want{lease: contract.OK, resource: na, liveness: na}
	bad := func(rule string, lines ...int) want {
		return want{lease: contract.Violated, resource: na, liveness: na, prop: contract.PropLeaseName, rule: rule, lines: lines}
	}
	runRuleCases(t, []ruleCase{
		{"the holder named while it holds", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 2, 3, "a", tok(1), count(1)),
			holds("a", 4, 5, 1),
			rel("a", 6, 7, ok, hold(1)),
			inspect("b", 8, 9, ""),
			holds("a", 10, 11, 0),
		), Options{}, okAll},
		{"free while a hold is surely live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 2, 3, ""),
		), Options{}, bad(RuleInspectFree, 1, 2)},
		{"another named while a hold is surely live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("a", 2, 3, "b"),
		), Options{}, bad(RuleInspectFree, 1, 2)},
		{"held by someone unnamed while a hold is surely live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 2, 3, "?"),
		), Options{}, okAll},
		// At the bound: a TTL of 1000 ms less 1% drift surely lasts 990 ms
		// from the acquire's call; an inspect returning at 991 may see the
		// key gone.
		{"free after the lease may have expired", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 980, 991, ""),
		), Options{}, okAll},
		{"free before the lease may have expired", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 980, 989, ""),
		), Options{}, bad(RuleInspectFree, 1, 2)},
		{"free while a release is on its way", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 8, unknown, hold(1)),
			inspect("b", 3, 4, ""),
		), Options{}, okAll},
		{"free after a loss notice", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			history.Op{Client: "a", Kind: history.Lost, Key: "k", Call: 2 * msNs, Return: 2 * msNs, Completed: true, Result: ok, Hold: 1},
			inspect("b", 3, 4, ""),
		), Options{}, okAll},
		{"free within a failover window", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			fault("failover", 2, 3),
			inspect("b", 4, 5, ""),
		), Options{}, okAll},
		{"a renewal keeps the hold surely live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			renew("a", 500, 501, ok, ttl(1000), tok(1), hold(1)),
			inspect("b", 1200, 1201, ""),
		), Options{}, bad(RuleInspectFree, 1, 3)},
		{"a holder that never acquired", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			inspect("c", 4, 5, "z"),
		), Options{}, bad(RuleInspectHolder, 3)},
		{"a holder whose hold was released", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			inspect("c", 4, 5, "a"),
		), Options{}, bad(RuleInspectHolder, 3)},
		{"a holder whose hold expired", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1)),
			inspect("c", 200, 201, "a"),
		), Options{}, bad(RuleInspectHolder, 2)},
		{"a holder named with a fence it never got", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			inspect("c", 4, 5, "a", tok(7)),
		), Options{}, bad(RuleInspectHolder, 1, 2)},
		{"a holder whose acquire is unknown may hold", lined(
			acq("a", 0, 10, unknown, ttl(1000), hold(1)),
			inspect("c", 4, 5, "a", tok(7)),
		), Options{}, okAll},
		{"a stale holder near a failover is not judged", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			fault("failover", 4, 5),
			inspect("c", 6, 7, "a"),
		), Options{}, okAll},
		{"near a failover, a holder that never acquired", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			fault("failover", 4, 5),
			inspect("c", 6, 7, "b"),
		), Options{}, bad(RuleInspectHolder, 4)},
		{"near a failover, a fence none of the holder's holds has", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			fault("failover", 4, 5),
			inspect("c", 6, 7, "a", tok(2)),
		), Options{}, bad(RuleInspectHolder, 1, 4)},
		{"near a failover, a released hold may count", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			rel("a", 4, 5, ok, hold(2)),
			fault("failover", 6, 7),
			holds("a", 8, 9, 2),
			holds("a", 10, 11, 3),
		), Options{}, bad(RuleHoldCount, 6)},
		{"fewer holds than are surely live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			holds("a", 4, 5, 1),
		), Options{}, bad(RuleHoldCount, 2, 3)},
		{"more holds than may be live", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			rel("a", 4, 5, ok, hold(2)),
			holds("a", 6, 7, 2),
		), Options{}, bad(RuleHoldCount, 4)},
		{"a nested hold's unknown release leaves the count open", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			rel("a", 4, 5, unknown, hold(2)),
			holds("a", 6, 7, 2),
			holds("a", 8, 9, 1),
		), Options{}, okAll},
		{"the holder's count on an inspect", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2)),
			inspect("b", 4, 5, "a", tok(1), count(1)),
		), Options{}, bad(RuleHoldCount, 2, 3)},
		// A failed one-shot acquire took nothing: a lock that names its
		// client, under a fence nobody was given, kept a hold it said it
		// never took (the fourth review's defect 4: WithRetry gave up at a
		// refusal after an attempt whose reply was lost, and left that
		// attempt's hold for its TTL).
		{"a failed one-shot acquire named the holder", lined(
			acq("a", 0, 10, fail, ttl(1000), hold(1)),
			inspect("b", 11, 12, "a", tok(7), count(1)),
		), Options{}, bad(RuleInspectHolder, 2)},
		// A failed wait's place may outlive it, and be handed the key in
		// its client's name until that client is served again (package
		// lock leaves the line in the background after a refusal).
		{"a failed wait's place named the holder", lined(
			acq("a", 0, 10, fail, waits(), ttl(1000), hold(1)),
			inspect("b", 11, 12, "a", tok(7), count(1)),
		), Options{}, okAll},
		{"a failed wait's place named after its client was served again", lined(
			acq("a", 0, 10, fail, waits(), ttl(1000), hold(1)),
			acq("a", 11, 12, ok, ttl(1000), tok(8), hold(2)),
			rel("a", 13, 14, ok, hold(2)),
			inspect("b", 15, 16, "a", tok(7)),
		), Options{}, bad(RuleInspectHolder, 4)},
	})
}
