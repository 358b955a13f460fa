package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// checkPromptness decides the promptness property on a key
// (Options.Handoff, a lock's hand-off bound H): a release that frees the
// lock while waiters are in line hands it to the head of the line, which
// is granted within H of the release's return (rule handoff-late).
//
// The releases judged are those that end a hold span of their client
// (clientSpans: an ok release that brings the client's holds to zero, with
// no op of unknown outcome in the span), so that the lock was freed: a
// nested release leaves the lock held, a release of unknown outcome may
// not have landed, and a hold that ended by its lease's expiry, not by a
// release, was promised no hand-off. For such a release r, the waiters
// owed the hand-off are the blocking acquires of other clients surely in
// line before r was called (in_line < r.call) and still waiting then
// (return > r.call). The grant g is the first ok blocking acquire, of any
// client, called before r (the head of the line is one of them: a waiter
// called later joined behind the owed ones), that returned after r.call
// and is no re-entry of its client's hold (reentrantGrants). r is judged
// when some waiter is owed, and is not judged
//
//   - when a blocking acquire called before r.return was in flight at
//     some instant of [r.call, r.return + H] and never returned, or
//     returned with an unknown outcome (a waiter that died in line, or may
//     hold, may be the head: the hand-off goes to it), or gave up (its
//     deadline, or its return, at or before r.return + H: its leave
//     passes a hand-off given to it on, a round trip later);
//   - when a fault window (but of a fault that keeps Redis serving) is
//     open at some instant of [r.call, min(g.return, r.return + H)]: the
//     promise is for a working deployment;
//   - when the history ends before r.return + H with no grant.
//
// A judged release whose grant returned after r.return + H, or that has
// no grant, is a violation naming the release, the head of the owed
// waiters (the first in line) and the grant. n/a when the lock states no
// bound or no release was judged.
func (c *run) checkPromptness(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	bound := c.opts.Handoff.Nanoseconds()
	if bound <= 0 {
		return f
	}
	var waits []*lop // blocking acquires, by call
	for _, o := range k.lease {
		if o.kind == history.Acquire && o.wait {
			waits = append(waits, o)
		}
	}
	if len(waits) == 0 {
		return f
	}
	var releases []*lop
	for _, spans := range c.clientSpans(k) {
		for _, s := range spans {
			if r := s.last; r != nil && r.kind == history.Release && r.result == history.OK && r.ret == s.end {
				releases = append(releases, r)
			}
		}
	}
	sort.Slice(releases, func(i, j int) bool { return releases[i].idx < releases[j].idx })
	reentrant := reentrantGrants(k.lease)
	for _, r := range releases {
		due := satAdd(r.ret, bound)
		var owed []*lop
		var grant *lop
		blocked := false
		for _, x := range waits {
			if x.call >= due {
				break
			}
			if x.ret <= r.call {
				continue // over before the release
			}
			if x.call < r.ret {
				switch {
				case x.ret == inf || x.result == history.Unknown:
					blocked = true
				case x.result == history.Fail && min(x.ret, x.deadline) <= due:
					blocked = true
				}
			}
			if x.call < r.call && x.result == history.OK && !reentrant[x] && (grant == nil || x.ret < grant.ret) {
				grant = x
			}
			if x.client != r.client && x.inLine < r.call {
				owed = append(owed, x)
			}
		}
		if len(owed) == 0 || blocked {
			continue
		}
		end := due
		if grant != nil && grant.ret <= due {
			end = max(grant.ret, r.call)
		} else if due > c.p.end {
			continue // the history ends before the hand-off was due
		}
		if c.faultDuring(r.call, end) {
			continue
		}
		f.verdict = contract.OK
		if grant != nil && grant.ret <= due {
			continue
		}
		head := owed[0]
		for _, x := range owed[1:] {
			if x.inLine < head.inLine {
				head = x
			}
		}
		waiters := "a waiter of another client"
		if len(owed) > 1 {
			waiters = fmt.Sprintf("%d waiters of other clients", len(owed))
		}
		why := fmt.Sprintf("%s freed the lock at %s with %s in line, %s first (in line since %s); ",
			c.p.describe(r), fmtTime(r.ret), waiters, c.p.describe(head), fmtTime(head.inLine))
		cited := []*lop{r, head}
		if grant != nil {
			why += fmt.Sprintf("the first of them granted, %s, returned at %s, %v after the release", c.p.describe(grant), fmtTime(grant.ret), time.Duration(grant.ret-r.ret))
			if grant != head {
				cited = append(cited, grant)
			}
		} else {
			why += fmt.Sprintf("none of them was granted (the history ends at %s)", fmtTime(c.p.end))
		}
		why += fmt.Sprintf("; the lock promises the head of the line the lock within %v of the release (a hand-off, not a waiter's own poll)", c.opts.Handoff)
		f.violations = append(f.violations, c.violation(contract.PropPromptnessName, RuleHandoffLate, k.key, why, cited...))
	}
	return f
}
