package checker

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// top2 is the best element so far by some value, and the best one of
// another group.
type top2[T comparable] struct{ a, b T }

// prefixTop2 returns, for each prefix of xs, the element with the largest
// val and the element with the largest val among those not in the first
// one's group.
func prefixTop2[T comparable](xs []T, val func(T) int64, group func(T) int64) []top2[T] {
	out := make([]top2[T], len(xs))
	var t top2[T]
	var zero T
	for i, x := range xs {
		switch {
		case t.a == zero:
			t.a = x
		case val(x) > val(t.a):
			if group(x) != group(t.a) {
				t.b = t.a
			}
			t.a = x
		case group(x) != group(t.a) && (t.b == zero || val(x) > val(t.b)):
			t.b = x
		}
		out[i] = t
	}
	return out
}

// except returns the best element not in group g, or the zero value.
func (t top2[T]) except(g int64, group func(T) int64) T {
	var zero T
	if t.a != zero && group(t.a) != g {
		return t.a
	}
	return t.b
}

func okAcquires(k *keyOps, withToken bool) []*lop {
	var out []*lop
	for _, o := range k.lease {
		if o.kind == history.Acquire && o.effective() && (o.hasToken || !withToken) {
			out = append(out, o)
		}
	}
	return out
}

// tokenChecks checks the token rules of the lease: ok-acquire tokens
// strictly increase in real time (A precedes B, A.return <= B.call: token(A)
// < token(B)) and one token never serves two clients. A client that gets its
// own token again is exempt only while a lease of its with that token may
// still be valid at the new acquire's call (reentrance); the model then
// decides whether it really held the lease. On a key with modes, only
// write and permit holds are held to the order (see shared.go).
func (c *run) tokenChecks(k *keyOps) []Violation {
	acq := okAcquires(k, true) // by call
	var vs []Violation
	owner := map[uint64]*lop{}
	for _, o := range acq {
		if f, ok := owner[o.token]; !ok {
			owner[o.token] = o
		} else if f.client != o.client {
			vs = append(vs, c.violation(contract.PropLeaseName, RuleTokenOwner, k.key,
				fmt.Sprintf("token %d was returned to two clients: %s and %s", o.token, c.p.describe(f), c.p.describe(o)), f, o))
		}
	}
	byR := append([]*lop(nil), acq...)
	sort.SliceStable(byR, func(i, j int) bool { return byR[i].ret < byR[j].ret })
	i := 0
	var best *lop
	// On a key with modes only a write (or permits) hold's token must be
	// above every token before it: a nested read hold shares its owner's
	// older fence, and readers exclude nobody (shared.go).
	shared := sharedKey(k)
	for _, b := range acq {
		for i < len(byR) && precedes(byR[i], b) {
			if best == nil || byR[i].token > best.token {
				best = byR[i]
			}
			i++
		}
		if shared && b.src.Mode == history.ModeRead {
			continue
		}
		if best != nil && best.token >= b.token && !(best.client == b.client && best.token == b.token && c.mayHold(k, b)) {
			vs = append(vs, c.violation(contract.PropLeaseName, RuleTokenOrder, k.key,
				fmt.Sprintf("%s got token %d, not above token %d of %s, which returned before it was called",
					c.p.describe(b), b.token, best.token, c.p.describe(best)), best, b))
		}
	}
	return vs
}

// resourceDirect checks the resource rules that are not about order: one
// token never serves two clients (accepted writes and reads with a token,
// and ok acquires, together), and an accepted unfenced write is not from a
// stale holder. Unfenced reads are left out of the latter: a stale holder's
// read changes nothing (its value is checked by the model).
func (c *run) resourceDirect(k *keyOps) []Violation {
	var vs []Violation
	owner := map[uint64]*lop{}
	for _, o := range okAcquires(k, true) {
		if _, ok := owner[o.token]; !ok {
			owner[o.token] = o
		}
	}
	for _, o := range k.resource {
		if !o.effective() || !o.hasToken {
			continue
		}
		if f, ok := owner[o.token]; !ok {
			owner[o.token] = o
		} else if f.client != o.client {
			vs = append(vs, c.violation(contract.PropResourceName, RuleTokenOwner, k.key,
				fmt.Sprintf("%s was accepted with token %d, which belongs to %q (%s)",
					c.p.describe(o), o.token, c.p.clients[f.client], c.p.describe(f)), f, o))
		}
	}
	return append(vs, c.staleHolders(k)...)
}

