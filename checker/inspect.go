package checker

import (
	"fmt"
	"strconv"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// The inspect rules (lease property) hold what a lock says of a key's
// holders (history.Inspect: who holds it, with which fence and how many
// holds; history.Holds: how many holds the asking client has) to the
// holds the history shows. A lock that reports its state wrongly misleads
// the operator or the code that trusts it (Redisson's isHeldByThread and
// getHoldCount, package lock's Inspect and HoldsOf), and a wrong report
// is often the first sign that its state is wrong.
//
// A hold is one acquire of a client (its Lease number, or the acquire op
// itself when the history numbers none) with the releases, renewals and
// loss notices of that number. It is surely live throughout [a, b] when
// its acquire returned ok before a, none of its releases or loss notices
// (nor a lease-less one of its client) was called by b, b comes before its
// surely-lasts bound (the acquire's or an ok renewal's call plus the TTL
// less the drift), and no fault window that may make Redis forget a lease
// (every fault but those that keep Redis serving) opened from the
// acquire's call to b. It may be live at some instant of [a, b] when its
// acquire did not fail and was called by b, no ok release of it returned
// before a, and its client's hold span may reach a (mayBeLive).
//
// A blocking acquire that failed surely took no lease, but its place in
// line may outlive it: a lock that leaves the line in the background
// after a refusal (package lock: a refused pickup or leave is made sure
// by its cleanup, and the call says ErrNotAcquired) may hand the key to
// that place meanwhile, provisionally, in its client's name. Such a
// place may be live, with a fence it never returned, from the wait's
// call until its client's next ok acquire returned: that one was served
// after it (a later wait of the client queued behind the place, and a
// one-shot acquire is refused while others queue), so its hand-off was
// over. A failed one-shot acquire has no place, and takes nothing.

// inspectHold is one hold of a client, for the inspect rules.
type inspectHold struct {
	acq      *lop
	renews   []*lop
	releases []*lop // releases and loss notices of the hold
	// placeUntil, for a blocking acquire that failed (a place in line,
	// no lease), is the return of its client's next ok acquire (inf:
	// none).
	placeUntil int64
}

// inspectIndex groups a key's holds by client.
type inspectIndex map[int32][]*inspectHold

func (c *run) inspectIndex(k *keyOps) inspectIndex {
	idx := inspectIndex{}
	byLease := map[[2]uint64]*inspectHold{}
	var leaseless []*lop // lease-less releases and loss notices: about every hold of the client
	add := func(o *lop) {
		if o.lease == 0 {
			leaseless = append(leaseless, o)
			return
		}
		if h := byLease[[2]uint64{uint64(o.client), o.lease}]; h != nil {
			if o.kind == history.Renew {
				h.renews = append(h.renews, o)
			} else {
				h.releases = append(h.releases, o)
			}
		}
	}
	// Each client's failed waits, whose places last until its next ok
	// acquire returned.
	places := map[int32][]*inspectHold{}
	for _, o := range k.lease { // by call
		if o.kind != history.Acquire {
			continue
		}
		if o.result == history.OK {
			for _, p := range places[o.client] {
				p.placeUntil = o.ret
			}
			delete(places, o.client)
		}
		if o.result == history.Fail {
			if o.wait {
				h := &inspectHold{acq: o, placeUntil: inf}
				idx[o.client] = append(idx[o.client], h)
				places[o.client] = append(places[o.client], h)
			}
			continue
		}
		h := &inspectHold{acq: o}
		idx[o.client] = append(idx[o.client], h)
		if o.lease != 0 {
			byLease[[2]uint64{uint64(o.client), o.lease}] = h
		}
	}
	for _, o := range k.lease {
		if o.kind == history.Renew || o.kind == history.Release {
			add(o)
		}
	}
	for _, o := range k.notices {
		add(o)
	}
	for _, o := range leaseless {
		for _, h := range idx[o.client] {
			h.releases = append(h.releases, o)
		}
	}
	return idx
}

// surelyLive reports whether h is surely live throughout [a, b].
func (c *run) surelyLive(h *inspectHold, a, b int64) bool {
	acq := h.acq
	if acq.result != history.OK || acq.ret >= a {
		return false
	}
	for _, r := range h.releases {
		if r.call <= b {
			return false
		}
	}
	bound := satAdd(acq.call, acq.validFor)
	for _, r := range h.renews {
		if r.result == history.OK && r.ret < a {
			bound = max(bound, satAdd(r.call, r.validFor))
		}
	}
	return b < bound && !c.faultDuring(acq.call, b)
}

// mayBeLive reports whether h may be live at some instant of [a, b]: its
// acquire did not fail and was called by b, no ok release of it returned
// before a, and the client's hold span that it belongs to (holdSpans: a
// client's holds keep its key while they overlap, so a hold never
// released stays counted while the client's later holds keep the key)
// may reach a. Within a fault's stale reach (stale) only the first holds:
// a promoted replica may still hold what the old master released, but
// never a hold nobody asked for.
func (c *run) mayBeLive(h *inspectHold, spans []*holdSpan, a, b int64, stale bool) bool {
	acq := h.acq
	if acq.call > b {
		return false
	}
	if acq.result == history.Fail {
		return h.placeUntil >= a // a failed wait's place, until its client's next ok acquire returned
	}
	if stale {
		return true
	}
	for _, r := range h.releases {
		if r.kind == history.Release && r.result == history.OK && r.ret < a {
			return false
		}
	}
	if acq.ret == inf {
		return true
	}
	for _, s := range spans {
		if s.start <= acq.call && acq.call <= s.end {
			return s.end >= a
		}
	}
	return true // not in a span (an op the spans leave out): not ruled out
}

// inspectChecks applies the inspect rules to a key's inspect and holds ops.
func (c *run) inspectChecks(k *keyOps) []Violation {
	if len(k.inspects) == 0 {
		return nil
	}
	idx := c.inspectIndex(k)
	spans := c.clientSpans(k)
	clientID := map[string]int32{}
	for id, name := range c.p.clients {
		clientID[name] = int32(id)
	}
	// A fault that may make Redis forget or roll back a lease (a failover
	// promotes a replica that missed the release) leaves stale holds
	// behind for up to a TTL after its window: the rules that say a lock
	// names a holder or counts holds that cannot be are not judged within
	// that reach of such a window, but for holds that cannot be on any
	// master: of a client that never asked for one, or with a fence none
	// of its holds has.
	var reach int64
	for _, o := range k.lease {
		if o.expireFor != inf {
			reach = max(reach, o.expireFor)
		}
	}
	var vs []Violation
	for _, in := range k.inspects {
		if in.result != history.OK || in.ret == inf {
			continue
		}
		a, b := in.call, in.ret
		stale := c.faultDuring(a-reach, b)
		src := in.src
		switch in.kind {
		case history.Inspect:
			var holder int32
			named := src.Holder != ""
			if named {
				var known bool
				if holder, known = clientID[src.Holder]; !known {
					holder = -1 // a client of no op of the history
				}
			}
			// inspect-free: a surely live hold of another than the one
			// named, or of anyone when the lock said the key was free.
			for x, hs := range idx {
				if src.Held && (!named || holder == x) {
					continue
				}
				for _, h := range hs {
					if !c.surelyLive(h, a, b) {
						continue
					}
					said := "the key was free"
					if src.Held {
						said = "it was held by " + strconv.Quote(src.Holder)
					}
					vs = append(vs, c.violation(contract.PropLeaseName, RuleInspectFree, k.key,
						fmt.Sprintf("%s said %s, while %s surely held it throughout (acquired before the inspect was called, not released, within its TTL)",
							c.p.describe(in), said, c.p.describe(h.acq)), h.acq, in))
					break
				}
			}
			if !src.Held || !named {
				break
			}
			// inspect-holder: the named holder must have a hold that may
			// be live then, with the fence named.
			var may []*inspectHold
			for _, h := range idx[holder] {
				if c.mayBeLive(h, spans[holder], a, b, stale) {
					may = append(may, h)
				}
			}
			if len(may) == 0 {
				vs = append(vs, c.violation(contract.PropLeaseName, RuleInspectHolder, k.key,
					fmt.Sprintf("%s named %q as the holder, but no hold of %q may have been live then%s", c.p.describe(in), src.Holder, src.Holder, staleNote(stale)), in))
				break
			}
			if src.HasToken {
				fenced := false
				for _, h := range may {
					// An acquire still running when the inspect was called
					// may hold a fence it does not return (a hand-off it
					// picked up and lost, then another).
					fenced = fenced || h.acq.result != history.OK || !h.acq.hasToken || h.acq.token == src.Token || h.acq.ret >= a
				}
				if !fenced {
					vs = append(vs, c.violation(contract.PropLeaseName, RuleInspectHolder, k.key,
						fmt.Sprintf("%s named %q with token %d, but none of its holds that may have been live then has that token", c.p.describe(in), src.Holder, src.Token), append([]*lop{in}, may[0].acq)...))
					break
				}
			}
			if src.HasHolds {
				vs = append(vs, c.holdCount(k, in, idx[holder], spans[holder], src.Holder, stale)...)
			}
		case history.Holds:
			vs = append(vs, c.holdCount(k, in, idx[in.client], spans[in.client], c.p.clients[in.client], stale)...)
		}
	}
	return vs
}

// holdCount checks a count of holds the lock gave for client name (hold-count):
// at least its holds surely live throughout the op, at most those that may be
// live at some instant of it (within a fault's stale reach, those asked for
// by then).
func (c *run) holdCount(k *keyOps, in *lop, hs []*inspectHold, spans []*holdSpan, name string, stale bool) []Violation {
	n := in.src.HoldCount
	var sure, may int64
	var witness *lop
	for _, h := range hs {
		if c.surelyLive(h, in.call, in.ret) {
			sure++
			witness = h.acq
		}
		if c.mayBeLive(h, spans, in.call, in.ret, stale) {
			may++
		}
	}
	switch {
	case n < sure:
		return []Violation{c.violation(contract.PropLeaseName, RuleHoldCount, k.key,
			fmt.Sprintf("%s counted %d holds of %q, but %d of its holds were surely live throughout (%s among them)", c.p.describe(in), n, name, sure, c.p.describe(witness)), in, witness)}
	case n > may:
		return []Violation{c.violation(contract.PropLeaseName, RuleHoldCount, k.key,
			fmt.Sprintf("%s counted %d holds of %q, but at most %d of its holds may have been live then%s", c.p.describe(in), n, name, may, staleNote(stale)), in)}
	}
	return nil
}

// staleNote says, in a violation's text, that a fault's stale reach was
// allowed for: every hold asked for by then counted, released or not.
func staleNote(stale bool) string {
	if stale {
		return " (every hold it asked for by then counted, released or not: a fault window was within a TTL)"
	}
	return ""
}
