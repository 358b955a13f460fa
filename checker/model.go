package checker

import (
	"context"
	"encoding/binary"
	"fmt"
	"html"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/history"
)

// state is the sequential state of one partition: the lease of a key (lease
// partitions) or the fenced resource of a key (resource partitions). One
// comparable struct serves both so that a single Porcupine model (and one
// visualization) covers every partition; each partition uses its own fields.
type state struct {
	// Lease: the current holder (0: nobody), its token, and when its lease is
	// surely valid until and surely expired after.
	holder int32
	holds  int32 // the holder's hold count: reentrant acquires add one, releases take one
	// phantoms is how many of those holds came from acquires of unknown
	// outcome: a lock may take such a hold back later, unrecorded (see
	// vanishes).
	phantoms int32
	// leases are the numbered holds among them (lop.hold: the history's
	// lease numbers), sorted, nLeases of them; bit i of phantomLeases says
	// that leases[i] is a phantom. A release or renew of a number acts on
	// that hold and no other (see apply); the holds without a number are
	// read by count. untracked: the holder took more numbered holds than
	// leases keeps, and until the key is free every hold is read by
	// count, numbered or not (lenient: no order is refused for it).
	leases        [maxLeases]uint64
	nLeases       int8
	phantomLeases uint8
	untracked     bool

	hasHolderTok bool
	holderTok    uint64
	validUntil   int64
	expiredAfter int64
	// lastTok is the largest token an acquire returned so far.
	hasLastTok bool
	lastTok    uint64
	// now is the earliest time the last linearized lease op can have taken
	// effect: linearization points never go back in time.
	now int64

	// shared: on a key with modes, the holds that may stand
	// (shared_model.go, encodeHolds); the exclusive fields above but
	// lastTok and now stay unused there.
	shared string

	// Resource: the value (interned), and the largest token of an accepted
	// op (write or read) carrying one.
	value  int32
	hasMax bool
	maxTok uint64
}

func (s state) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		h ^= v
		h *= 1099511628211
		h ^= h >> 29
	}
	mix(uint64(s.holder))
	mix(uint64(s.holds))
	mix(uint64(s.phantoms))
	mix(s.holderTok)
	mix(uint64(s.validUntil))
	mix(uint64(s.expiredAfter))
	mix(s.lastTok)
	mix(uint64(s.now))
	for _, l := range s.leases[:s.nLeases] {
		mix(l)
	}
	mix(uint64(s.nLeases))
	mix(uint64(s.phantomLeases))
	mix(uint64(s.value))
	mix(s.maxTok)
	for i := 0; i+8 <= len(s.shared); i += 8 {
		mix(binary.LittleEndian.Uint64([]byte(s.shared[i : i+8])))
	}
	mix(uint64(len(s.shared)))
	var b uint64
	if s.hasHolderTok {
		b |= 1
	}
	if s.hasLastTok {
		b |= 2
	}
	if s.hasMax {
		b |= 4
	}
	if s.untracked {
		b |= 8
	}
	mix(b)
	return h
}

// reason says why an op cannot take effect in a state; rOK: it can.
type reason uint8

const (
	rOK         reason = iota
	rHeld              // acquire while another client's lease is surely valid
	rTokenOrder        // acquire token not above the last one
	rNotOwner          // release/renew by a client that does not hold the lease
	rWrongToken        // release/renew with a token other than the holder's
	rExpired           // release/renew after the lease surely expired
	rTooLate           // the op returned before the previous op can have taken effect
	rHoldGone          // release/renew of a hold (lease number) its client no longer holds
	rHoldAgain         // acquire of a hold (lease number) its client already holds
	rFencing           // accepted resource op with a token below the largest accepted
	rLostUpdate        // write whose prev is not the current value
	rStaleRead         // read that does not return the current value
	rRWHeld            // acquire (key with modes) beside a conflicting hold surely valid
	rPermits           // permit acquire (key with modes) beyond the capacity while the permits out were surely valid
)

// rule maps a reason to the rule it breaks.
func (r reason) rule(k history.Kind) string {
	switch r {
	case rHeld, rHoldAgain:
		return RuleMutualExclusion
	case rTokenOrder:
		return RuleTokenOrder
	case rNotOwner, rWrongToken, rExpired, rHoldGone:
		return RuleNotOwner
	case rTooLate:
		if k == history.Acquire {
			return RuleMutualExclusion
		}
		return RuleNotOwner
	case rFencing:
		return RuleFencing
	case rLostUpdate:
		return RuleLostUpdate
	case rStaleRead:
		return RuleStaleRead
	case rRWHeld:
		return RuleRWExclusion
	case rPermits:
		return RulePermits
	}
	return ""
}