// staleHolders flags each accepted unfenced write w from client c for which
// c has an ok acquire with return <= w.call (own: the one that returned
// last) and another client's ok acquire b has b.return <= w.call and b.call
// >= own.return: the key passed on before the write (docs/DESIGN.md states
// the rule with these plain inequalities).
func (c *run) staleHolders(k *keyOps) []Violation {
	var unfenced []*lop
	for _, o := range k.resource {
		if o.kind == history.Write && o.effective() && !o.hasToken {
			unfenced = append(unfenced, o)
		}
	}
	if len(unfenced) == 0 {
		return nil
	}
	acq := okAcquires(k, false)
	sort.SliceStable(acq, func(i, j int) bool { return acq[i].ret < acq[j].ret })
	perClient := map[int32][]*lop{} // by ret
	for _, a := range acq {
		perClient[a.client] = append(perClient[a.client], a)
	}
	callOf := func(o *lop) int64 { return o.call }
	clientOf := func(o *lop) int64 { return int64(o.client) }
	pre := prefixTop2(acq, callOf, clientOf)
	var vs []Violation
	for _, o := range unfenced {
		mine := perClient[o.client]
		// Own acquires that precede the op (returned at or before its call).
		j := sort.Search(len(mine), func(i int) bool { return mine[i].ret > o.call })
		if j == 0 {
			continue // no lease of its own before: nothing to compare with
		}
		own := mine[j-1]
		n := sort.Search(len(acq), func(i int) bool { return acq[i].ret > o.call })
		if n == 0 {
			continue
		}
		b := pre[n-1].except(int64(o.client), clientOf)
		if b != nil && b.call >= own.ret {
			vs = append(vs, c.violation(contract.PropResourceName, RuleStaleHolder, k.key,
				fmt.Sprintf("%s was accepted without a token, but %s began after its lease (%s) returned and returned before it began: a stale holder acted",
					c.p.describe(o), c.p.describe(b), c.p.describe(own)), own, b, o))
		}
	}
	return vs
}

