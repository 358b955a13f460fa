package checker

import (
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// Review of the shared rules (rw-exclusion, permits, permits liveness),
// 2026-12-07: hand-made histories where the checker was wrong at 8520160
// (each TestReview* case but TestReviewHeld failed there: four false
// alarms of liveness, three false passes of rw-exclusion); fixed since
// (sharedLiveness, sharedSpans), they keep it right. The comments say
// what the checker did then.

// TestReviewLivenessConcurrentHolder: the exclusive liveness rule
// (direct.go liveness) runs as it is on keys with modes, and excuses a
// failed attempt only by an acquire that returned after the stopped
// holder's call (y.ret > l.call: on a mutex, a hold taken before l's
// surely ended before l got the key). Readers and permit holders overlap:
// a reader b taken before a's read still stands (10 s lease) and surely
// blocks the writer c, yet a's crash makes c's refused try a violation.
func TestReviewLivenessConcurrentHolder(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"a writer refused while an older reader still holds", lined(
			acq("b", 0, 1, ok, ttl(10000), tok(1), hold(1), reading()),
			acq("a", 2, 3, ok, ttl(100), tok(2), hold(1), reading()),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), writing()),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
		{"permits refused while older permits are still out", lined(
			acq("b", 0, 1, ok, ttl(10000), tok(1), hold(1), permits(2, 3)),
			acq("a", 2, 3, ok, ttl(100), tok(2), hold(1), permits(1, 3)),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), permits(2, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
	})
}

// TestReviewPermitsLivenessRenewedWithoutNumbers: permitsLiveness reads a
// hold's renewals (and releases) only by lease number; without numbers
// (the contract's "absent: not said") a renewed hold counts as expired
// a TTL after its acquire, and a try refused while it surely stands is
// flagged.
func TestReviewPermitsLivenessRenewedWithoutNumbers(t *testing.T) {
	na := contract.NA
	var ops = []history.Op{acq("a", 0, 1, ok, ttl(1000), tok(1), permits(3, 3))}
	for ms := 500.0; ms <= 3000; ms += 500 {
		ops = append(ops, renew("a", ms, ms+1, ok, ttl(1000), tok(1), permits(3, 0)))
	}
	ops = append(ops, acq("c", 3200, 3201, fail, ttl(100), permits(1, 3)))
	runRuleCases(t, []ruleCase{
		{"a renewed hold of every permit", lined(ops...), Options{},
			want{lease: contract.OK, resource: na, liveness: contract.OK}},
	})
}

// TestReviewPermitsLivenessCallersCapacity: the semaphore's N is the
// call's (ARGV[12] of sharedAcquireScript: a call is admitted when the
// permits fit in ITS capacity). permitsLiveness judges every try against
// the largest capacity any call named, so a try whose own N is full is
// flagged.
func TestReviewPermitsLivenessCallersCapacity(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"a try refused by its own capacity", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), permits(1, 3)),
			acq("b", 2, 3, ok, ttl(10000), tok(2), hold(1), permits(1, 1)),
			acq("c", 3000, 3001, fail, ttl(100), hold(1), permits(1, 1)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
	})
}

// TestReviewPermitsLivenessLateLanding: an acquire of unknown outcome held
// by a fault lands when the fault heals, and its lease runs a TTL from
// then (run.landBy, used by holdSpans for the same reason). permitsLiveness
// counts it from its return (a.upto) instead: after a long pause-server
// window a try refused while the late-landed hold stands is flagged.
func TestReviewPermitsLivenessLateLanding(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"permits taken when the server resumed", lined(
			fault("pause-server", 1000, 6000),
			acq("a", 1000, 1100, unknown, ttl(3000), hold(1), permits(3, 3)),
			acq("c", 7100, 7101, fail, ttl(100), hold(1), permits(1, 3)),
		), Options{}, want{lease: contract.OK, resource: na, liveness: contract.OK}},
	})
}

// TestReviewRenewedUnknownWrite: a write acquire of unknown outcome whose
// renewal (by its lease number) came back ok surely stood then: the lock
// renews only a live hold (sharedRenewScript returns 0 otherwise). Its
// span after the renewal is surely held, yet sharedSpans starts spans
// only from ok acquires: a reader admitted beside it passes.
func TestReviewRenewedUnknownWrite(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"a reader beside a renewed write", lined(
			acq("a", 0, 1, unknown, ttl(1000), hold(1), writing()),
			renew("a", 10, 11, ok, ttl(1000), hold(1), writing()),
			acq("b", 20, 21, ok, ttl(1000), tok(2), hold(1), reading()),
		), Options{}, want{lease: contract.Violated, resource: na, liveness: na,
			prop: contract.PropLeaseName, rule: RuleRWExclusion, lines: []int{2, 3}}},
	})
}