// apply computes the effect of o on s, as if o took effect (ok, or the
// "it happened" branch of an unknown op). Where o may leave more than one
// state (see others), it is the first of them.
func apply(s state, o *lop) (state, reason) {
	if o.shared {
		return applyShared(s, o)
	}
	switch o.kind {
	case history.Acquire:
		p := max(s.now, o.call)
		if s.holder != 0 && (s.holder != o.client || o.noNest) {
			// The previous lease must possibly have expired: p > validUntil.
			if s.validUntil == inf {
				return s, rHeld
			}
			p = max(p, s.validUntil+1)
			if p > o.upto {
				return s, rHeld
			}
		}
		if p > o.upto {
			return s, rTooLate
		}
		// A reentrant acquire (a nested hold) is one by the holder while its
		// lease may still be valid (p is the earliest instant the acquire can
		// take effect), with the holder's token (or neither has one): it adds
		// a hold, keeps the token, and may only extend the lease, never
		// shorten it. Tokens strictly increase otherwise: once the lease
		// surely expired, the same token again is a reused token.
		nested := !o.noNest && s.holder == o.client && p <= s.expiredAfter && s.hasHolderTok == o.hasToken &&
			(!o.hasToken || o.token == s.holderTok)
		if o.hasToken && s.hasLastTok && o.token <= s.lastTok && !nested {
			return s, rTokenOrder
		}
		if nested {
			// A lease number names one hold: the holder cannot take the
			// hold it holds a second time (the trace spec's NewHold).
			if s.leaseAt(o) >= 0 {
				return s, rHoldAgain
			}
			return nest(s, o, p), rOK
		}
		n := freed(s)
		n.now = p
		n.holder, n.hasHolderTok, n.holderTok = o.client, o.hasToken, o.token
		n = addHold(n, o)
		n.validUntil = satAdd(o.call, o.validFor)
		n.expiredAfter = satAdd(o.ret, o.expireFor)
		if o.hasToken {
			n.hasLastTok, n.lastTok = true, o.token
		}
		return n, rOK
	case history.Release, history.Renew:
		p, r := actsOn(s, o)
		if r != rOK {
			return s, r
		}
		var n state
		switch {
		case o.kind == history.Release && s.leaseAt(o) >= 0:
			n = endLease(s, s.leaseAt(o)) // its own hold ends, and no other
		case o.kind == history.Release:
			countEnds(s, func(e state) bool { n = e; return false })
		default:
			// A renewal extends the lease; it never shortens what was granted.
			n = s
			n.validUntil = max(s.validUntil, satAdd(o.call, o.validFor))
			n.expiredAfter = max(s.expiredAfter, satAdd(o.ret, o.expireFor))
		}
		n.now = p
		return n, rOK
	case history.Read:
		// A read with a token is fenced like a write and raises the largest
		// token; every read must return the current value.
		if o.hasToken && s.hasMax && o.token < s.maxTok {
			return s, rFencing
		}
		if o.value != s.value {
			return s, rStaleRead
		}
		if o.hasToken && (!s.hasMax || o.token > s.maxTok) {
			n := s
			n.hasMax, n.maxTok = true, o.token
			return n, rOK
		}
		return s, rOK
	case history.Write:
		if o.hasToken && s.hasMax && o.token < s.maxTok {
			return s, rFencing
		}
		if o.hasPrev && o.prev != s.value {
			return s, rLostUpdate
		}
		n := s
		n.value = o.value
		if o.hasToken {
			n.hasMax, n.maxTok = true, max(s.maxTok, o.token)
		}
		return n, rOK
	}
	return s, rOK
}

