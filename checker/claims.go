package checker

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// checkClaims decides the claims property (G4) on a key: the validity the
// lock told the code holding it. Its rules (docs/DESIGN.md, "Claims"):
//
//   - claim-overlap: a claimed validity (valid_until) never runs past the
//     instant another client's lease took effect, unless the claiming hold
//     was released or reported lost first;
//   - checked-write: a write made after a check that found the lease valid
//     never comes after another client took the key over;
//   - released-claim: a lease the lock's server still says is valid (a ttl
//     answer) was not released before it was asked.
//
// The verdict is n/a when the key has no claim and no checked write.
func (c *run) checkClaims(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	cl := k.claimIndex()
	examined := false
	for _, ls := range [][]*lop{k.lease, k.asks} {
		for _, o := range ls {
			if isClaim(o) {
				examined = true
				f.violations = append(f.violations, c.claimOverlap(k, cl, o)...)
			}
		}
	}
	for _, o := range k.asks {
		if v, ok := c.releasedClaim(cl, o); ok {
			f.violations = append(f.violations, v)
		}
	}
	for _, w := range k.resource {
		if w.kind == history.Write && w.checked {
			examined = true
			if w.hasValid {
				f.violations = append(f.violations, c.claimOverlap(k, cl, w)...)
			}
			if v, ok := c.checkedWrite(k, cl, w); ok {
				f.violations = append(f.violations, v)
			}
		}
	}
	if examined {
		f.verdict = contract.OK
	}
	return f
}

// checkNotice decides the loss-notice property (G4) on a key: whether the
// lock tells its holder when the lease is gone, and only then:
//
//   - loss-notice (Options.LossBound > 0): a live holder whose key another
//     client took is told (op lost) within the bound;
//   - false-notice: no lease is reported lost after its release succeeded.
//
// The verdict is n/a when the key has no loss notice and no hold the
// loss-notice rule examined.
func (c *run) checkNotice(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	cl := k.claimIndex()
	examined := len(k.notices) > 0
	for _, n := range k.notices {
		if v, ok := c.falseNotice(cl, n); ok {
			f.violations = append(f.violations, v)
		}
	}
	if c.opts.LossBound > 0 {
		vs, ex := c.lossNotices(k, cl)
		f.violations = append(f.violations, vs...)
		examined = examined || ex
	}
	if examined {
		f.verdict = contract.OK
	}
	return f
}

// isClaim reports whether o states a validity the lock then stood by: an
// ok acquire or renew, a release that did not surely end the lease
// (unknown) while the lock still claimed it valid, or the server's answer
// to how long a lease is still valid (an ok ttl).
func isClaim(o *lop) bool {
	if !o.hasValid {
		return false
	}
	switch o.kind {
	case history.Acquire, history.Renew, history.TTL:
		return o.effective()
	case history.Release:
		return o.result == history.Unknown
	}
	return false
}

// claimIndex holds a key's ops by client for the claims rules.
type claimIndex struct {
	grants   []*lop           // ok acquires, by call
	byRet    []*lop           // ok acquires, by return
	releases map[int32][]*lop // per client, by call
	// relMaxRet: per client, relMaxRet[c][i] is the latest return among
	// releases[c][:i+1] (endedBy looks back only as far as one can reach).
	relMaxRet map[int32][]int64
	notices   map[int32][]*lop   // per client, by call
	acquires  map[int32][]*lop   // ok acquires per client, by call
	unsure    map[int32][]*lop   // acquires of unknown outcome per client, by call
	last      map[int32]int64    // per client, the latest call of any op on the key
	byLease   map[holdRef][]*lop // ok acquires per (client, lease)
	// unknownClaims: per client, its releases of unknown outcome after
	// which the lock still claimed the lease (isClaim), by call.
	unknownClaims map[int32][]*lop
	// latestCall[i]: among byRet[:i+1], the grant called last and the one
	// called last of another client; firstRet[i]: among grants[i:] (by
	// call), the grant that returned first and the first of another client.
	latestCall, firstRet []top2[*lop]
}

func clientOf(o *lop) int64 { return int64(o.client) }

// holdRef names one hold of a client (history.Op.Hold).
type holdRef struct {
	client int32
	lease  uint64
}

// claimIndex returns the key's claim index, built once for both
// properties that read it (their checks may run at once).
func (k *keyOps) claimIndex() *claimIndex {
	k.claimsOnce.Do(func() { k.claims = newClaimIndex(k) })
	return k.claims
}

