package checker

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/lockproof/lockproof/history"
)

// prov remembers, for a replayed state, which ops set its parts.
type prov struct {
	lease  *lop // last acquire, renew or release that took effect
	tok    *lop // acquire that set lastTok
	now    *lop // op that set now
	value  *lop // last write that took effect
	maxTok *lop // last accepted write or read carrying the max token
}

type replayed struct {
	s  state
	pv prov
}

// step replays o from every state of rs: the states it can lead to, each
// once (the first provenance found for it is kept).
func step(rs []replayed, o *lop) []replayed {
	out, _ := stepAtMost(rs, o, 0)
	return out
}

// maxReplayed bounds the states an explanation's replay keeps. Each op of
// unknown outcome may double them (it took effect, or not), and a history
// with hundreds (a reset fault's, a lock without a TTL's) would replay for
// minutes after a search that took seconds (fenced-v1 × reset on a
// cluster: 330 unknown acquires, 7 minutes past a 30s budget). Past it,
// the explanation says only that no order satisfies the model: the
// verdict is the search's, never the replay's.
const maxReplayed = 4096

// stepAtMost is step giving up (false) once more than limit states would
// come out; 0 is no limit. States are told apart by a set, not by a scan
// of those kept.
func stepAtMost(rs []replayed, o *lop, limit int) ([]replayed, bool) {
	var out []replayed
	seen := make(map[state]struct{}, len(rs))
	over := false
	add := func(r replayed) {
		if _, dup := seen[r.s]; dup || over {
			return
		}
		if limit > 0 && len(out) == limit {
			over = true
			return
		}
		seen[r.s] = struct{}{}
		out = append(out, r)
	}
	var all []replayed
	for _, r := range rs {
		for _, b := range bases(r.s) {
			all = append(all, replayed{b, r.pv})
		}
	}
	for _, r := range all {
		n, why := apply(r.s, o)
		if o.maybe() && mayHaveNoEffect(o, why) {
			add(r)
		}
		// The other states o may lead to (others) are lease states,
		// set by o as apply's are.
		for _, a := range others(r.s, o, nil) {
			add(replayed{a, tookEffect(r.pv, o, a)})
		}
		if why == rOK {
			add(replayed{n, tookEffect(r.pv, o, n)})
		}
	}
	return out, !over
}

// tookEffect is provenance pv once o took effect and left state n.
func tookEffect(pv prov, o *lop, n state) prov {
	switch o.kind {
	case history.Acquire:
		pv.lease, pv.now = o, o
		if o.hasToken {
			pv.tok = o
		}
	case history.Release, history.Renew:
		pv.lease, pv.now = o, o
	case history.Write:
		pv.value = o
	}
	if (o.kind == history.Write || o.kind == history.Read) && o.hasToken && n.maxTok == o.token {
		pv.maxTok = o
	}
	return pv
}

// explain says why a chunk of a partition has no linearization from any of
// the starts in from. It reuses what the search found (its longest partial
// linearizations) rather than searching again: it replays one and names the
// op that cannot follow it and why.
func (c *run) explain(key string, ops []searchOp, from []start, deepest [][]int, prop string) Violation {
	generic := func(why string) Violation {
		var vs []*lop
		for _, so := range ops {
			if len(vs) == 2 {
				break
			}
			if !so.carried {
				vs = append(vs, so.o)
			}
		}
		return c.violation(prop, RuleLinearizability, key,
			"no order of the ops of key "+strconv.Quote(key)+" satisfies the model ("+why+")", vs...)
	}
	// When several partial linearizations are longest (concurrent ops, each
	// order failing), the explanation follows real time: the one whose stuck
	// op was called last.
	var best *Violation
	var bestOp *lop
	var others []string
	for _, seq := range deepest {
		if len(seq) == 0 {
			continue
		}
		o, v, ok := c.stuckAfter(key, ops, from[seq[0]], seq[1:], prop)
		if !ok {
			continue
		}
		switch {
		case best == nil:
			best, bestOp = &v, o
		case later(o, bestOp):
			others = append(others, best.Explanation)
			best, bestOp = &v, o
		case o != bestOp:
			others = append(others, v.Explanation)
		}
	}
	if best == nil {
		return generic("every order breaks the model at some later op")
	}
	if len(others) > 0 {
		sortStrings(others)
		best.Explanation += "; other orders fail too, e.g. " + others[0]
	}
	return *best
}