// liveness checks that after a holder stops for good (its last lease op on
// the key, failed acquires left out, is an ok acquire or renew with a TTL,
// or such an op followed only by a release of unknown outcome), an acquire by another client
// that begins more than LivenessSlack after the lease surely expired does not
// fail, unless another acquire (ok or unknown, other than the holder's last)
// may have taken the key first. Unknown attempts count neither way. It
// reports whether any attempt was checked.
func (c *run) liveness(k *keyOps) ([]Violation, bool) {
	last, before := map[int32]*lop{}, map[int32]*lop{}
	for _, o := range k.lease { // by call
		if o.kind == history.Acquire && o.result == history.Fail {
			// It surely had no effect: a holder that tries again on a lock
			// it left (a closed handle that refuses) still stopped holding
			// at its last grant.
			continue
		}
		before[o.client], last[o.client] = last[o.client], o
	}
	var stopped []*lop
	for c, o := range last {
		if o.kind == history.Release && o.maybe() {
			// A release with an unknown outcome (e.g. the client crashed
			// during it) leaves the lease it meant to end: released or not,
			// the key is free once that lease expires.
			o = before[c]
		}
		// An acquire that completed as unknown (e.g. its client crashed
		// between two of its commands) may hold the key as well: whether it
		// took effect or not, the key is free once its lease surely expired.
		if o != nil && (o.kind == history.Acquire || o.kind == history.Renew) &&
			(o.effective() || (o.kind == history.Acquire && o.maybe() && o.ret != inf)) && o.expireFor != inf {
			stopped = append(stopped, o)
		}
	}
	if len(stopped) == 0 {
		return nil, false
	}
	sort.Slice(stopped, func(i, j int) bool { return stopped[i].idx < stopped[j].idx })
	var ys, attempts []*lop // ys: ok or unknown acquires by call; attempts: ok or fail acquires by call
	for _, o := range k.lease {
		if o.kind != history.Acquire {
			continue
		}
		if o.result != history.Fail {
			ys = append(ys, o)
		}
		if o.result != history.Unknown {
			attempts = append(attempts, o)
		}
	}
	retOf := func(o *lop) int64 { return o.ret }
	idOf := func(o *lop) int64 { return int64(o.idx) }
	pre := prefixTop2(ys, retOf, idOf)
	var vs []Violation
	checked := false
	for _, l := range stopped {
		e := satAdd(satAdd(l.ret, l.expireFor), int64(c.opts.LivenessSlack))
		if e == inf {
			continue
		}
		from := sort.Search(len(attempts), func(i int) bool { return attempts[i].call > e })
		for _, x := range attempts[from:] {
			if x.client == l.client {
				continue
			}
			checked = true
			if x.result == history.OK {
				break // the key passed on; later failures are another holder's business
			}
			// ys[:n]: the acquires that may have taken effect before x (x does not precede them).
			n := sort.Search(len(ys), func(i int) bool { return ys[i].call >= x.ret })
			var y *lop
			if n > 0 {
				y = pre[n-1].except(int64(l.idx), idOf)
			}
			if y != nil && y.ret > l.call {
				continue // y may hold the key
			}
			vs = append(vs, c.violation(contract.PropLivenessName, RuleLiveness, k.key,
				fmt.Sprintf("%s failed at %s although %q stopped after %s, whose lease surely expired at %s (slack %v), and no other acquire may have taken the key",
					c.p.describe(x), fmtTime(x.call), c.p.clients[l.client], c.p.describe(l),
					fmtTime(satAdd(l.ret, l.expireFor)), c.opts.LivenessSlack), l, x))
		}
	}
	return vs, checked
}

// precedes reports whether a surely took effect before b did: a returned at
// or before b's call. The stamps bracket each op's effect (call is stamped
// before the request goes out, return after the reply came back), so a's
// effect is at or before a.ret <= b.call, at or before b's effect.
//
// An op whose return equals its call is concurrent with ops called at that
// instant, as in the search (see pCall: Porcupine cannot order a call and a
// return at one instant both ways).
func precedes(a, b *lop) bool { return a.ret < b.call || a.ret == b.call && a.ret > a.call }

// mayHold reports whether b's client may still hold a lease with b's
// token when b is called: one of its ok or unknown acquires with that token
// other than b itself, or renews with that token or none, was called at or
// before b and its lease is not surely expired at b's call. (b counted, the
// exemption would always hold.)
func (c *run) mayHold(k *keyOps, b *lop) bool {
	client, tok, t := b.client, b.token, b.call
	for _, o := range k.lease {
		if o.call > t {
			break // by call
		}
		if o == b || o.client != client || o.result == history.Fail || (o.kind != history.Acquire && o.kind != history.Renew) {
			continue
		}
		if o.hasToken && o.token != tok {
			continue
		}
		if o.kind == history.Acquire && !o.hasToken {
			continue
		}
		if satAdd(o.ret, o.expireFor) >= t {
			return true
		}
	}
	return false
}

// faultDuring reports whether a fault window of the history was open at
// some instant of [from, to] (a window that never closed is open to the
// end). A fault that leaves Redis answering every client
// (contract.KeepsServing: pub/sub connections dropped) counts as none:
// the lock owes its promises through it.
func (c *run) faultDuring(from, to int64) bool { return c.windowOpen(c.p.excusing, from, to) }