// TestReviewRenewAfterSpanEnd: a renewal called after the hold's span
// surely ran out extends nothing (o.call <= sp.to), even when it comes
// back ok: the lock then told a its read hold stands for another TTL,
// while c's write, admitted once a's first lease ran out, stands too.
func TestReviewRenewAfterSpanEnd(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"an ok renewal of an expired read beside a write", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), reading()),
			acq("c", 120, 121, ok, ttl(1000), tok(2), hold(1), writing()),
			renew("a", 150, 151, ok, ttl(1000), hold(1), reading()),
		), Options{}, want{lease: contract.Violated, resource: na, liveness: na,
			prop: contract.PropLeaseName, rule: RuleRWExclusion, lines: []int{2, 3}}},
	})
}

// TestReviewUnnumberedReleaseEndsAllHolds: without lease numbers, one
// release ends every hold of its client (the lenient reading). A client
// with two holds (a write and its downgrade read) that releases once
// still holds one, by count; a reader admitted then beside its write
// passes. Reading by count (as holdSpans does) would catch it.
func TestReviewUnnumberedReleaseEndsAllHolds(t *testing.T) {
	na := contract.NA
	runRuleCases(t, []ruleCase{
		{"one release of two holds", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), writing()),
			acq("a", 2, 3, ok, ttl(10000), tok(1), reading()),
			rel("a", 4, 5, ok, reading()),
			acq("b", 6, 7, ok, ttl(10000), tok(2), writing()),
			rel("a", 8, 9, ok, writing()),
		), Options{}, want{lease: contract.Violated, resource: na, liveness: na,
			prop: contract.PropLeaseName, rule: RuleRWExclusion, lines: []int{1, 4}}},
	})
}

// TestReviewHeld: cases believed right that pass (what held).
func TestReviewHeld(t *testing.T) {
	na := contract.NA
	okAll := want{lease: contract.OK, resource: na, liveness: na}
	bad := func(rule string, lines ...int) want {
		return want{lease: contract.Violated, resource: na, liveness: na, prop: contract.PropLeaseName, rule: rule, lines: lines}
	}
	runRuleCases(t, []ruleCase{
		{"release of another lease does not cut", lined(
			acq("a", 0, 1, ok, ttl(10000), tok(1), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(10000), tok(1), hold(2), reading()),
			rel("a", 4, 5, ok, hold(2), reading()),
			acq("b", 6, 7, ok, ttl(10000), tok(2), hold(1), reading()),
		), Options{}, bad(RuleRWExclusion, 1, 4)},
		{"a renewal keeps the write", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), writing()),
			renew("a", 50, 51, ok, ttl(100), hold(1), writing()),
			renew("a", 100, 101, ok, ttl(100), hold(1), writing()),
			acq("b", 160, 161, ok, ttl(100), tok(2), hold(1), reading()),
		), Options{}, bad(RuleRWExclusion, 1, 4)},
		{"a renewal of another lease does not extend", lined(
			acq("a", 0, 1, ok, ttl(100), tok(1), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2), reading()),
			renew("a", 50, 51, ok, ttl(1000), hold(2), reading()),
			rel("a", 60, 61, ok, hold(2), reading()),
			acq("b", 160, 161, ok, ttl(100), tok(2), hold(1), writing()),
		), Options{}, okAll},
		{"same client, write beside its own read", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(1000), tok(1), hold(2), reading()),
		), Options{}, okAll},
		{"permits by one client count", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(2, 3)),
			acq("a", 2, 3, ok, ttl(1000), tok(2), hold(2), permits(2, 3)),
		), Options{}, bad(RulePermits, 1, 2)},
		{"permits: the peak is at a later start", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), permits(1, 2)),
			acq("b", 2, 3, ok, ttl(50), tok(2), hold(1), permits(1, 2)),
			acq("c", 100, 101, ok, ttl(1000), tok(3), hold(1), permits(1, 2)),
			acq("d", 102, 103, ok, ttl(1000), tok(4), hold(1), permits(1, 2)),
		), Options{}, bad(RulePermits, 1, 3, 4)},
		{"unknown release cuts at its call (client stopped)", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1), writing()),
			rel("a", 4, 5, unknown, hold(1), writing()),
			acq("b", 6, 7, ok, ttl(1000), tok(2), hold(1), reading()),
		), Options{}, okAll},
		{"reentrant write keeps its token", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(3), hold(1), writing()),
			acq("a", 2, 3, ok, ttl(1000), tok(3), hold(2), reading()),
			acq("a", 4, 5, ok, ttl(1000), tok(3), hold(3), writing()),
		), Options{}, okAll},
	})
}