// later reports whether a comes after b in real time (call, then return, then line).
func later(a, b *lop) bool {
	if a.call != b.call {
		return a.call > b.call
	}
	if a.ret != b.ret {
		return a.ret > b.ret
	}
	return a.idx > b.idx
}

func sortStrings(ss []string) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j] < ss[j-1]; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}

// stuckAfter replays the partial linearization seq (indices into ops) from
// st and finds the op that cannot follow it: among the ops left, by return
// time, the first that fails from every replayed state.
func (c *run) stuckAfter(key string, ops []searchOp, st start, seq []int, prop string) (*lop, Violation, bool) {
	rs := []replayed{{s: st.st}}
	done := map[*lop]bool{}
	for j, so := range ops {
		if st.settled(ops, j) {
			done[so.o] = true
		}
	}
	for _, j := range seq {
		if c.ctx.Err() != nil {
			return nil, Violation{}, false // out of budget: the generic explanation
		}
		o := ops[j].o
		done[o] = true
		next, ok := stepAtMost(rs, o, maxReplayed)
		if !ok {
			return nil, Violation{}, false // too many states to replay: likewise
		}
		if len(next) > 0 {
			rs = next
		}
	}
	var rest []*lop
	for _, so := range ops {
		if !done[so.o] {
			rest = append(rest, so.o)
		}
	}
	byRet(rest)
	for _, o := range rest {
		if o.maybe() {
			continue
		}
		stuck := true
		var first replayed
		var why reason
	tries:
		for _, r0 := range rs {
			for _, b := range bases(r0.s) {
				r := replayed{b, r0.pv}
				_, w := apply(r.s, o)
				if w == rOK || len(others(r.s, o, nil)) > 0 {
					stuck = false
					break tries
				}
				if why == rOK {
					first, why = r, w
				}
			}
		}
		if stuck {
			return o, c.because(prop, key, o, first, why), true
		}
	}
	return nil, Violation{}, false
}

func byRet(ls []*lop) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && (ls[j].ret < ls[j-1].ret || ls[j].ret == ls[j-1].ret && ls[j].call < ls[j-1].call); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// because builds the violation for op o failing in replayed state r with why.
func (c *run) because(prop, key string, o *lop, r replayed, why reason) Violation {
	p := c.p
	d := p.describe(o)
	s := r.s
	var e string
	var other *lop
	if o.shared {
		return c.becauseShared(prop, key, o, r, why)
	}
	switch why {
	case rHeld:
		// The op whose validity o broke: after nested holds and renewals
		// that is not always the holder's last op (an inner release, say).
		if other = c.origin(key, why, s, o); other == nil {
			other = r.pv.lease
		}
		e = fmt.Sprintf("%s returned at %s while the lease of %q from %s was surely valid until %s",
			d, fmtTime(o.ret), p.clients[s.holder], p.describeOpt(other), fmtTime(s.validUntil))
	case rTokenOrder:
		other = c.known(r.pv.tok, key, why, s, o)
		e = fmt.Sprintf("%s got token %d, not above token %d of %s that took effect before it",
			d, o.token, s.lastTok, p.describeOpt(other))
	case rNotOwner:
		other = c.known(r.pv.lease, key, why, s, o)
		if s.holder == 0 {
			e = fmt.Sprintf("%s succeeded but the key was not held (last lease op: %s)", d, p.describeOpt(other))
		} else {
			e = fmt.Sprintf("%s succeeded but the lease was held by %q (%s)", d, p.clients[s.holder], p.describeOpt(other))
		}
	case rWrongToken:
		other = c.known(r.pv.lease, key, why, s, o)
		e = fmt.Sprintf("%s succeeded with token %d but the lease (%s) has token %d", d, o.token, p.describeOpt(other), s.holderTok)
	case rExpired:
		other = c.known(r.pv.lease, key, why, s, o)
		e = fmt.Sprintf("%s took effect at %s at the earliest, after the lease (%s) had surely expired at %s"+
			" (renewals, e.g. a watchdog's, must be in the history as renew ops)",
			d, fmtTime(max(s.now, o.call)), p.describeOpt(other), fmtTime(s.expiredAfter))
	case rHoldGone:
		other = c.origin(key, why, s, o)
		if other == nil {
			other = r.pv.lease
		}
		e = fmt.Sprintf("%s succeeded but %q no longer held hold %d (%s): a release or renew acts on its own hold, and no other",
			d, p.clients[o.client], o.hold, p.lastOfHold(other, o))
	case rHoldAgain:
		other = c.origin(key, why, s, o)
		e = fmt.Sprintf("%s took hold %d of %q, which it already held (%s): a lease number names one hold",
			d, o.hold, p.clients[o.client], p.describeOpt(other))
	case rTooLate:
		other = r.pv.now
		e = fmt.Sprintf("%s returned at %s, before %s can have taken effect (not before %s)",
			d, fmtTime(o.ret), p.describeOpt(other), fmtTime(s.now))
	case rFencing:
		other = c.known(r.pv.maxTok, key, why, s, o)
		e = fmt.Sprintf("%s was accepted after token %d had been accepted (%s): fenced tokens went backwards",
			d, s.maxTok, p.describeOpt(other))
		if o.kind == history.Write && o.hasPrev && o.prev != s.value {
			e += fmt.Sprintf(", and it overwrote %q although its writer had read %q: an update was lost", p.values[s.value], p.values[o.prev])
		}
	case rLostUpdate:
		other = c.known(r.pv.value, key, why, s, o)
		e = fmt.Sprintf("%s expected prev %q but the resource held %q (%s): an update was lost",
			d, p.values[o.prev], p.values[s.value], p.writtenBy(other))
	case rStaleRead:
		other = c.known(r.pv.value, key, why, s, o)
		e = fmt.Sprintf("%s returned %q but the resource held %q (%s)", d, p.values[o.value], p.values[s.value], p.writtenBy(other))
	}
	return c.violation(prop, why.rule(o.kind), key, e, other, o)
}

