package checker

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// checkFairness decides the fairness property on a key (Options.Fair): a
// live waiter is overtaken by at most Options.Bypass waiters that joined
// the line after it while it stayed there (rule overtaken). A blocking
// acquire x that returned (ok or fail) and says when it was surely in line
// (in_line) is overtaken by an acquire y of another client, blocking or
// one-shot, that returned ok when y.call > x.in_line (y came after x) and y.return <
// x.return (y was granted while x was still in line: x could not have been
// granted first, or y would have had to wait for x's release, which comes
// after x.return; for a wait that failed with a deadline, the earlier of
// x.return and the deadline, when it began to leave: a grant just after
// the deadline, passed on by the waiter's own leave, is no overtaking).
// Waits without in_line, and waits with a fault window open at any
// instant of them, are not judged. A reentrant grant (see
// reentrantGrants: the holder joined its own lease, never the line)
// overtakes nobody, also when the holder's known holds were all released
// and a hold whose release was of unknown outcome kept the lease. On a
// key with modes (a read-write lock, a semaphore) y overtakes x only when
// y's hold keeps x out (keepsWaiting). docs/FINDINGS.md has the seeds
// that showed each of these.
// n/a when the lock declares no fair queue or no wait was judged.
func (c *run) checkFairness(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	if !c.opts.Fair {
		return f
	}
	var waits, grants []*lop // by call
	reentrant := reentrantGrants(k.lease)
	// On a key with modes a grant overtakes a waiter only when it kept
	// the waiter out (keepsWaiting): two readers, or permits that fit
	// together, may be granted in either order.
	shared := sharedKey(k)
	var spans []sharedSpan
	if shared {
		spans = sharedSpans(k)
	}
	for _, o := range k.lease {
		if o.kind != history.Acquire || o.ret == inf {
			continue
		}
		if o.wait && (o.result == history.OK || o.result == history.Fail) && o.inLine != inf {
			waits = append(waits, o)
		}
		// A one-shot acquire granted while a waiter is in line overtakes
		// it as a later waiter would: a fair queue refuses it (package
		// lock's TryAcquire says so), or counts it among the bypasses.
		if o.result == history.OK {
			grants = append(grants, o)
		}
	}
	for _, x := range waits {
		if c.faultDuring(x.call, x.ret) {
			continue
		}
		f.verdict = contract.OK
		// A wait that gave up was in line until its deadline, when it
		// started to leave: a grant after it, before the leave returned,
		// overtook nobody (the leave itself passes a hand-off on).
		left := x.ret
		if x.result == history.Fail && x.deadline < left {
			left = x.deadline
		}
		i := sort.Search(len(grants), func(i int) bool { return grants[i].call > x.inLine })
		var over []*lop
		for _, y := range grants[i:] {
			if y.call >= left {
				break
			}
			if y.client != x.client && y.ret < left && !reentrant[y] && (!shared || keepsWaiting(y, x, spans)) {
				over = append(over, y)
			}
		}
		if len(over) <= c.opts.Bypass {
			continue
		}
		y := over[c.opts.Bypass]
		what := "got the lock"
		if x.result == history.Fail {
			what = "gave up waiting"
		}
		f.violations = append(f.violations, c.violation(contract.PropFairnessName, RuleOvertaken, k.key,
			fmt.Sprintf("%s %s at %s after %d waiters that joined the line after it had been served (the lock allows %d), %s among them",
				c.p.describe(x), what, fmtTime(x.ret), len(over), c.opts.Bypass, c.p.describe(y)), x, y))
	}
	return f
}

// reentrantGrants returns the ok acquires that joined a hold of their own
// client's that may still have been there: the same token as earlier ok
// acquires of the client, more of which were called before it than
// releases of that token returned ok before its call (a release of
// unknown outcome may not have landed). The same token again once every
// such hold was surely released is no re-entry: the key should have
// been free, and a grant that skipped the line there is what the fair
// queue rule is for (fenced-v2 under the crowd: a release that left its
// hold behind, re-entered by its client ahead of the waiters).
func reentrantGrants(ops []*lop) map[*lop]bool {
	type held struct {
		client int32
		token  uint64
	}
	acquired, released := map[held][]int64{}, map[held][]int64{}
	for _, o := range ops {
		if !o.hasToken || o.result != history.OK {
			continue
		}
		h := held{o.client, o.token}
		switch o.kind {
		case history.Acquire:
			acquired[h] = append(acquired[h], o.call)
		case history.Release:
			released[h] = append(released[h], o.ret)
		}
	}
	out := map[*lop]bool{}
	for _, o := range ops {
		if o.kind != history.Acquire || !o.hasToken || o.result != history.OK {
			continue
		}
		h := held{o.client, o.token}
		calls, rets := acquired[h], slices.Clone(released[h])
		if len(calls) < 2 {
			continue
		}
		slices.Sort(rets)
		before := 0
		for _, c := range calls {
			if c < o.call {
				before++
			}
		}
		done := sort.Search(len(rets), func(i int) bool { return rets[i] > o.call })
		out[o] = before > done
	}
	return out
}
