package checker

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// A key whose lease ops carry a mode (history.Op.Mode: a read-write lock or
// a semaphore) is not an exclusive lease: read holds overlap each other,
// and so do permits up to the semaphore's capacity. The lease property
// judges such a key by the lease model of modes (shared_model.go: an
// order of the ops, searched as for the exclusive model) and by two
// direct rules over the holds' surely-held spans (sharedSpans):
//   - rw-exclusion: no write hold's span overlaps another client's hold's;
//   - permits: at no instant do the spans of permit holds add up to more
//     than the largest capacity among them.
//
// The token rules apply to write and permit holds (direct.go). The claims
// property judges a claim only against holds of a conflicting mode
// (conflicting), and the loss-notice property its false-notice rule (a
// lock with a loss bound is not judged on such keys yet). Liveness is
// sharedLiveness, not the mutex's rule (a hold taken before a stopped one
// may still stand beside it), with waiter liveness as it is. Fairness
// counts as an overtaking only a grant that kept the waiter out
// (keepsWaiting). The properties that assume one holder at a time
// (promptness, and the loss-notice rule) are not decided on such a key
// yet: Unknown, never a pass.

// conflicting reports whether holds of the modes of ops a and b (their
// history.Op.Mode) may not overlap: exclusive and write holds conflict
// with every hold, read holds with each other do not, and permits are
// judged by the permits rule alone (any number of holders may overlap
// within the capacity).
func conflicting(a, b *lop) bool {
	ma, mb := a.src.Mode, b.src.Mode
	if ma == history.ModePermits || mb == history.ModePermits {
		return false
	}
	return !(ma == history.ModeRead && mb == history.ModeRead)
}

// keepsWaiting reports whether a hold granted to y keeps a waiter x out
// while it stands, so that y granted ahead of x (y joined the line
// after x) passed x by (the fairness property's rule overtaken): a write
// hold and any other hold; permits when y's, x's and those of the holds
// surely held all through y's acquire (spans, of others than x and y)
// do not fit the capacity together. Two read holds, or permits that fit
// beside each other and the holds out, are admitted in either order by a
// FIFO line (the second's place has the first's ahead of it and is
// admitted only when the first could be too), so neither passes the
// other.
func keepsWaiting(y, x *lop, spans []sharedSpan) bool {
	my, mx := y.src.Mode, x.src.Mode
	if my == history.ModePermits || mx == history.ModePermits {
		if my != mx {
			return true // a hold of another kind on the same key: no sharing is known
		}
		c := max(y.src.Capacity, x.src.Capacity)
		out := max(y.src.Permits, 1) + max(x.src.Permits, 1)
		for _, s := range spans {
			if s.acq != x && s.acq != y && s.from <= y.call && s.to >= y.ret {
				out += s.permits
			}
		}
		return c <= 0 || out > c
	}
	return conflicting(y, x)
}

// sharedKey reports whether k's lease ops carry a mode.
func sharedKey(k *keyOps) bool {
	for _, o := range k.lease {
		if o.src.Mode != "" {
			return true
		}
	}
	return false
}

// undecidedShared is the finding of a property not decided on a key with
// modes.
func undecidedShared(k *keyOps) finding {
	return finding{verdict: contract.Unknown,
		undecided: fmt.Sprintf("key %q has read-write or permit holds (mode): this property assumes one holder at a time and does not judge them yet", k.key)}
}

// sharedSpan is one hold as surely held: from the return of its ok acquire
// until its validity surely ran out (extended by its ok renewals) or its
// client began to release it, whichever is first.
type sharedSpan struct {
	acq      *lop  // the hold's acquire
	by       *lop  // the op whose return opened the span: the acquire, or an ok renewal
	from, to int64 // [from, to)
	mode     history.Mode
	permits  int64
	capacity int64
}