// windowOpen reports whether one of the fault ops at indices faults had
// its window open at some instant of [from, to].
// A window of an injected fault answers at once; when only stalls
// windows (contract.FaultStall) were open, they are noted on the check
// job (run.stalls): the verdict holds thanks to them.
func (c *run) windowOpen(faults []int, from, to int64) bool {
	var stalls []int
	for _, i := range faults {
		f := &c.p.ops[i]
		end := inf
		if f.Completed {
			end = f.Return
		}
		if f.Call <= to && end >= from {
			if contract.FaultKind(f.Name) != contract.FaultStall {
				return true
			}
			stalls = append(stalls, i)
		}
	}
	for _, i := range stalls {
		c.stalls.add(i)
	}
	return len(stalls) > 0
}

// landBy is the latest instant op o's effect may land: its return, but
// for an op of unknown outcome that overlaps a fault window (one that
// does not keep Redis serving), the end of the last such window. A fault
// holds requests, it does not only lose them: a paused client's gate
// sends its held command when the client resumes, a paused server runs
// the requests in its buffer when it resumes, a slow link delivers late;
// the caller gave up at its deadline meanwhile (the simulation's seeds
// 1586 and 1799 of the fenced lock: an acquire whose caller had given up
// landed after its return, and its lease ran a TTL from then).
func (c *run) landBy(o *lop) int64 {
	if o.result != history.Unknown || o.ret == inf {
		return o.ret
	}
	end := o.ret
	for _, i := range c.p.excusing {
		f := &c.p.ops[i]
		fend := inf
		if f.Completed {
			fend = f.Return
		}
		if f.Call <= o.ret && fend >= o.call {
			end = max(end, fend)
		}
	}
	return end
}

// clientSpans returns each client's hold spans on k (holdSpans of its
// lease ops, by call).
func (c *run) clientSpans(k *keyOps) map[int32][]*holdSpan {
	byClient := map[int32][]*lop{}
	for _, o := range k.lease { // by call
		byClient[o.client] = append(byClient[o.client], o)
	}
	spans := make(map[int32][]*holdSpan, len(byClient))
	for cl, ops := range byClient {
		spans[cl] = holdSpans(ops, c.landBy)
	}
	return spans
}

// holdSpan is a stretch of time in which one client may hold a key: from
// the call of the acquire that opened it to the return of the release that
// surely ended it, or else to when its lease (or renewal) surely expired.
type holdSpan struct {
	client     int32
	start, end int64
	last       *lop // the op that fixes end
}

