package checker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// The lease model of a key with modes (a read-write lock, a semaphore):
// the exclusive lease model (apply) generalized to holds that may stand
// side by side. Its state is the set of holds that may stand, each with
// its client, lease number, mode, permits, token and the instants it is
// surely valid until and surely expired after (state.shared, encoded);
// an op takes effect at one instant of its window, as in the exclusive
// model (but without a clock: see settle), and:
//   - an acquire needs every hold it conflicts with to have possibly
//     expired by then (past its validUntil): for a write, every other
//     client's hold; for a read, every other client's write hold; for k
//     permits, enough of the permit holds that the permits surely out and
//     k fit the call's capacity (rules rw-exclusion and permits). An
//     owner's acquire of a read or write hold
//     while it holds one with the same token (a nested hold: write to
//     write, write to read, read to read) conflicts with nothing.
//   - a write or permit acquire (not nested) takes a token above every
//     write or permit token before it (token-order; a nested read hold
//     shares its owner's older fence, and read holds are not ordered).
//   - a release or renew acts on a hold of its client that may still
//     stand (not surely expired): the hold its lease number names, or,
//     without one, any hold of its client and mode (each is searched). A
//     renewal extends that hold alone.
//
// The model stays lenient where the history cannot tell: a hold taken by
// an acquire of unknown outcome (a phantom) blocks nobody (the lock may
// have taken it back unseen) and raises no token, so that it is always
// searched as taken (mayHaveNoEffect); and the holds a permit acquire may
// have outlived stay (which of them expired is not known). The direct rules
// over surely-held spans (shared.go) judge the same key beside it.

// sharedHold is one hold of the model of a key with modes.
type sharedHold struct {
	client       int32
	hold         uint64 // lop.hold: the lease number the model reads; 0: by count
	mode         byte   // 'r', 'w' or 'p'
	phantom      bool   // taken by an acquire of unknown outcome
	hasToken     bool
	permits      int64
	capacity     int64 // its acquire's capacity (a semaphore's N)
	token        uint64
	validUntil   int64
	expiredAfter int64
}

// sharedHoldSize is the length of one encoded sharedHold.
const sharedHoldSize = 4 + 8 + 1 + 1 + 1 + 8 + 8 + 8 + 8 + 8

// encodeHolds is the canonical encoding of hs (sorted): two states with the
// same holds compare equal (state is comparable).
func encodeHolds(hs []sharedHold) string {
	slices.SortFunc(hs, func(a, b sharedHold) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.hold, b.hold), cmp.Compare(a.token, b.token),
			cmp.Compare(a.mode, b.mode), cmp.Compare(a.validUntil, b.validUntil), cmp.Compare(a.expiredAfter, b.expiredAfter),
			cmp.Compare(a.permits, b.permits), cmp.Compare(a.capacity, b.capacity), cmpBool(a.phantom, b.phantom), cmpBool(a.hasToken, b.hasToken))
	})
	b := make([]byte, 0, len(hs)*sharedHoldSize)
	for _, h := range hs {
		b = binary.LittleEndian.AppendUint32(b, uint32(h.client))
		b = binary.LittleEndian.AppendUint64(b, h.hold)
		b = append(b, h.mode, boolByte(h.phantom), boolByte(h.hasToken))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.permits))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.capacity))
		b = binary.LittleEndian.AppendUint64(b, h.token)
		b = binary.LittleEndian.AppendUint64(b, uint64(h.validUntil))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.expiredAfter))
	}
	return string(b)
}

