package checker

import (
	"fmt"
	"sort"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// A key whose lease ops carry a mode (history.Op.Mode: a read-write lock or
// a semaphore) is not an exclusive lease: read holds overlap each other,
// and so do permits up to the semaphore's capacity. The lease property
// judges such a key by two direct rules over the holds' surely-held spans
// (sharedSpans) instead of the exclusive lease model:
//   - rw-exclusion: no write hold's span overlaps another client's hold's;
//   - permits: at no instant do the spans of permit holds add up to more
//     than the largest capacity among them.
//
// The token rules apply to write and permit holds (direct.go). The claims
// property judges a claim only against holds of a conflicting mode
// (conflicting), and the loss-notice property its false-notice rule (a
// lock with a loss bound is not judged on such keys yet). Liveness applies
// as it is: it excuses a failed acquire by any other acquire that may have
// taken the key, a reader's or a permit's as well. The properties that
// assume one holder at a time (fairness, promptness, and the loss-notice
// rule) are not decided on such a key yet: Unknown, never a pass.

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
	acq      *lop
	from, to int64 // [from, to)
	mode     history.Mode
	permits  int64
	capacity int64
}

// sharedSpans are the surely-held spans of k's ok acquires. A release or
// renew names its hold by lease number (history.Op.Lease); without one, a
// client's release ends every hold of that client taken before its call,
// and renewals extend nothing (the lenient reading: shorter spans).
func sharedSpans(k *keyOps) []sharedSpan {
	var out []sharedSpan
	for _, a := range k.lease {
		if a.kind != history.Acquire || a.result != history.OK || a.ret == inf {
			continue
		}
		sp := sharedSpan{acq: a, from: a.ret, to: satAdd(a.call, a.validFor), mode: a.src.Mode,
			permits: max(a.src.Permits, 1), capacity: a.src.Capacity}
		if sp.mode == "" {
			sp.mode = history.ModeWrite // an exclusive hold among modes excludes all
		}
		for _, o := range k.lease {
			if o.client != a.client || o == a || o.call < a.call {
				continue
			}
			same := a.lease != 0 && o.lease == a.lease
			switch {
			case o.kind == history.Release && (same || (a.lease == 0 || o.lease == 0) && o.call >= a.ret):
				sp.to = min(sp.to, o.call)
			case o.kind == history.Renew && same && o.result == history.OK && o.call <= sp.to:
				sp.to = max(sp.to, satAdd(o.call, o.validFor))
			}
		}
		if sp.from < sp.to {
			out = append(out, sp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

// checkSharedLease decides the lease property on a key with modes.
func (c *run) checkSharedLease(k *keyOps) finding {
	spans := sharedSpans(k)
	v := contract.NA
	if len(spans) > 0 {
		v = contract.OK
	}
	vs := c.rwExclusion(k, spans)
	vs = append(vs, c.permitsRule(k, spans)...)
	vs = append(vs, c.tokenChecks(k)...)
	if v == contract.NA && len(k.lease) > 0 {
		v = contract.OK
	}
	return finding{verdict: v, violations: vs}
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
					c.p.describe(a.acq), a.mode, fmtTime(a.from), fmtTime(a.to), c.p.describe(b.acq), b.mode, fmtTime(b.from)), a.acq, b.acq))
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
				ops[i] = a.acq
			}
			vs = append(vs, c.violation(contract.PropLeaseName, RulePermits, k.key,
				fmt.Sprintf("at %s, %d permits were surely held (%d holds, the last %s) where the capacity is %d",
					fmtTime(s.from), sum, len(active), c.p.describe(s.acq), capacity), ops...))
			if len(vs) == maxSharedViolations {
				return vs
			}
		}
	}
	return vs
}

// permitsLiveness is liveness on a semaphore's key (holds of mode permits):
// a one-shot acquire of k permits fails (surely: result fail) although the
// permits that may be held then, and k, fit in the capacity, no waiter was
// in line, and no fault window (but those that keep Redis serving) was
// open within LivenessSlack before it. A hold counts until its ok
// release returned, or until LivenessSlack after its lease surely
// expired. A hold may be held
// from its acquire's call (ok or unknown) until its lease surely expired
// (the latest of its acquire's and its ok or unknown renewals' ends plus
// their TTL and drift) or its ok release returned. It reports whether any
// attempt was judged.
func (c *run) permitsLiveness(k *keyOps) ([]Violation, bool) {
	var acqs []*lop
	capacity := int64(0)
	for _, o := range k.lease {
		if o.kind == history.Acquire && o.src.Mode == history.ModePermits {
			acqs = append(acqs, o)
			capacity = max(capacity, o.src.Capacity)
		}
	}
	if capacity == 0 {
		return nil, false
	}
	slack := int64(c.opts.LivenessSlack)
	// until: a hold, until when it may be held: a release that returned
	// ended it then; an expiry, up to the slack later (Redis's expiry
	// and the next attempt's round trips).
	until := map[*lop]int64{}
	for _, a := range acqs {
		if a.result == history.Fail {
			continue
		}
		end, released := satAdd(satAdd(a.upto, a.expireFor), slack), inf
		for _, o := range k.lease {
			if o.client != a.client || o.call < a.call || a.lease == 0 || o.lease != a.lease {
				continue
			}
			switch {
			case o.kind == history.Renew && o.result != history.Fail:
				end = max(end, satAdd(satAdd(o.upto, o.expireFor), slack))
			case o.kind == history.Release && o.result == history.OK:
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
		var held int64
		var cited []*lop
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
			if a.result == history.Fail {
				continue
			}
			if until[a] >= x.call {
				held += max(a.src.Permits, 1)
				cited = append(cited, a)
			}
		}
		if excused {
			continue
		}
		checked = true
		if want := max(x.src.Permits, 1); held+want <= capacity {
			vs = append(vs, c.violation(contract.PropLivenessName, RuleLiveness, k.key,
				fmt.Sprintf("%s of %d permits failed at %s, although at most %d of the %d permits may have been held then (every other hold had surely expired or been released more than the slack %v before)",
					c.p.describe(x), want, fmtTime(x.call), held, capacity, c.opts.LivenessSlack), append(cited, x)...))
		}
	}
	return vs, checked
}