// holdSpans returns the spans of one client's lease ops (by call). An ok
// release that brings the client's holds to zero, with no op of unknown
// outcome since the span began, ends it at the release's return; otherwise
// it lasts until the latest surely-expired bound of its acquires and
// renewals (inf when one never returned), and an acquire or renewal
// called after that bound finds it over. Failed ops are left out, and so are blocking acquires
// that never returned: a waiter that died in line is the lock's promise to
// bound (WaitBound), not a holder.
//
// landBy(o) is the latest instant o's effect may land (run.landBy): an op
// of unknown outcome held by a fault may land when the fault heals, and
// its lease lasts from then.
func holdSpans(ops []*lop, landBy func(*lop) int64) []*holdSpan {
	var out []*holdSpan
	var cur *holdSpan
	holds, uncertain := 0, false
	closeAt := func(end int64, last *lop) {
		cur.end, cur.last = end, last
		out = append(out, cur)
		cur, holds, uncertain = nil, 0, false
	}
	for _, o := range ops {
		if o.result == history.Fail || (o.kind == history.Acquire && o.wait && o.ret == inf) {
			continue
		}
		if cur != nil && (o.kind == history.Acquire || o.kind == history.Renew) && o.call > cur.end {
			// The span's lease surely expired before this op was called:
			// from then on the client could not hold the key, so the span
			// is over. A late renewal does not reopen it (it renews
			// nothing), and a late acquire opens a span of its own.
			closeAt(cur.end, cur.last)
		}
		switch o.kind {
		case history.Acquire, history.Renew:
			if cur == nil {
				if o.kind == history.Renew {
					continue // a renewal of nothing this client may hold
				}
				cur = &holdSpan{client: o.client, start: o.call, end: math.MinInt64}
			}
			if e := satAdd(landBy(o), o.expireFor); e > cur.end {
				cur.end, cur.last = e, o
			}
			if o.kind == history.Acquire {
				if o.result == history.OK {
					holds++
				} else {
					uncertain = true
				}
			}
		case history.Release:
			if cur == nil {
				continue
			}
			if o.result != history.OK || o.ret == inf {
				uncertain = true
				continue
			}
			holds--
			if holds <= 0 && !uncertain {
				closeAt(o.ret, o)
			}
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// waiterLiveness checks G3 for waiters (Options.WaitBound > 0): a blocking
// acquire x that returned (ok: it got the lock; fail: it gave up) is a
// violation when x.ret > max(x.call, F) + WaitBound, where F is the latest
// end of the hold spans (holdSpans) of the other clients that began before
// x.ret (for a lock with a fair queue, Options.Fair, and a waiter that
// says when it was in line: by that instant): from F on no other client
// may have held the key (ahead of x), so the lock owed x the key within
// its bound. A span without an end (an op that never
// returned) leaves x unchecked, and so does a fault window open at any
// instant from max(x.call, F) to x.ret: a lock cannot serve a waiter while
// Redis is frozen or cut off, and its promise is for a working deployment
// (clients that crashed for good stay dead after their window closed). It
// reports whether any waiter was checked.
func (c *run) waiterLiveness(k *keyOps) ([]Violation, bool) {
	w := int64(c.opts.WaitBound)
	if w <= 0 {
		return nil, false
	}
	var waits []*lop
	for _, o := range k.lease { // by call
		if o.kind == history.Acquire && o.wait && o.ret != inf && o.result != history.Unknown {
			waits = append(waits, o)
		}
	}
	if len(waits) == 0 {
		return nil, false
	}
	// The spans of every client by start, with for each prefix the latest
	// end and the latest end of another client than that one's: F for x is
	// the latest end among the spans of other clients begun before x.ret.
	var spans []*holdSpan
	for _, ss := range c.clientSpans(k) {
		spans = append(spans, ss...)
	}
	sort.Slice(spans, func(i, j int) bool {
		a, b := spans[i], spans[j]
		return a.start < b.start || a.start == b.start && (a.client < b.client || a.client == b.client && a.end < b.end)
	})
	endOf := func(s *holdSpan) int64 { return s.end }
	clientOf := func(s *holdSpan) int64 { return int64(s.client) }
	pre := prefixTop2(spans, endOf, clientOf)
	var vs []Violation
	checked := false
	for _, x := range waits {
		f, last := int64(math.MinInt64), (*lop)(nil)
		// The holds ahead of x: for a lock with a fair queue only those
		// begun by the time x was surely in line (a later joiner served
		// first does not excuse x's wait: that is how starvation hides).
		ahead := x.ret
		if c.opts.Fair && x.inLine != inf {
			ahead = min(ahead, x.inLine+1)
		}
		if n := sort.Search(len(spans), func(i int) bool { return spans[i].start >= ahead }); n > 0 {
			if s := pre[n-1].except(int64(x.client), clientOf); s != nil {
				f, last = s.end, s.last
			}
		}
		if f == inf {
			continue
		}
		from := max(x.call, f)
		if c.faultDuring(from, x.ret) {
			continue // the promise holds while Redis and the network answer: no fault may be under way
		}
		checked = true
		if x.ret-from <= w {
			continue
		}
		what := "got the lock"
		if x.result == history.Fail {
			what = "gave up waiting"
		}
		why := fmt.Sprintf("%s %s at %s, %v after the key was surely free at %s", c.p.describe(x), what, fmtTime(x.ret),
			time.Duration(x.ret-from), fmtTime(from))
		var cited []*lop
		if last != nil && f >= x.call {
			why += fmt.Sprintf(" (no other client could hold it after %s)", c.p.describe(last))
			cited = append(cited, last)
		} else {
			why += " (no other client could hold it while it waited)"
		}
		why += fmt.Sprintf("; the lock promises a waiter the key within %v", c.opts.WaitBound)
		cited = append(cited, x)
		vs = append(vs, c.violation(contract.PropLivenessName, RuleWaiterLiveness, k.key, why, cited...))
	}
	return vs, checked
}