// actsOn reports whether release or renew o can take effect in s, and the
// earliest instant it can: its client holds the key (with the holder's
// token when both have one), the lease may still be valid then, and the
// hold o names, when it names one, stands. A release or renew of a lease
// number acts on that hold and no other, whenever it lands (an unknown
// release's late request too): an ok one of a hold that already ended (or
// was never taken in this lease) is the lock's failure, since with the
// owner's other holds it ended one the client did not release (a late
// release that freed a live outer lease; fenced-v2 × migrate: the frozen
// lock's refused release came back and freed another hold of its owner).
// A release without a lease number may end any hold of its client. The
// trace spec (TraceFencedLock.tla, HasHold) reads lease numbers the same
// way.
func actsOn(s state, o *lop) (int64, reason) {
	if s.holder != o.client {
		return 0, rNotOwner
	}
	if o.hasToken && s.hasHolderTok && o.token != s.holderTok {
		return 0, rWrongToken
	}
	p := max(s.now, o.call)
	if p > s.expiredAfter {
		return 0, rExpired
	}
	if p > o.upto {
		return 0, rTooLate
	}
	if numbered(s, o) && s.leaseAt(o) < 0 {
		return 0, rHoldGone
	}
	return p, rOK
}

// others appends to out the states o may lead s to besides apply's answer
// (and besides "no effect" for an unknown op):
//   - an acquire by the holder while the lease may still be valid, one of
//     the two tokens unknown: reentrance (see reenter);
//   - a release that names no hold (see countEnds) while the holder has
//     numbered holds: each other hold it may have ended.
func others(s state, o *lop, out []state) []state {
	if o.shared {
		return othersShared(s, o, out)
	}
	if a, ok := reenter(s, o); ok {
		out = append(out, a)
	}
	if o.kind != history.Release || numbered(s, o) || s.nLeases == 0 {
		return out
	}
	p, r := actsOn(s, o)
	if r != rOK {
		return out
	}
	first := true
	countEnds(s, func(n state) bool {
		if !first {
			n.now = p
			out = append(out, n)
		}
		first = false
		return true
	})
	return out
}

// reenter returns the other state an acquire may lead to when it is by
// the holder while the lease may still be valid and only one of the two
// has a known token: the holder's hold came from an acquire of unknown
// outcome (its token never learnt) and o re-entered it, or o is of
// unknown outcome and re-entered the holder's hold. A reentrant lock
// hands its holder the hold's own token again, so the two are one lease
// with one more hold (apply's nested case); but the hold may as well have
// ended unseen (it expired before expiredAfter), and o be a new lease,
// which is apply's answer. Before this, only apply's answer was
// searched, and a history whose unknown acquire had taken effect and
// been re-entered (found by the simulation: the owner's later acquire
// re-entered the same hold once more after the known ones were
// released) was called a reused token. ok false: no such state (nor when
// o names a hold the holder already holds).
func reenter(s state, o *lop) (state, bool) {
	if o.kind != history.Acquire || s.holder == 0 || s.holder != o.client || s.hasHolderTok == o.hasToken || s.leaseAt(o) >= 0 {
		return s, false
	}
	p := max(s.now, o.call)
	if p > o.upto || p > s.expiredAfter {
		return s, false
	}
	n := nest(s, o, p)
	if o.hasToken {
		// The hold's token is o's: it was new when the hold began, and
		// no other lease can have begun since (the holder held it).
		if s.hasLastTok && o.token <= s.lastTok {
			return s, false
		}
		n.hasHolderTok, n.holderTok = true, o.token
		n.hasLastTok, n.lastTok = true, o.token
	}
	return n, true
}

// nest is s with acquire o taking effect at p as one more hold of the
// holder's lease: the lease may only grow (a nested hold with a shorter
// TTL must not shorten it).
func nest(s state, o *lop, p int64) state {
	n := addHold(s, o)
	n.now = p
	n.validUntil = max(s.validUntil, satAdd(o.call, o.validFor))
	n.expiredAfter = max(s.expiredAfter, satAdd(o.ret, o.expireFor))
	return n
}

// unknownHold is 1 for an acquire of unknown outcome (the hold it adds,
// when it took effect, is a phantom), else 0.
func unknownHold(o *lop) int32 {
	if o.maybe() {
		return 1
	}
	return 0
}

// freed is s with the key free: no holder, the fences kept.
func freed(s state) state {
	n := s
	n.holder, n.holds, n.phantoms, n.hasHolderTok, n.holderTok, n.validUntil, n.expiredAfter = 0, 0, 0, false, 0, 0, 0
	n.leases, n.nLeases, n.phantomLeases, n.untracked = [maxLeases]uint64{}, 0, 0, false
	return n
}

// maxLeases is how many numbered holds a state keeps: the workload nests
// one hold in another, and holds of acquires of unknown outcome (phantoms)
// add a few while they stand.
const maxLeases = 8

// numbered reports whether s reads lease op o by its lease number.
func numbered(s state, o *lop) bool { return o.hold != 0 && !s.untracked }

