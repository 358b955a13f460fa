package checker

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// FootprintBound is what a lock states it keeps in Redis for a key
// (Options.Footprint): at most
//
//	Base + PerHold×holds + PerWaiter×waiters + PerUnknown×unknown
//
// records (hash fields, set members and string keys of the lock's keys),
// counting what may be alive at the sample (see checkFootprint). A lock
// that never forgets a buried call, or a record of a hold that ended,
// grows past it.
type FootprintBound struct {
	// Base: the records of a held lock whoever holds it (fixed fields,
	// counters).
	Base int64
	// PerHold: the records of each hold that may be alive.
	PerHold int64
	// PerWaiter: the records of each waiter in line.
	PerWaiter int64
	// PerUnknown: the records a call may leave behind for a while when
	// its outcome was unknown (a buried id, its hold and its place, the
	// cleanup not yet run), or when it gave up waiting in line.
	PerUnknown int64
	// BuriedFor: how long such a call's records may stay (package lock:
	// a buried id lives an hour).
	BuriedFor time.Duration
}

// FootprintUsed is Options.Footprint as check.json records it.
type FootprintUsed struct {
	Base        int64 `json:"base"`
	PerHold     int64 `json:"per_hold"`
	PerWaiter   int64 `json:"per_waiter"`
	PerUnknown  int64 `json:"per_unknown"`
	BuriedForMs int64 `json:"buried_for_ms"`
}

// Bound is the bound a check.json recorded, to check again with it (nil
// for none).
func (u *FootprintUsed) Bound() *FootprintBound {
	if u == nil {
		return nil
	}
	return &FootprintBound{Base: u.Base, PerHold: u.PerHold, PerWaiter: u.PerWaiter, PerUnknown: u.PerUnknown,
		BuriedFor: time.Duration(u.BuriedForMs) * time.Millisecond}
}

func (b *FootprintBound) used() *FootprintUsed {
	if b == nil {
		return nil
	}
	return &FootprintUsed{Base: b.Base, PerHold: b.PerHold, PerWaiter: b.PerWaiter, PerUnknown: b.PerUnknown, BuriedForMs: b.BuriedFor.Milliseconds()}
}

// checkFootprint decides the footprint property on a key (G6): each ok
// footprint sample s, taken in [s.call, s.return], holds at most the
// records the lock's bound (Options.Footprint) allows for what may be
// alive at some instant of it, counted conservatively (anything that may
// be alive counts):
//
//   - holds: acquires that did not fail, called by s.return, and neither
//     ended by an ok release of their lease that returned before s.call
//     nor surely expired by then: their client's lease, renewed by any of
//     its acquires and renewals (ok, unknown or never returned) called by
//     s.return, surely expired (return + ceil(T(1+d))) before s.call;
//   - waiters: blocking acquires in flight at some instant of the sample
//     (called by s.return, not returned before s.call);
//   - unknown: lock calls (acquire, release, renew) of unknown outcome or
//     never returned, and blocking acquires that failed (a waiter that gave
//     up buries its call and may leave its place), called by s.return and
//     not returned BuriedFor or more before s.call.
//
// Rule footprint-bound: records above the bound. n/a without a bound or
// without an ok sample.
func (c *run) checkFootprint(k *keyOps) finding {
	f := finding{verdict: contract.NA}
	b := c.opts.Footprint
	if b == nil {
		return f
	}
	for _, s := range k.samples {
		if s.result != history.OK || !s.src.HasRecords {
			continue
		}
		f.verdict = contract.OK
		holds, waiters, unknown := footprintAlive(k, s, b.BuriedFor.Nanoseconds())
		bound := satAdd(b.Base, satAdd(satMul(b.PerHold, holds), satAdd(satMul(b.PerWaiter, waiters), satMul(b.PerUnknown, unknown))))
		if s.src.Records <= bound {
			continue
		}
		f.violations = append(f.violations, c.violation(contract.PropFootprintName, RuleFootprintBound, k.key,
			fmt.Sprintf("%s measured %d records of the lock's keys at %s, above its bound %d = %d + %d×%d holds + %d×%d waiters + %d×%d calls of unknown outcome or given up (what may have been alive then): the lock keeps what nothing alive needs",
				c.p.describe(s), s.src.Records, fmtTime(s.call), bound, b.Base, b.PerHold, holds, b.PerWaiter, waiters, b.PerUnknown, unknown), s))
	}
	return f
}

// footprintAlive counts, for sample s, the holds, waiters and calls of
// unknown outcome (or given up in line) that may be alive at some instant
// of [s.call, s.return] (checkFootprint).
func footprintAlive(k *keyOps, s *lop, buriedFor int64) (holds, waiters, unknown int64) {
	// expires is, per client, when its lease surely expired: the latest
	// bound of its acquires and renewals that did not fail, called by
	// s.return (inf: one never returned, or has no TTL).
	expires := map[int32]int64{}
	type leaseOf struct {
		client int32
		lease  uint64
	}
	released := map[leaseOf]bool{}
	for _, o := range k.lease {
		if o.call > s.ret {
			continue
		}
		switch {
		case (o.kind == history.Acquire || o.kind == history.Renew) && o.result != history.Fail:
			expires[o.client] = max(expires[o.client], satAdd(o.ret, o.expireFor))
		case o.kind == history.Release && o.result == history.OK && o.lease != 0 && o.ret < s.call:
			released[leaseOf{o.client, o.lease}] = true
		}
	}
	for _, o := range k.lease {
		if o.call > s.ret {
			continue
		}
		inFlight := o.ret >= s.call // inf when it never returned
		if o.kind == history.Acquire && o.result != history.Fail &&
			!(o.lease != 0 && released[leaseOf{o.client, o.lease}]) && expires[o.client] >= s.call {
			holds++
		}
		if o.kind == history.Acquire && o.wait && inFlight {
			waiters++
		}
		gaveUp := o.kind == history.Acquire && o.wait && o.result == history.Fail
		if (o.result == history.Unknown || o.ret == inf || gaveUp) && satAdd(o.ret, buriedFor) >= s.call {
			unknown++
		}
	}
	return holds, waiters, unknown
}

// satMul is a×n, inf past it (a, n >= 0).
func satMul(a, n int64) int64 {
	if a == 0 || n == 0 {
		return 0
	}
	if a > inf/n {
		return inf
	}
	return a * n
}