func newClaimIndex(k *keyOps) *claimIndex {
	cl := &claimIndex{releases: map[int32][]*lop{}, notices: map[int32][]*lop{}, acquires: map[int32][]*lop{}, unsure: map[int32][]*lop{},
		last: map[int32]int64{}, byLease: map[holdRef][]*lop{}, unknownClaims: map[int32][]*lop{}}
	note := func(o *lop) { cl.last[o.client] = max(cl.last[o.client], o.call) }
	for _, o := range k.lease {
		note(o)
		switch {
		case o.kind == history.Acquire && o.effective():
			cl.grants = append(cl.grants, o)
			cl.acquires[o.client] = append(cl.acquires[o.client], o)
			if o.lease != 0 {
				r := holdRef{o.client, o.lease}
				cl.byLease[r] = append(cl.byLease[r], o)
			}
		case o.kind == history.Acquire && o.maybe():
			cl.unsure[o.client] = append(cl.unsure[o.client], o)
		case o.kind == history.Release && o.result == history.Unknown && o.hasValid:
			cl.unknownClaims[o.client] = append(cl.unknownClaims[o.client], o)
		case o.kind == history.Release:
			// A release ends the claim unless it is unknown and the lock
			// still claimed the lease valid after it (then it is a claim
			// of its own: isClaim).
			cl.releases[o.client] = append(cl.releases[o.client], o)
		}
	}
	for _, o := range k.resource {
		note(o)
	}
	for _, n := range k.notices {
		note(n)
		cl.notices[n.client] = append(cl.notices[n.client], n)
	}
	cl.relMaxRet = make(map[int32][]int64, len(cl.releases))
	for c, list := range cl.releases {
		m := make([]int64, len(list))
		for i, r := range list {
			m[i] = r.ret
			if i > 0 {
				m[i] = max(m[i], m[i-1])
			}
		}
		cl.relMaxRet[c] = m
	}
	cl.byRet = append([]*lop(nil), cl.grants...)
	sort.SliceStable(cl.byRet, func(i, j int) bool { return cl.byRet[i].ret < cl.byRet[j].ret })
	cl.latestCall = prefixTop2(cl.byRet, func(o *lop) int64 { return o.call }, clientOf)
	rev := slices.Clone(cl.grants)
	slices.Reverse(rev)
	cl.firstRet = prefixTop2(rev, func(o *lop) int64 { return -o.ret }, clientOf)
	slices.Reverse(cl.firstRet)
	return cl
}

// sameHold reports whether ops a and b of one client may be about the same
// hold: they name the same lease, or one of them names none.
func sameHold(a, b *lop) bool { return a.lease == 0 || b.lease == 0 || a.lease == b.lease }

// endedBy returns a release or loss notice of o's hold by o's client
// called in [o.call, t], or nil.
func (cl *claimIndex) endedBy(o *lop, t int64) *lop {
	// A release of the hold called before the claim's own op and still
	// running then (two calls at once on one lease, as a program's
	// deferred release beside its renewal loop) ends the claim too: the
	// holder was giving the lease up.
	rels, m := cl.releases[o.client], cl.relMaxRet[o.client]
	i := sort.Search(len(rels), func(i int) bool { return rels[i].call >= o.call })
	for j := i - 1; j >= 0 && m[j] >= o.call; j-- {
		if r := rels[j]; r.ret >= o.call && sameHold(o, r) {
			return r
		}
	}
	for _, list := range [][]*lop{rels, cl.notices[o.client]} {
		i := sort.Search(len(list), func(i int) bool { return list[i].call >= o.call })
		for _, r := range list[i:] {
			if r.call > t {
				break
			}
			if sameHold(o, r) {
				return r
			}
		}
	}
	return nil
}

// claimingRelease returns a release of o's hold with an unknown outcome
// after which the lock still claimed the lease valid, called in [o.call,
// t], or nil: it explains why a claim the user gave up still ran.
func (cl *claimIndex) claimingRelease(o *lop, t int64) *lop {
	for _, r := range cl.unknownClaims[o.client] {
		if r.call >= o.call && r.call <= t && sameHold(o, r) {
			return r
		}
	}
	return nil
}

// claimMade is when o's claim was made: a lock op's return (the claim is
// read right after it); a checked write's call (the check just before it);
// a ttl op's call, which its valid_until counts from (the server measured
// the time left at some instant of the op, no earlier than its call: the
// claim holds from then, and its drift allowance counts the whole time
// left).
func claimMade(o *lop) int64 {
	if o.kind == history.Write || o.kind == history.TTL {
		return o.call
	}
	return o.ret
}