// leaseAt returns the index in s.leases of the hold o names, or -1: o
// names none, s does not hold it, or s reads numbers by count.
func (s *state) leaseAt(o *lop) int {
	if !numbered(*s, o) {
		return -1
	}
	for i, l := range s.leases[:s.nLeases] {
		if l == o.hold {
			return i
		}
	}
	return -1
}

// phantomAt reports whether s.leases[i] is a phantom hold.
func (s *state) phantomAt(i int) bool { return s.phantomLeases&(1<<uint(i)) != 0 }

// addHold is s with acquire o's hold added to the holder's: a phantom for
// an acquire of unknown outcome, numbered when o names one. Past
// maxLeases numbered holds, s reads every hold by count until the key is
// free (untracked).
func addHold(s state, o *lop) state {
	s.holds++
	s.phantoms += unknownHold(o)
	if !numbered(s, o) {
		return s
	}
	if int(s.nLeases) == len(s.leases) {
		s.leases, s.nLeases, s.phantomLeases, s.untracked = [maxLeases]uint64{}, 0, 0, true
		return s
	}
	// Kept sorted, so that equal sets of holds are equal states.
	i := int(s.nLeases)
	for i > 0 && s.leases[i-1] > o.hold {
		s.leases[i] = s.leases[i-1]
		i--
	}
	s.leases[i] = o.hold
	low := s.phantomLeases & (1<<uint(i) - 1)
	s.phantomLeases = low | (s.phantomLeases&^(1<<uint(i)-1))<<1
	if o.maybe() {
		s.phantomLeases |= 1 << uint(i)
	}
	s.nLeases++
	return s
}

// endLease is s with numbered hold s.leases[i] ended; the last hold frees
// the key.
func endLease(s state, i int) state {
	if s.holds == 1 {
		return freed(s)
	}
	s.holds--
	if s.phantomAt(i) {
		s.phantoms--
	}
	copy(s.leases[i:], s.leases[i+1:s.nLeases])
	s.nLeases--
	s.leases[s.nLeases] = 0
	low := s.phantomLeases & (1<<uint(i) - 1)
	s.phantomLeases = low | (s.phantomLeases>>1)&^(1<<uint(i)-1)
	return s
}

// countEnds yields, until yield returns false, the states a release that
// names no hold (no lease number, or one no acquire of its client on the
// key has) may leave s in, the first one without a numbered hold's end
// when it can: one hold fewer, a known one while there is one (the
// phantoms stay, up to the holds left), numbered or not (the trace spec's
// Ended). Without numbered holds that is one state, as before lease
// numbers. s has a hold. (A callback, not a slice: apply takes the first
// on the search's hot path, and allocates nothing for it.)
func countEnds(s state, yield func(state) bool) {
	known := s.holds > s.phantoms
	plain := s.holds - int32(s.nLeases)
	plainPhantoms := s.phantoms - int32(bits.OnesCount8(s.phantomLeases))
	if plain > 0 && (plain > plainPhantoms || !known) {
		n := s
		if n.holds == 1 {
			n = freed(s)
		} else {
			n.holds--
			n.phantoms -= plainPhantoms - min(plainPhantoms, plain-1)
		}
		if !yield(n) {
			return
		}
	}
	for i := range int(s.nLeases) {
		if (!s.phantomAt(i) || !known) && !yield(endLease(s, i)) {
			return
		}
	}
}

// vanishes appends to out the states s leads to when one of its phantom
// holds is taken back (none: s has none). An acquire of unknown outcome
// may have taken effect with nobody knowing, and a lock may then take its
// hold back later without any op of the history saying so: the shipped
// lock's cleanup of a lost acquire (found by the simulation, fenced seeds
// 3154 and 4089: the owner re-entered the hold of its lost acquire, and
// the cleanup later took that hold back, the owner's own hold standing; no
// order of the recorded ops explains the key freed after the owner's
// releases). It may happen at any instant after the acquire took effect,
// so the models try it before every op; it takes back a phantom hold
// only, never one a client knows it holds, so no lease a client was told
// of ends by it. A numbered phantom is taken back by its number (a later
// release of it finds it gone).
func vanishes(s state, out []state) []state {
	if s.holder == 0 || s.phantoms == 0 {
		return out
	}
	if s.phantoms > int32(bits.OnesCount8(s.phantomLeases)) {
		n := s
		if n.holds == 1 {
			n = freed(s)
		} else {
			n.holds--
			n.phantoms--
		}
		out = append(out, n)
	}
	for i := range int(s.nLeases) {
		if s.phantomAt(i) {
			out = append(out, endLease(s, i))
		}
	}
	return out
}