// decodeHolds is encodeHolds undone.
func decodeHolds(s string) []sharedHold {
	out := make([]sharedHold, 0, len(s)/sharedHoldSize)
	for b := []byte(s); len(b) >= sharedHoldSize; b = b[sharedHoldSize:] {
		out = append(out, sharedHold{
			client:       int32(binary.LittleEndian.Uint32(b)),
			hold:         binary.LittleEndian.Uint64(b[4:]),
			mode:         b[12],
			phantom:      b[13] == 1,
			hasToken:     b[14] == 1,
			permits:      int64(binary.LittleEndian.Uint64(b[15:])),
			capacity:     int64(binary.LittleEndian.Uint64(b[23:])),
			token:        binary.LittleEndian.Uint64(b[31:]),
			validUntil:   int64(binary.LittleEndian.Uint64(b[39:])),
			expiredAfter: int64(binary.LittleEndian.Uint64(b[47:])),
		})
	}
	return out
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int { return cmp.Compare(boolByte(a), boolByte(b)) }

// holdMode is the model's mode of a lease op on a key with modes: an op
// without one is judged as a write (docs/DESIGN.md, field mode).
func holdMode(o *lop) byte {
	switch o.src.Mode {
	case history.ModeRead:
		return 'r'
	case history.ModePermits:
		return 'p'
	}
	return 'w'
}

// conflicts reports whether a hold of mode m must wait for hold h of
// another client to end: reads share, permits are counted (permitsFit),
// everything else excludes.
func conflicts(m byte, h sharedHold) bool {
	switch {
	case m == 'r' && h.mode == 'r', m == 'p' && h.mode == 'p':
		return false
	}
	return true
}

// settle is s with holds hs. Unlike the exclusive model's, the state
// keeps no clock (state.now stays as it is), and a hold leaves it only by
// its client's release: each op takes effect at an instant of its own
// window, not after the ops before it in the order, and an acquire that
// had to wait for holds to expire does not drop them. Every order the
// clocked reading accepts this one accepts too, step by step (an op's
// instant here is at most its instant there, and the holds kept here
// beside those kept there had run out of validity before it), so it
// finds no violation the clocked one would not; and the orders of ops
// that commute (readers admitted side by side, a crowd's releases) meet
// in one state instead of as many as their instants: the clocked search
// of a 160-op chunk of fenced-rw ran for minutes. Before this reading an
// acquire dropped the holds it waited for at its own instant, and a
// release of one, ordered after the acquire but called before that
// instant, was refused (fenced-rw, the simulation's seed 79 under eleven
// faults at once). A hold that ran out stays until its client releases it
// (which then breaks not-owner: it acts past the hold's expiry); it
// blocks nobody, its validity over before any later instant.
func settle(s state, hs []sharedHold) state {
	s.shared = encodeHolds(hs)
	return s
}

// applyShared is apply for a lease op of a key with modes.
func applyShared(s state, o *lop) (state, reason) {
	hs := decodeHolds(s.shared)
	p := max(s.now, o.call)
	if o.kind != history.Acquire {
		alts, r := sharedEnds(s, hs, o, p)
		if len(alts) == 0 {
			return s, r
		}
		return alts[0], rOK
	}
	m := holdMode(o)
	if o.hold != 0 {
		// A hold of unknown outcome under the same number was not
		// taken, or is taken again: it makes way (mayHaveNoEffect); so
		// does one that surely expired by the acquire's return.
		hs = slices.DeleteFunc(hs, func(h sharedHold) bool {
			return h.client == o.client && h.hold == o.hold && (h.phantom || h.expiredAfter < o.upto)
		})
		if slices.ContainsFunc(hs, func(h sharedHold) bool { return h.client == o.client && h.hold == o.hold }) {
			return s, rHoldAgain
		}
	}
	nested := m != 'p' && slices.ContainsFunc(hs, func(h sharedHold) bool {
		return h.client == o.client && h.mode != 'p' && p <= h.expiredAfter &&
			(!o.hasToken || !h.hasToken || o.token == h.token)
	})
	n := s
	if !nested {
		blocked := rRWHeld
		var waited []int // the holds it had to outlast
		for i, h := range hs {
			if h.client == o.client || h.phantom || !conflicts(m, h) {
				continue
			}
			if h.validUntil == inf {
				return s, blocked
			}
			p = max(p, h.validUntil+1)
			waited = append(waited, i)
		}
		if o.effective() {
			// Granted by its return, a read or write hold proves the
			// holds it conflicts with gone by then: a release of one
			// called after that return cannot have found it (the
			// exclusive model frees the key alike). Only an ok grant
			// proves it (an unknown one is searched as taken, and must
			// prove nothing: mayHaveNoEffect), and not permits (which of
			// their holds ran out is not known).
			hs = slices.Clone(hs)
			for _, i := range waited {
				hs[i].expiredAfter = min(hs[i].expiredAfter, o.upto)
			}
		}
		if m == 'p' {
			blocked = rPermits
			var ok bool
			if p, ok = permitsFit(hs, o, p); !ok {
				return s, blocked
			}
		}
		if p > o.upto {
			return s, blocked
		}
		if m != 'r' && o.hasToken && s.hasLastTok && o.token <= s.lastTok {
			return s, rTokenOrder
		}
		// The token of an acquire of unknown outcome orders nothing: had
		// it no effect, later tokens owe it nothing (mayHaveNoEffect).
		if m != 'r' && o.hasToken && !o.maybe() {
			n.hasLastTok, n.lastTok = true, max(n.lastTok, o.token)
		}
	}
	if p > o.upto {
		return s, rTooLate
	}
	hs = append(hs, sharedHold{client: o.client, hold: o.hold, mode: m, phantom: o.maybe(),
		hasToken: o.hasToken, token: o.token, permits: max(o.src.Permits, 1), capacity: o.src.Capacity,
		validUntil: satAdd(o.call, o.validFor), expiredAfter: satAdd(o.ret, o.expireFor)})
	return settle(n, hs), rOK
}

// permitsFit is the earliest instant from p at which the permits of
// acquire o fit the capacity beside the permit holds surely valid then
// (phantoms aside); ok false when they never do by o's return. The
// capacity is the largest of o's and of those holds' acquires (the rule
// permits' reading: a lock may define a change of N otherwise than
// package lock, which judges each call by its own); a capacity the
// history does not state is not judged.
func permitsFit(hs []sharedHold, o *lop, p int64) (int64, bool) {
	capacity := o.src.Capacity
	var out []sharedHold
	used := max(o.src.Permits, 1)
	for _, h := range hs {
		if h.mode == 'p' && !h.phantom && h.validUntil >= p {
			out = append(out, h)
			used += h.permits
			capacity = max(capacity, h.capacity)
		}
	}
	if capacity <= 0 {
		return p, true
	}
	slices.SortFunc(out, func(a, b sharedHold) int { return cmp.Compare(a.validUntil, b.validUntil) })
	for _, h := range out {
		if used <= capacity {
			break
		}
		if h.validUntil == inf {
			return p, false
		}
		p = max(p, h.validUntil+1)
		used -= h.permits
	}
	return p, used <= capacity && p <= o.upto
}

// sharedEnds are the states release or renew o may lead s (holds hs) to
// at p or later, one per hold of its client it may act on; none, and
// why, when it can act on no hold.
func sharedEnds(s state, hs []sharedHold, o *lop, p int64) ([]state, reason) {
	if p > o.upto {
		return nil, rTooLate
	}
	why := rNotOwner
	var out []state
	for i, h := range hs {
		if h.client != o.client {
			continue
		}
		if o.src.Mode != "" && h.mode != holdMode(o) {
			continue
		}
		switch {
		case o.hold != 0 && h.hold != o.hold:
			why = max(why, rHoldGone)
			continue
		case o.hasToken && h.hasToken && o.token != h.token:
			why = max(why, rWrongToken)
			continue
		case p > h.expiredAfter:
			why = max(why, rExpired)
			continue
		}
		rest := slices.Clone(hs)
		if o.kind == history.Release {
			rest = slices.Delete(rest, i, i+1)
		} else {
			rest[i].validUntil = max(h.validUntil, satAdd(o.call, o.validFor))
			rest[i].expiredAfter = max(h.expiredAfter, satAdd(o.ret, o.expireFor))
		}
		out = append(out, settle(s, rest))
	}
	if why == rNotOwner && o.hold != 0 && slices.ContainsFunc(hs, func(h sharedHold) bool { return h.client == o.client }) {
		why = rHoldGone
	}
	return out, why
}

// othersShared is others for a lease op of a key with modes: a release or
// renew that may act on more than one hold of its client.
func othersShared(s state, o *lop, out []state) []state {
	if o.kind == history.Acquire {
		return out
	}
	alts, _ := sharedEnds(s, decodeHolds(s.shared), o, max(s.now, o.call))
	if len(alts) > 1 {
		out = append(out, alts[1:]...)
	}
	return out
}

// describeShared renders the holds of a state of a key with modes.
func (p *prepared) describeShared(s state) string {
	hs := decodeHolds(s.shared)
	if len(hs) == 0 {
		return "no hold"
	}
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		var b strings.Builder
		switch h.mode {
		case 'r':
			b.WriteString("read")
		case 'w':
			b.WriteString("write")
		default:
			fmt.Fprintf(&b, "%d permits", h.permits)
		}
		fmt.Fprintf(&b, " hold of %q", p.clients[h.client])
		if h.hold != 0 {
			fmt.Fprintf(&b, " (lease %d)", h.hold)
		}
		if h.hasToken {
			fmt.Fprintf(&b, " token %d", h.token)
		}
		if h.phantom {
			b.WriteString(", of unknown outcome")
		}
		fmt.Fprintf(&b, ", surely valid until %s, surely expired after %s", fmtTime(h.validUntil), fmtTime(h.expiredAfter))
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "; ")
}