// claimOverlap checks one claim o: another client's ok acquire b returning
// after the claim was made and before the claimed validity ran out, unless
// o's hold was released or reported lost by b.return. Such a b took effect
// inside the claim when it was called at or after the claim was made; when
// it was called before (a waiter already in line, say) and its lease,
// counted from its call, surely lasted past the claim's making, it held the
// key at some instant of the claim either way: it took effect before the
// claim was made and still held then (its release comes after its return),
// or it took effect after. The claim is held to its length less the drift
// (Options.Drift): the lock server's clock may run that much fast, so a
// claim of exactly the TTL from the request is not a lie.
func (c *run) claimOverlap(k *keyOps, cl *claimIndex, o *lop) []Violation {
	made := claimMade(o)
	if o.validUntil <= made || made == inf {
		return nil
	}
	until := o.validUntil - int64(math.Ceil(float64(o.validUntil-made)*c.opts.Drift))
	i := sort.Search(len(cl.byRet), func(i int) bool { return cl.byRet[i].ret >= made })
	for _, b := range cl.byRet[i:] {
		if b.ret >= until {
			break
		}
		if b.client == o.client || !conflicting(o, b) {
			continue
		}
		if b.call < made && (b.ret == made || made-b.call >= b.validFor) {
			// Called before the claim, and its lease may have run
			// out before the claim was made (validFor is inf without
			// a TTL: such a lease lasts).
			continue
		}
		if cl.endedBy(o, b.ret) != nil {
			continue
		}
		why := fmt.Sprintf("%s told %q its lease was valid until %s, but %s took the key at %s at the latest, while that claim still ran (%s earlier), and the hold was neither released nor reported lost before",
			c.p.describe(o), c.p.clients[o.client], fmtTime(o.validUntil), c.p.describe(b), fmtTime(b.ret),
			fmtTime(o.validUntil-b.ret))
		cited := []*lop{o, b}
		if r := cl.claimingRelease(o, b.ret); r != nil {
			why += fmt.Sprintf(" (%s had an unknown outcome, and the lock still claimed the lease valid after it)", c.p.describe(r))
			cited = append(cited, r)
		}
		return []Violation{c.violation(contract.PropClaimsName, RuleClaimOverlap, k.key, why, cited...)}
	}
	return nil
}

// ownGrant returns the ok acquire of the hold w acts on: the one of its
// lease, else the client's ok acquire that returned last at or before
// w.call.
func (cl *claimIndex) ownGrant(w *lop) *lop {
	var own *lop
	list := cl.acquires[w.client]
	if w.lease != 0 {
		if l := cl.byLease[holdRef{w.client, w.lease}]; len(l) > 0 {
			list = l
		}
	}
	for _, a := range list {
		if a.ret <= w.call && (own == nil || a.ret > own.ret) {
			own = a
		}
	}
	return own
}

// checkedWrite flags a checked write w by client c when another client's
// ok acquire b has b.return <= w.call and b.call >= own.return, own being
// the ok acquire of w's hold: the key had passed on before the write was
// sent, so the check that found the lease valid was wrong by then (a pause
// between the check and the write, or a claim the lock could not keep).
func (c *run) checkedWrite(k *keyOps, cl *claimIndex, w *lop) (Violation, bool) {
	own := cl.ownGrant(w)
	if own == nil {
		return Violation{}, false
	}
	// The other client's grant returned by w.call that was called last.
	n := sort.Search(len(cl.byRet), func(i int) bool { return cl.byRet[i].ret > w.call })
	if n == 0 {
		return Violation{}, false
	}
	if b := cl.latestCall[n-1].except(int64(w.client), clientOf); b != nil && b.call >= own.ret {
		return c.violation(contract.PropClaimsName, RuleCheckedWrite, k.key,
			fmt.Sprintf("%s was sent after its client's check found the lease of %s valid, yet %s had taken the key before the write was sent: the holder acted on a lease that was gone",
				c.p.describe(w), c.p.describe(own), c.p.describe(b)), own, b, w), true
	}
	return Violation{}, false
}

// releasedClaim flags a ttl answer o that claimed validity (valid_until)
// for a hold whose release had returned ok before o was called: the hold
// was given up, and the lock still told its user the lease was valid (a
// lock whose nested holds share their owner's record answers with the
// record of the holds that are left). Only
// a release and an answer that name the same hold are judged: one without
// a lease may be about another hold of the client that still stands.
func (c *run) releasedClaim(cl *claimIndex, o *lop) (Violation, bool) {
	if !isClaim(o) || o.lease == 0 {
		return Violation{}, false
	}
	for _, r := range cl.releases[o.client] {
		if r.lease == o.lease && r.effective() && r.ret <= o.call {
			return c.violation(contract.PropClaimsName, RuleReleasedClaim, r.src.Key,
				fmt.Sprintf("%s said the lease was valid for %s more, after %s had released it", c.p.describe(o), fmtTime(o.validUntil-o.call), c.p.describe(r)), r, o), true
		}
	}
	return Violation{}, false
}