// bases returns s and the states s leads to as any of its phantom holds
// are taken back (vanishes), each once.
func bases(s state) []state {
	out := []state{s}
	for i := 0; i < len(out); i++ {
		for _, n := range vanishes(out[i], nil) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// mayHaveNoEffect reports whether the search must follow an op of
// unknown outcome that had no effect, apply having answered r for its
// effect: always, but for an acquire on a key with modes whose effect
// fits (r is rOK). Its hold, taken, blocks nobody (applyShared: a
// phantom) and only lets its client do more, so the state with it allows
// all the state without it does; following both doubled the states with
// each such acquire, and a 128-op chunk of fenced-rw under resets ran out
// of its budget.
func mayHaveNoEffect(o *lop, r reason) bool {
	return !(o.shared && o.kind == history.Acquire && r == rOK)
}

// checked reports whether an op goes into the Porcupine model: ops that
// surely had no effect (fail, rejected) carry no constraint and are left
// out; so are unknown reads: they observed nothing, and the only effect one
// may have had (raising the largest token) can only forbid later ops, so the
// "no effect" branch always covers it.
func checked(o *lop) bool {
	switch o.result {
	case history.OK:
		return true
	case history.Unknown:
		return o.kind != history.Read
	}
	return false
}

// newModel returns the Porcupine model of every partition. Each op is its
// own input (a *lop, the result inside); outputs are unused. The model is
// nondeterministic: an unknown op forks into "had no effect" and "took
// effect". When ctx is done every step fails, so that the search ends fast;
// callers then report unknown, never ok.
func newModel(ctx context.Context, p *prepared) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, in, _ any) []any {
			if ctx.Err() != nil {
				return nil
			}
			var out []any
			add := func(x state) {
				for _, y := range out {
					if y.(state) == x {
						return
					}
				}
				out = append(out, x)
			}
			o := in.(*lop)
			for _, s := range bases(st.(state)) {
				n, r := apply(s, o)
				if o.maybe() && mayHaveNoEffect(o, r) {
					add(s)
				}
				if r == rOK {
					add(n)
				}
				for _, a := range others(s, o, nil) {
					add(a)
				}
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(state) == b.(state) },
		Hash:  func(a any) uint64 { return a.(state).hash() },
		DescribeOperation: func(in, _ any) string {
			return p.describe(in.(*lop))
		},
		DescribeState: func(st any) string { return "" },
	}
	m := nm.ToModel()
	// Describe a set of states without the set braces of a single state, and
	// per partition kind (lease fields or resource fields). Porcupine's
	// page puts a state's description into innerHTML: it is escaped, since
	// client names and values come from the history (review: a client
	// named `c"><img src=x onerror=alert(1)>` ran script in the page; %q
	// does not escape < and >).
	m.DescribeState = func(st any) string {
		ss := st.([]any)
		parts := make([]string, 0, len(ss))
		for _, s := range ss {
			parts = append(parts, p.describeState(s.(state)))
		}
		if len(parts) == 1 {
			return html.EscapeString(parts[0])
		}
		return html.EscapeString("one of {" + strings.Join(parts, " | ") + "}")
	}
	return m
}

// describeState renders a state for the visualization. Lease fields and
// resource fields are shown together; a partition leaves the other's zero.
func (p *prepared) describeState(s state) string {
	var b strings.Builder
	if s.shared != "" {
		b.WriteString(p.describeShared(s))
	} else if s.holder != 0 {
		fmt.Fprintf(&b, "held by %q", p.clients[s.holder])
		if s.hasHolderTok {
			fmt.Fprintf(&b, " token %d", s.holderTok)
		}
		fmt.Fprintf(&b, ", surely valid until %s, surely expired after %s", fmtTime(s.validUntil), fmtTime(s.expiredAfter))
	} else if s.now != 0 || s.hasLastTok {
		b.WriteString("free")
	}
	if s.hasLastTok {
		fmt.Fprintf(&b, "; last token %d", s.lastTok)
	}
	if s.value != 0 || s.hasMax {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "value %q", p.values[s.value])
		if s.hasMax {
			b.WriteString(", max token " + strconv.FormatUint(s.maxTok, 10))
		}
	}
	if b.Len() == 0 {
		return "initial"
	}
	return b.String()
}
