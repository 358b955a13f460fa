package checker

import (
	"context"
	"fmt"
	"html"
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
	// vanish).
	phantoms int32
	// leases are the lease numbers (history.Op.Lease) of the holder's
	// holds, known and phantom, nLeases of them; untracked when they are
	// not all known (more holds than fit, an op without a lease number, a
	// hold that ended without saying which): see lateRelease.
	leases       [4]uint64
	nLeases      int8
	untracked    bool
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
	for _, l := range s.leases {
		mix(l)
	}
	mix(uint64(s.nLeases))
	mix(uint64(s.value))
	mix(s.maxTok)
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
	rFencing           // accepted resource op with a token below the largest accepted
	rLostUpdate        // write whose prev is not the current value
	rStaleRead         // read that does not return the current value
)

// rule maps a reason to the rule it breaks.
func (r reason) rule(k history.Kind) string {
	switch r {
	case rHeld:
		return RuleMutualExclusion
	case rTokenOrder:
		return RuleTokenOrder
	case rNotOwner, rWrongToken, rExpired:
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
	}
	return ""
}

// apply computes the effect of o on s, as if o took effect (ok, or the
// "it happened" branch of an unknown op).
func apply(s state, o *lop) (state, reason) {
	switch o.kind {
	case history.Acquire:
		p := max(s.now, o.call)
		if s.holder != 0 && s.holder != o.client {
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
		nested := s.holder == o.client && p <= s.expiredAfter && s.hasHolderTok == o.hasToken &&
			(!o.hasToken || o.token == s.holderTok)
		if o.hasToken && s.hasLastTok && o.token <= s.lastTok && !nested {
			return s, rTokenOrder
		}
		if nested {
			return nest(s, o, p), rOK
		}
		n := freed(s)
		n.now = p
		n.holder, n.holds, n.phantoms = o.client, 1, unknownHold(o)
		n = addLease(n, o)
		n.hasHolderTok, n.holderTok = o.hasToken, o.token
		n.validUntil = satAdd(o.call, o.validFor)
		n.expiredAfter = satAdd(o.ret, o.expireFor)
		if o.hasToken {
			n.hasLastTok, n.lastTok = true, o.token
		}
		return n, rOK
	case history.Release, history.Renew:
		if s.holder != o.client {
			return s, rNotOwner
		}
		if o.hasToken && s.hasHolderTok && o.token != s.holderTok {
			return s, rWrongToken
		}
		p := max(s.now, o.call)
		if p > s.expiredAfter {
			return s, rExpired
		}
		if p > o.upto {
			return s, rTooLate
		}
		if lateRelease(s, o, p) {
			return s, rTooLate
		}
		n := s
		n.now = p
		switch {
		case o.kind == history.Release && s.holds > 1:
			n.holds-- // a nested hold ends; the lease goes on
			n.phantoms = min(n.phantoms, n.holds)
			n = dropLease(n, o)
		case o.kind == history.Release:
			n = freed(s)
			n.now = p
		default:
			// A renewal extends the lease; it never shortens what was granted.
			n.validUntil = max(s.validUntil, satAdd(o.call, o.validFor))
			n.expiredAfter = max(s.expiredAfter, satAdd(o.ret, o.expireFor))
		}
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
// released) was called a reused token. ok false: no such state.
func reenter(s state, o *lop) (state, bool) {
	if o.kind != history.Acquire || s.holder == 0 || s.holder != o.client || s.hasHolderTok == o.hasToken {
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
	n := s
	n.now = p
	n.holds++
	n.phantoms += unknownHold(o)
	n = addLease(n, o)
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
	n.leases, n.nLeases, n.untracked = [4]uint64{}, 0, false
	return n
}

// lateRelease reports whether release o, taking effect at p after it
// returned (a release of unknown outcome: its request may land late, see
// history.Op.OpenEnded), would end a hold other than its own: its lease
// number is not among the holder's holds. A late request of a release
// whose hold is gone must change nothing: ending the client's newer
// hold with it is the lock's failure (the shipped lock's round-three
// defect 1: a late release freed the lock under a live outer lease), not
// an explanation of the history. Since 2026-12-05: before, such a late
// release could end any later hold of its client, and a workload that
// lets releases time out (rush-release) gave nearly every client one, so
// the lease model explained away two holders at once (get-del under
// pause-client passed lease in half the seeds). Inside its call and
// return, and when the holds' numbers are not all known, it may end any
// hold of its client, as before.
func lateRelease(s state, o *lop, p int64) bool {
	if o.kind != history.Release || p <= o.ret || o.lease == 0 || s.untracked {
		return false
	}
	for _, l := range s.leases[:s.nLeases] {
		if l == o.lease {
			return false
		}
	}
	return true
}

// addLease records acquire o's lease number among the holder's holds.
func addLease(s state, o *lop) state {
	if o.lease == 0 || int(s.nLeases) == len(s.leases) {
		s.untracked = true
		return s
	}
	s.leases[s.nLeases] = o.lease
	s.nLeases++
	return s
}

// dropLease takes release o's lease number out of the holder's holds (a
// nested hold ended); a release without one, or with one not recorded,
// ended a hold nobody can name.
func dropLease(s state, o *lop) state {
	for i, l := range s.leases[:s.nLeases] {
		if o.lease != 0 && l == o.lease {
			copy(s.leases[i:], s.leases[i+1:s.nLeases])
			s.nLeases--
			s.leases[s.nLeases] = 0
			return s
		}
	}
	s.untracked = true
	return s
}

// vanish takes one phantom hold back (ok false: s has none). An acquire
// of unknown outcome may have taken effect with nobody knowing, and a
// lock may then take its hold back later without any op of the history
// saying so: the shipped lock's cleanup of a lost acquire (found by the
// simulation, fenced seeds 3154 and 4089: the owner re-entered the hold
// of its lost acquire, and the cleanup later took that hold back, the
// owner's own hold standing; no order of the recorded ops explains the
// key freed after the owner's releases). It may happen at any instant
// after the acquire took effect, so the models try it before every op;
// it takes back a phantom hold only, never one a client knows it holds,
// so no lease a client was told of ends by it.
func vanish(s state) (state, bool) {
	if s.holder == 0 || s.phantoms == 0 {
		return s, false
	}
	if s.holds == 1 {
		return freed(s), true
	}
	n := s
	n.holds--
	n.phantoms--
	n.untracked = true // which hold went back is not known
	return n, true
}

// bases returns s and the states s leads to as its phantom holds are
// taken back one after another (vanish).
func bases(s state) []state {
	out := []state{s}
	for {
		n, ok := vanish(s)
		if !ok {
			return out
		}
		out = append(out, n)
		s = n
	}
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
				if o.maybe() {
					add(s)
				}
				if r == rOK {
					add(n)
				}
				if a, ok := reenter(s, o); ok {
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
	if s.holder != 0 {
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