// becauseShared is because for a lease op of a key with modes: why o can
// follow no order of the ops before it, with the hold it ran into (for
// rw-exclusion and permits, the acquire or renewal that made a conflicting
// hold surely valid then).
func (c *run) becauseShared(prop, key string, o *lop, r replayed, why reason) Violation {
	p := c.p
	hs := decodeHolds(r.s.shared)
	other := r.pv.lease
	var e string
	switch why {
	case rRWHeld, rPermits:
		m, at := holdMode(o), max(r.s.now, o.call)
		var blocking []sharedHold
		for _, h := range hs {
			if h.client != o.client && !h.phantom && conflicts(m, h) && h.validUntil >= o.upto ||
				m == 'p' && h.mode == 'p' && !h.phantom && h.validUntil >= o.upto {
				blocking = append(blocking, h)
			}
		}
		if len(blocking) > 0 {
			if x := c.holdOrigin(key, blocking[0], o); x != nil {
				other = x
			}
		}
		if why == rRWHeld {
			e = fmt.Sprintf("%s returned at %s, and at no instant of its call (from %s) had every conflicting hold possibly ended: %s",
				p.describe(o), fmtTime(o.ret), fmtTime(at), p.describeShared(r.s))
		} else {
			e = fmt.Sprintf("%s (%d permits of %d) returned at %s, and at no instant of its call (from %s) did they fit beside the permits surely out: %s",
				p.describe(o), max(o.src.Permits, 1), o.src.Capacity, fmtTime(o.ret), fmtTime(at), p.describeShared(r.s))
		}
	case rTokenOrder:
		e = fmt.Sprintf("%s got token %d, not above token %d of a write or permit hold that took effect before it", p.describe(o), o.token, r.s.lastTok)
		other = r.pv.tok
	case rHoldAgain:
		e = fmt.Sprintf("%s took hold %d of %q, which it already held: a lease number names one hold (holds: %s)", p.describe(o), o.hold, p.clients[o.client], p.describeShared(r.s))
	case rTooLate:
		other = r.pv.now
		e = fmt.Sprintf("%s returned at %s, before %s can have taken effect (not before %s)", p.describe(o), fmtTime(o.ret), p.describeOpt(other), fmtTime(r.s.now))
	default:
		what := map[reason]string{
			rNotOwner:   "its client held no such hold",
			rWrongToken: "its client's holds have other tokens",
			rExpired:    "its client's hold had surely expired (renewals, e.g. a watchdog's, must be in the history as renew ops)",
			rHoldGone:   fmt.Sprintf("its client no longer held hold %d: a release or renew acts on its own hold, and no other", o.hold),
		}[why]
		e = fmt.Sprintf("%s succeeded, but in no order of the ops before it could it act on a hold: %s (holds then: %s)", p.describe(o), what, p.describeShared(r.s))
	}
	return c.violation(prop, why.rule(o.kind), key, e, other, o)
}