// sharedSpans are the surely-held spans of k's holds. A hold is surely
// held from the return of its ok acquire until its validity surely ran out
// (call + TTL×(1−drift)), extended by each ok renewal of it called while
// it stood; an ok renewal called after that, or of an acquire of unknown
// outcome, says the hold stood (the lock renews only a hold that stands):
// a span of its own from its return. A release or renew names its hold by
// lease number; without one, a client's release ends every hold of that
// client and of the release's mode (any, when it says none) taken before
// its call, and renewals extend nothing (the lenient reading: shorter
// spans). A span ends at the call of the hold's first
// release, whatever its result.
func sharedSpans(k *keyOps) []sharedSpan {
	var out []sharedSpan
	for _, a := range k.lease {
		if a.kind != history.Acquire || a.result == history.Fail || a.ret == inf && a.result == history.OK {
			continue
		}
		mode := a.src.Mode
		if mode == "" {
			mode = history.ModeWrite // an exclusive hold among modes excludes all
		}
		cur := sharedSpan{acq: a, mode: mode, permits: max(a.src.Permits, 1), capacity: a.src.Capacity, from: inf, to: inf}
		open := false
		if a.result == history.OK {
			cur.from, cur.to, cur.by, open = a.ret, satAdd(a.call, a.validFor), a, true
		}
		end := inf // the call of its first release
		for _, o := range k.lease {
			if o.client != a.client || o == a || o.call < a.call || o.call >= end {
				continue
			}
			same := a.lease != 0 && o.lease == a.lease
			switch {
			case o.kind == history.Release && (same || (a.lease == 0 || o.lease == 0) && o.call >= a.ret &&
				(o.src.Mode == "" || holdMode(o) == holdMode(a))):
				end = o.call
			case o.kind == history.Renew && same && o.result == history.OK && o.ret != inf:
				if open && o.call <= cur.to {
					cur.to = max(cur.to, satAdd(o.call, o.validFor))
					continue
				}
				if open && cur.from < cur.to {
					out = append(out, cur)
				}
				cur.from, cur.to, cur.by, open = o.ret, satAdd(o.call, o.validFor), o, true
			}
		}
		if open {
			cur.to = min(cur.to, end)
			if cur.from < cur.to {
				out = append(out, cur)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

// checkSharedLease decides the lease property on a key with modes.
func (c *run) checkSharedLease(k *keyOps) finding {
	// The direct rules judge the surely-held spans and name every pair
	// that broke; the lease model of modes (shared_model.go) searches
	// the orders of the ops for what only an order shows (a release of a
	// hold that was gone, a writer admitted before a reader's release can
	// have landed). It runs when the rules found nothing: proving that no
	// order fits takes the search every order, and on a history the
	// rules already found broken (a lock under key-loss, say: a 161-op
	// chunk of fenced-rw) that ran out of any budget, for a verdict
	// already known.
	spans := sharedSpans(k)
	vs := c.rwExclusion(k, spans)
	vs = append(vs, c.permitsRule(k, spans)...)
	vs = append(vs, c.tokenChecks(k)...)
	vs = append(vs, c.releasedTwice(k)...)
	if len(vs) > 0 {
		return finding{verdict: contract.Violated, violations: vs}
	}
	v, undecided, vs := c.porcupineCheck(k.key, k.lease, contract.PropLeaseName)
	if v == contract.NA && len(k.lease) > 0 {
		v = contract.OK // only ops the model skips (failed attempts): nothing broke
	}
	return finding{verdict: v, undecided: undecided, violations: vs}
}

// maxSharedViolations bounds the violations one rule reports on a key: the
// first ones say what broke, and a broken lock would otherwise flood the
// report with every pair.
const maxSharedViolations = 10

// rwExclusion: no write span overlaps another client's span.
func (c *run) rwExclusion(k *keyOps, spans []sharedSpan) []Violation {
	var vs []Violation
	for i := range spans {
		for j := i + 1; j < len(spans) && spans[j].from < spans[i].to; j++ {
			a, b := spans[i], spans[j]
			if a.acq.client == b.acq.client || (a.mode != history.ModeWrite && b.mode != history.ModeWrite) {
				continue
			}
			vs = append(vs, c.violation(contract.PropLeaseName, RuleRWExclusion, k.key,
				fmt.Sprintf("%s (%s hold) was surely held from %s to %s, and %s (%s hold) from %s: a write hold overlapped another client's hold",
					c.p.describe(a.by), a.mode, fmtTime(a.from), fmtTime(a.to), c.p.describe(b.by), b.mode, fmtTime(b.from)), a.by, b.by))
			if len(vs) == maxSharedViolations {
				return vs
			}
		}
	}
	return vs
}

// permitsRule: at no instant more permits surely held than the largest
// capacity of the holds standing then.
func (c *run) permitsRule(k *keyOps, spans []sharedSpan) []Violation {
	var vs []Violation
	var active []sharedSpan
	for _, s := range spans {
		if s.mode != history.ModePermits {
			continue
		}
		// Spans that ended by s.from are out ([from, to)).
		kept := active[:0]
		for _, a := range active {
			if a.to > s.from {
				kept = append(kept, a)
			}
		}
		active = append(kept, s)
		var sum, capacity int64
		for _, a := range active {
			sum += a.permits
			capacity = max(capacity, a.capacity)
		}
		if capacity > 0 && sum > capacity {
			ops := make([]*lop, len(active))
			for i, a := range active {
				ops[i] = a.by
			}
			vs = append(vs, c.violation(contract.PropLeaseName, RulePermits, k.key,
				fmt.Sprintf("at %s, %d permits were surely held (%d holds, the last %s) where the capacity is %d",
					fmtTime(s.from), sum, len(active), c.p.describe(s.by), capacity), ops...))
			if len(vs) == maxSharedViolations {
				return vs
			}
		}
	}
	return vs
}

// sharedLiveness is liveness on a key with modes (a read-write lock or a
// semaphore), where the mutex's rule (liveness: a failure after a stopped
// holder's lease expired, unless another acquire may have taken the key)
// does not hold: readers and permits overlap, so a hold taken before the
// stopped one may still stand. A one-shot acquire x with result fail is a
// violation when, beside the holds that may be held then, the lock would
// have admitted it: a write with no hold, a read with no write hold, k
// permits that fit in x's own capacity (the lock judges each call by its
// own N); and no waiter was in line at any instant of it, and no fault
// window (but those that keep Redis serving) was open from LivenessSlack
// before its call to its return. A hold (an ok or unknown acquire) may be
// held from its call until its ok release returned, or until
// LivenessSlack after its lease surely expired: from when its acquire (or
// its last renewal that did not fail) may have landed (landBy: a request
// held by a paused server runs when it resumes), plus its TTL and drift.
// A renewal or release names its hold by lease number; without numbers,
// every later renewal of the client extends its holds (the cautious
// reading for this rule) and no release ends them. It reports whether any
// attempt was judged.
func (c *run) sharedLiveness(k *keyOps) ([]Violation, bool) {
	var acqs []*lop
	for _, o := range k.lease {
		if o.kind == history.Acquire {
			acqs = append(acqs, o)
		}
	}
	slack := int64(c.opts.LivenessSlack)
	until := map[*lop]int64{}
	for _, a := range acqs {
		if a.result == history.Fail {
			continue
		}
		end, released := satAdd(satAdd(c.landBy(a), a.expireFor), slack), inf
		for _, o := range k.lease {
			if o.client != a.client || o.call < a.call || o == a {
				continue
			}
			numbered := a.lease != 0 && o.lease != 0
			if numbered && o.lease != a.lease {
				continue
			}
			switch {
			case o.kind == history.Renew && o.result != history.Fail:
				end = max(end, satAdd(satAdd(c.landBy(o), o.expireFor), slack))
			case o.kind == history.Release && o.result == history.OK && numbered:
				released = min(released, o.ret)
			}
		}
		until[a] = min(end, released)
	}
	var vs []Violation
	checked := false
	for _, x := range acqs {
		if x.result != history.Fail || x.wait || x.ret == inf || c.faultDuring(x.call-slack, x.ret) {
			continue
		}
		var held []*lop
		var permits int64
		excused := false
		for _, a := range acqs {
			if a == x || a.call > x.ret {
				continue
			}
			if a.wait && a.upto >= x.call {
				// A waiter in line (whatever came of its wait: one that
				// gave up later stood in line meanwhile) may be served
				// first: a try is refused while anybody waits.
				excused = true
				break
			}
			if a.result != history.Fail && until[a] >= x.call {
				held = append(held, a)
				permits += max(a.src.Permits, 1)
			}
		}
		if excused {
			continue
		}
		mode := x.src.Mode
		fits := false
		switch mode {
		case history.ModePermits:
			fits = x.src.Capacity > 0 && permits+max(x.src.Permits, 1) <= x.src.Capacity
		case history.ModeRead:
			fits = !slices.ContainsFunc(held, func(a *lop) bool { return a.src.Mode != history.ModeRead })
		default:
			fits = len(held) == 0
		}
		checked = true
		if !fits {
			continue
		}
		why := fmt.Sprintf("%s (%s) failed at %s, although no hold that may have stood then (%d of them, %d permits) and no waiter in line kept it out (every other hold had been released, or had surely expired more than the slack %v before)",
			c.p.describe(x), mode, fmtTime(x.call), len(held), permits, c.opts.LivenessSlack)
		vs = append(vs, c.violation(contract.PropLivenessName, RuleLiveness, k.key, why, append(held, x)...))
	}
	return vs, checked
}
