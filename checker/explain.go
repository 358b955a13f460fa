package checker

import (
	"fmt"
	"strconv"

	"github.com/anishathalye/porcupine"

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

func step(rs []replayed, o *lop) []replayed {
	var out []replayed
	add := func(r replayed) {
		for _, x := range out {
			if x.s == r.s {
				return
			}
		}
		out = append(out, r)
	}
	for _, r := range rs {
		n, why := apply(r.s, o)
		if o.maybe() {
			add(r)
		}
		if why != rOK {
			continue
		}
		pv := r.pv
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
		add(replayed{n, pv})
	}
	return out
}

// explain reruns an illegal partition verbosely, replays Porcupine's longest
// partial linearization and says why the next op could not follow it.
func (c *run) explain(key string, pops []porcupine.Operation, prop string) Violation {
	generic := func(why string) Violation {
		ops := make([]*lop, 0, 2)
		for i, po := range pops {
			if i == 2 {
				break
			}
			ops = append(ops, po.Input.(*lop))
		}
		return c.violation(prop, RuleLinearizability, key,
			"no order of the ops of key "+strconv.Quote(key)+" satisfies the model ("+why+")", ops...)
	}
	res, info := porcupine.CheckOperationsVerbose(c.model, pops, c.opts.Timeout)
	if res != porcupine.Illegal {
		return generic("explaining it did not finish")
	}
	// Every maximal partial linearization ends where some op cannot follow.
	// When there are several (concurrent ops, each order failing), the
	// explanation follows real time: the one whose stuck op was called last.
	longest := 0
	var seqs [][]int // op ids: indices into pops (one partition)
	for _, part := range info.PartialLinearizations() {
		for _, s := range part {
			longest = max(longest, len(s))
			seqs = append(seqs, s)
		}
	}
	if len(seqs) == 0 {
		seqs = append(seqs, nil) // not even the first op can go first
	}
	var best *Violation
	var bestOp *lop
	var others []string
	for _, seq := range seqs {
		if len(seq) != longest {
			continue
		}
		o, v, ok := c.stuckAfter(key, pops, seq, prop)
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

// stuckAfter replays the partial linearization seq and finds the op that
// cannot follow it: among the ops left, by return time, the first that fails
// from every replayed state.
func (c *run) stuckAfter(key string, pops []porcupine.Operation, seq []int, prop string) (*lop, Violation, bool) {
	rs := []replayed{{}}
	done := map[*lop]bool{}
	for _, id := range seq {
		o := pops[id].Input.(*lop)
		done[o] = true
		if next := step(rs, o); len(next) > 0 {
			rs = next
		}
	}
	var rest []*lop
	for _, po := range pops {
		if o := po.Input.(*lop); !done[o] {
			rest = append(rest, o)
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
		for _, r := range rs {
			_, w := apply(r.s, o)
			if w == rOK {
				stuck = false
				break
			}
			if why == rOK {
				first, why = r, w
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
	switch why {
	case rHeld:
		other = r.pv.lease
		e = fmt.Sprintf("%s returned at %s while the lease of %q from %s was surely valid until %s",
			d, fmtTime(o.ret), p.clients[s.holder], p.describeOpt(other), fmtTime(s.validUntil))
	case rTokenOrder:
		other = r.pv.tok
		e = fmt.Sprintf("%s got token %d, not above token %d of %s that took effect before it",
			d, o.token, s.lastTok, p.describeOpt(other))
	case rNotOwner:
		other = r.pv.lease
		if s.holder == 0 {
			e = fmt.Sprintf("%s succeeded but the key was not held (last lease op: %s)", d, p.describeOpt(other))
		} else {
			e = fmt.Sprintf("%s succeeded but the lease was held by %q (%s)", d, p.clients[s.holder], p.describeOpt(other))
		}
	case rWrongToken:
		other = r.pv.lease
		e = fmt.Sprintf("%s succeeded with token %d but the lease (%s) has token %d", d, o.token, p.describeOpt(other), s.holderTok)
	case rExpired:
		other = r.pv.lease
		e = fmt.Sprintf("%s took effect at %s at the earliest, after the lease (%s) had surely expired at %s"+
			" (renewals, e.g. a watchdog's, must be in the history as renew ops)",
			d, fmtTime(max(s.now, o.call)), p.describeOpt(other), fmtTime(s.expiredAfter))
	case rTooLate:
		other = r.pv.now
		e = fmt.Sprintf("%s returned at %s, before %s can have taken effect (not before %s)",
			d, fmtTime(o.ret), p.describeOpt(other), fmtTime(s.now))
	case rFencing:
		other = r.pv.maxTok
		e = fmt.Sprintf("%s was accepted after token %d had been accepted (%s): fenced tokens went backwards",
			d, s.maxTok, p.describeOpt(other))
		if o.kind == history.Write && o.hasPrev && o.prev != s.value {
			e += fmt.Sprintf(", and it overwrote %q although its writer had read %q: an update was lost", p.values[s.value], p.values[o.prev])
		}
	case rLostUpdate:
		other = r.pv.value
		e = fmt.Sprintf("%s expected prev %q but the resource held %q (%s): an update was lost",
			d, p.values[o.prev], p.values[s.value], p.writtenBy(other))
	case rStaleRead:
		other = r.pv.value
		e = fmt.Sprintf("%s returned %q but the resource held %q (%s)", d, p.values[o.value], p.values[s.value], p.writtenBy(other))
	}
	return c.violation(prop, why.rule(o.kind), key, e, other, o)
}

func (p *prepared) describeOpt(o *lop) string {
	if o == nil {
		return "none"
	}
	return p.describe(o)
}

func (p *prepared) writtenBy(o *lop) string {
	if o == nil {
		return "never written"
	}
	return "written by " + p.describe(o)
}