// holdOrigin is the op of key that made hold h surely valid as long as it
// is in the model (its acquire, or the renewal that extended it last),
// among those called before o returned; nil when none matches.
func (c *run) holdOrigin(key string, h sharedHold, o *lop) *lop {
	i, found := slices.BinarySearchFunc(c.p.keys, key, func(k *keyOps, key string) int { return strings.Compare(k.key, key) })
	if !found {
		return nil
	}
	var out *lop
	for _, x := range c.p.keys[i].lease {
		if x.call > o.ret {
			break
		}
		if (x.kind == history.Acquire || x.kind == history.Renew) && x.client == h.client && x.result != history.Fail &&
			satAdd(x.call, x.validFor) == h.validUntil {
			out = x
		}
	}
	return out
}

// releasedTwice is a direct rule of not-owner on a key with modes: an ok
// release or renewal of a numbered hold (lop.hold) called after an ok
// release of that hold by its client returned, with no acquire of that
// number by the client called in between, acted on a hold that had
// surely ended. The lease model of modes finds it too, but only by
// searching every order of what came before: behind a crowd of readers
// admitted side by side (18 of them, 37 ops) that ran out of the budget.
func (c *run) releasedTwice(k *keyOps) []Violation {
	type ref struct {
		client int32
		hold   uint64
	}
	last := map[ref]*lop{} // the latest ok release of the hold, while no acquire of it came after
	var vs []Violation
	for _, o := range k.lease { // by call
		if o.hold == 0 {
			continue
		}
		r := ref{o.client, o.hold}
		switch {
		case o.kind == history.Acquire:
			delete(last, r)
		case (o.kind == history.Release || o.kind == history.Renew) && o.result == history.OK:
			if prev := last[r]; prev != nil && prev.ret < o.call && len(vs) < maxSharedViolations {
				vs = append(vs, c.violation(contract.PropLeaseName, RuleNotOwner, k.key,
					fmt.Sprintf("%s succeeded after %s had ended hold %d of %q, which nothing took again: a release or renew acts on a hold that stands",
						c.p.describe(o), c.p.describe(prev), o.hold, c.p.clients[o.client]), prev, o))
			}
			if o.kind == history.Release && (last[r] == nil || last[r].ret > o.ret) {
				last[r] = o
			}
		}
	}
	return vs
}
