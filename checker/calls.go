package checker

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// checkCalls decides the calls property on a key (G5): what the lock
// promises its caller about the calls themselves.
//
//   - late-return (Options.CallSlack): an op with a deadline returns by
//     max(deadline, call) + CallSlack. An op that never returned is late
//     when the history reaches past that instant. An op whose window
//     overlaps one of a fault that freezes or kills clients
//     (contract.StopsClients) is not judged: a frozen process returns late
//     through no fault of its lock.
//   - closed-grant (Options.CloseRefuses): an ok acquire by a client called
//     at or after the return of that client's first ok close; or called
//     before it and returned after it (a wait in line when the handle was
//     closed) while another hold was surely live from its call to the
//     close's return, so that its grant came after the close. A client is
//     one handle, on every key; a close of unknown outcome proves nothing.
//
// n/a when both rules are off or nothing was judged.
func (c *run) checkCalls(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	if slack := c.opts.CallSlack.Nanoseconds(); slack > 0 {
		for _, ops := range [][]*lop{k.lease, k.resource, k.closes, k.asks} {
			for _, o := range ops {
				if v, judged := c.lateReturn(k, o, slack); judged {
					f.verdict = contract.OK
					if v != nil {
						f.violations = append(f.violations, *v)
					}
				}
			}
		}
	}
	if c.opts.CloseRefuses {
		var idx inspectIndex // built when a wait spans a close
		for _, o := range k.lease {
			cl := c.p.closed[o.client]
			if o.kind != history.Acquire || cl == nil {
				continue
			}
			var taken *lop // the hold that kept the key while a wait spanned the close
			if o.call < cl.ret {
				// Called before the close returned: it may have been
				// granted before the close, unless the key was surely
				// taken by another hold until the close returned (a
				// wait in line when the handle was closed, served
				// later).
				if o.ret == inf || o.ret <= cl.ret {
					continue
				}
				if idx == nil {
					idx = c.inspectIndex(k)
				}
				if taken = c.takenThroughout(idx, o, o.call, cl.ret); taken == nil {
					continue
				}
			}
			f.verdict = contract.OK
			if o.result != history.OK {
				continue
			}
			why := fmt.Sprintf("%s was called at %s, after %s had returned at %s, and got the lock: a closed handle grants a lease it no longer looks after",
				c.p.describe(o), fmtTime(o.call), c.p.describe(cl), fmtTime(cl.ret))
			cited := []*lop{cl, o}
			if taken != nil {
				why = fmt.Sprintf("%s was waiting when %s returned at %s, %s holding the key from its call until then, and got the lock at %s: a closed handle grants a lease it no longer looks after",
					c.p.describe(o), c.p.describe(cl), fmtTime(cl.ret), c.p.describe(taken), fmtTime(o.ret))
				cited = []*lop{cl, taken, o}
			}
			f.violations = append(f.violations, c.violation(contract.PropCallsName, RuleClosedGrant, k.key, why, cited...))
		}
	}
	return f
}

// lateReturn judges one op under late-return: judged false when the rule
// says nothing of it (no deadline, a client stopped during it, or a
// never-returned op the history does not outlast), and a violation when
// it came back, or was still running, past its due instant.
func (c *run) lateReturn(k *keyOps, o *lop, slack int64) (*Violation, bool) {
	if o.deadline == inf {
		return nil, false
	}
	due := satAdd(max(o.deadline, o.call), slack)
	if o.ret == inf && c.p.end <= due {
		return nil, false // the history ends before the op was due
	}
	if o.ret <= due {
		return nil, true
	}
	if c.lateExcused(o, min(o.ret, c.p.end)-due) {
		return nil, false
	}
	back := "returned at " + fmtTime(o.ret)
	if o.ret == inf {
		back = "had not returned when the history ended at " + fmtTime(c.p.end)
	}
	v := c.violation(contract.PropCallsName, RuleLateReturn, k.key,
		fmt.Sprintf("%s %s, %s after its context's deadline %s (the lock allows %s)",
			c.p.describe(o), back, fmtTime(min(o.ret, c.p.end)-max(o.deadline, o.call)), fmtTime(o.deadline), fmtTime(slack)), o)
	return &v, true
}

// lateExcused reports whether a fault that freezes or kills clients
// explains op o's return late by late: an injected one open during the op
// excuses it whole (a pause lasts as long as it lasts); the stalls the run
// observed (its own processes not running: contract.FaultStall) only when
// they covered enough of the op. A stall delays a call by about its own
// length, so it excuses lateness up to twice the stalled time within the
// op plus 50ms (the catch-up after it); a call late by seconds with a
// stall of 60ms somewhere inside it is the lock's: were any overlapping
// stall an excuse, one per loaded run would hide a call seconds past its
// ctx.
func (c *run) lateExcused(o *lop, late int64) bool {
	var stalls []int
	var covered int64
	for _, i := range c.p.stopping {
		f := &c.p.ops[i]
		end := inf
		if f.Completed {
			end = f.Return
		}
		if f.Call > o.ret || end < o.call {
			continue
		}
		if contract.FaultKind(f.Name) != contract.FaultStall {
			return true
		}
		covered += min(end, o.ret, c.p.end) - max(f.Call, o.call)
		stalls = append(stalls, i)
	}
	if len(stalls) == 0 || late > 2*covered+int64(stallCatchUp) {
		return false
	}
	for _, i := range stalls {
		c.stalls.add(i)
	}
	return true
}

// stallCatchUp is how much later than a stall's end a stalled call may
// still return: the process's own catch-up once it runs again.
const stallCatchUp = 50 * time.Millisecond

// takenThroughout returns the acquire of a hold other than x that was
// surely live throughout [a, b] (the inspect rules' surelyLive), or nil:
// another client's, or one of x's client under another token than x got
// (not a hold x may have re-entered). x could not be granted while it
// stood (unless mutual exclusion broke, which the lease property judges):
// x's grant came after b.
func (c *run) takenThroughout(idx inspectIndex, x *lop, a, b int64) *lop {
	// By client, so that the hold cited is the same on every run.
	for _, cl := range slices.Sorted(maps.Keys(idx)) {
		for _, h := range idx[cl] {
			if h.acq == x || h.acq.client == x.client && !(x.hasToken && h.acq.hasToken && x.token != h.acq.token) {
				continue
			}
			if c.surelyLive(h, a, b) {
				return h.acq
			}
		}
	}
	return nil
}