// known returns x, or when x is nil the op origin finds.
func (c *run) known(x *lop, key string, why reason, s state, o *lop) *lop {
	if x != nil {
		return x
	}
	return c.origin(key, why, s, o)
}

// origin finds, when the replay does not know it (the state came from an
// earlier chunk), the op of key that set the part of state s that o broke:
// the latest op called before o returned that matches that part exactly.
func (c *run) origin(key string, why reason, s state, o *lop) *lop {
	i := sort.Search(len(c.p.keys), func(i int) bool { return c.p.keys[i].key >= key })
	if i == len(c.p.keys) || c.p.keys[i].key != key {
		return nil
	}
	k := c.p.keys[i]
	var match func(x *lop) bool
	ops := k.lease
	switch why {
	case rHeld, rNotOwner, rWrongToken, rExpired:
		if s.holder == 0 {
			return nil
		}
		match = func(x *lop) bool {
			if (x.kind != history.Acquire && x.kind != history.Renew) || x.client != s.holder || x.result == history.Fail {
				return false
			}
			switch why {
			case rHeld: // validity and expiry may come from different holds
				return satAdd(x.call, x.validFor) == s.validUntil
			case rExpired:
				return satAdd(x.ret, x.expireFor) == s.expiredAfter
			}
			return satAdd(x.call, x.validFor) == s.validUntil && satAdd(x.ret, x.expireFor) == s.expiredAfter
		}
	case rTokenOrder:
		match = func(x *lop) bool { return x.kind == history.Acquire && x.hasToken && x.token == s.lastTok }
	case rHoldGone, rHoldAgain:
		// The last op on o's hold: the release that ended it, or its
		// acquire (a hold of a lease that ended, or the one o took again).
		match = func(x *lop) bool {
			return x.client == o.client && x.hold == o.hold && (x.kind == history.Acquire || x.kind == history.Release)
		}
	case rFencing:
		ops = k.resource
		match = func(x *lop) bool { return x.hasToken && x.token == s.maxTok }
	case rLostUpdate, rStaleRead:
		ops = k.resource
		match = func(x *lop) bool { return x.kind == history.Write && x.value == s.value }
	default:
		return nil
	}
	var best *lop
	for _, x := range ops { // by call
		if x.call > o.ret {
			break
		}
		if x != o && checked(x) && match(x) {
			best = x
		}
	}
	return best
}

func (p *prepared) describeOpt(o *lop) string {
	if o == nil {
		return "none"
	}
	return p.describe(o)
}

// lastOfHold says what became of the hold o names, by the last op on it
// before o (other).
func (p *prepared) lastOfHold(other, o *lop) string {
	switch {
	case other == nil || other.hold != o.hold:
		return "last lease op: " + p.describeOpt(other)
	case other.kind == history.Release:
		return "ended by " + p.describe(other)
	}
	return "its acquire: " + p.describe(other)
}

func (p *prepared) writtenBy(o *lop) string {
	if o == nil {
		return "never written"
	}
	return "written by " + p.describe(o)
}