// falseNotice flags a loss notice n of a hold whose release had returned
// ok before it: the lease was not lost, it was given up, and the user's
// loss handling ran for nothing (or on the next hold's work). A notice
// without a lease is about every hold of its client (as it is for the
// claims and loss-notice rules): it is false when its client surely held
// nothing at its call: at least one ok acquire called by then, as many ok
// releases returned by then, and no acquire of unknown outcome called by
// then.
func (c *run) falseNotice(cl *claimIndex, n *lop) (Violation, bool) {
	if n.lease != 0 {
		for _, r := range cl.releases[n.client] {
			if r.lease == n.lease && r.effective() && r.ret <= n.call {
				return c.violation(contract.PropNoticeName, RuleFalseNotice, r.src.Key,
					fmt.Sprintf("%s reported the lease lost at %s, after %s had released it", c.p.describe(n), fmtTime(n.call), c.p.describe(r)), r, n), true
			}
		}
		return Violation{}, false
	}
	// Each ok release ended one hold, of an acquire called before it
	// returned: as many ok releases returned by n.call as ok acquires
	// called by then (and none of unknown outcome) leave no hold.
	for _, u := range cl.unsure[n.client] {
		if u.call <= n.call {
			return Violation{}, false
		}
	}
	holds := 0
	for _, h := range cl.acquires[n.client] {
		if h.call <= n.call {
			holds++
		}
	}
	var last *lop
	released := 0
	for _, r := range cl.releases[n.client] {
		if r.effective() && r.ret <= n.call {
			released++
			if last == nil || r.ret > last.ret {
				last = r
			}
		}
	}
	if holds == 0 || released < holds {
		return Violation{}, false
	}
	return c.violation(contract.PropNoticeName, RuleFalseNotice, last.src.Key,
		fmt.Sprintf("%s (no lease named: any hold of its client) reported a lease lost at %s, when every hold of its client had been released, the last by %s", c.p.describe(n), fmtTime(n.call), c.p.describe(last)), last, n), true
}

// healedAfter is t, or the end of the fault windows open at t when later
// (inf when one never closed): when the faults under way at t had healed.
func (c *run) healedAfter(t int64) int64 {
	for changed := true; changed && t != inf; {
		changed = false
		for _, i := range c.p.excusing { // a fault that keeps Redis serving: the holder could be told
			f := &c.p.ops[i]
			end := inf
			if f.Completed {
				end = f.Return
			}
			if f.Call <= t && end > t {
				t, changed = end, true
			}
		}
	}
	return t
}

// lossNotices checks the loss-notice rule: for each ok acquire h by c, the
// first ok acquire b by another client called at or after h returned took
// c's key; unless c released or was told of the loss of h by b.return +
// LossBound, c is late when it still ran after that deadline (an op called
// after it), the history reaches it, and no fault window opened before it
// (a paused or cut-off client is excused). A fault window open at
// b.return moves the start of the bound to its end.
func (c *run) lossNotices(k *keyOps, cl *claimIndex) (vs []Violation, examined bool) {
	bound := int64(c.opts.LossBound)
	for _, h := range cl.grants {
		if h.ret == inf {
			continue
		}
		i := sort.Search(len(cl.grants), func(i int) bool { return cl.grants[i].call >= h.ret })
		if i == len(cl.grants) {
			continue
		}
		b := cl.firstRet[i].except(int64(h.client), clientOf)
		if b == nil || b.ret == inf {
			continue
		}
		// The bound runs from when the faults open at b.return healed (a
		// paused or cut-off holder cannot be told before), and a fault
		// that opens before it is due excuses the holder.
		start := c.healedAfter(b.ret)
		deadline := satAdd(start, bound)
		if deadline > c.p.end || cl.last[h.client] <= deadline {
			continue // not due within the history, or the client no longer ran
		}
		if c.faultDuring(start+1, deadline) {
			continue // excused, so not judged: a history of only such holds is n/a, as calls is
		}
		examined = true
		if cl.endedBy(h, deadline) != nil {
			continue
		}
		vs = append(vs, c.violation(contract.PropNoticeName, RuleLossNotice, k.key,
			fmt.Sprintf("%s took the key from %s at %s at the latest, and %q, still running, was not told of the loss within the lock's bound %s (by %s)",
				c.p.describe(b), c.p.describe(h), fmtTime(b.ret), c.p.clients[h.client], fmtTime(bound), fmtTime(deadline)), h, b))
	}
	return vs, examined
}
