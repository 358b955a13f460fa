package judge

import (
	"slices"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// The profiles' predictions: what DESIGN.md's guarantees (G1–G6) predict
// for a lock that claims a profile (locker.Entry.Profile), by what the
// fault does: its row of traits in package contract (contract.FaultTraits),
// which each row of the table below (profileRows) is keyed by. A lock's own
// knowledge (what it is known to break, where a fault strikes it, its
// decisive scenario) lives with the lock, in its locker.Entry: the
// specimens' in package zoo, beside their code.
//
//   - none of the traits below (none, latency, clock-skew, crash-client,
//     migrate, ...): every property holds.
//   - PausesHolder (pause-client: a holder frozen 3×TTL right after its
//     lease check): the woken holder writes on a check another client's
//     grant made false (claims violated); a fenced lock's resource refuses
//     the late write (rejected > 0), a lease lock's accepts it (resource
//     violated).
//   - FailsOver (failover; takeover and minority-partition, a cluster
//     shard's): a lease in the replication gap is lost (lease and claims
//     may break), with a fenced lock's places in line (fairness and
//     hand-off promptness may), and a fenced lock's release in the gap
//     comes back with its hold (waiter liveness may); unfenced data may
//     then be overwritten (resource may). With SkewsPromoted
//     (failover-skew), besides, a fenced lock's deadlines written by the
//     old master's clock last longer on the promoted one (waiter liveness
//     may), and so do a lease lock's leases (liveness may).
//   - Forgets (key-loss, restart, force-unlock, a cluster's shard-outage):
//     Redis forgets the holder's lock (lease and claims may break); a
//     fenced lock's queue goes with it (fairness, waiter liveness and
//     hand-off promptness may), a lease lock's unfenced write may
//     overwrite the next holder's (resource may); whether the holder is
//     told depends on the lock's watchdog (locker.Entry.LossBound).
//   - Unserved (shard-outage): liveness may break besides (the shard
//     serves nobody for a while). UnservedOnCluster (failover,
//     failover-skew): on a Redis Cluster alone, liveness may break too
//     (PredictOn: the failed shard serves nobody until its replica is
//     elected).
//   - DeliversLate (late-delivery): a lease lock's lease, resource,
//     liveness and claims may break (a late acquire takes the key for
//     nobody, a late write lands after the next holder's); a fenced
//     lock's resource may (a holder's own late write after its later one
//     under the same fence).
//   - CutsSubscriptions: under a partition and a reset a fenced lock with
//     a hand-off promise's hand-off promptness may break near the window
//     (the waiters whose subscription the fault cut look on their own
//     until a fresh one is confirmed); with KeepsServing (pubsub-reset) a
//     fenced lock's fair queue, waiter liveness and hand-off promptness
//     may break within a TTL of the window (a waiter whose look waits on
//     a connection the fault holds back loses its place; one whose
//     subscription is being made again picks its hand-off up at its own
//     look).
//   - RefusesWrites (oom): a fenced lock's waiter liveness may break near
//     the window (a wait refused in line leaves its place until the
//     lock's cleanup of it lands, and hand-offs to that place hold the
//     line up).
//   - FreezesMaster (pause-server): a lease lock's grant the frozen
//     master executed just before the freeze may reach its client after
//     the lease expired (resource: any).
//   - a fault the guarantees do not discuss (its row's Predicted false),
//     or one without a row: no prediction.
//
// ProfileNone predicts nothing.

// Sentences of the profiles' predictions.
const (
	whyCheckedWrite = "the woken holder writes on a check that found its lease valid before the pause (claims: checked-write)"
	whyForgot       = "Redis forgot the holder's lock: another client may take the key while the holder works on (G1 may break, and the holder's claim and its check before writing with it)"
)

// A profileRow is one row of the profiles' predictions (profileRows): for
// a lock of profile (both when "") under a fault that has every trait of
// when (contract.FaultTraits.Has) but not every one of unless (the zero
// value excepts nothing), and whose entry lock accepts (every entry when
// nil), it predicts the properties of violated broken, those of may
// possibly broken, those of anyWant anything, the resource's refusals
// when rejected, and says why.
type profileRow struct {
	when, unless           contract.FaultTraits
	profile                locker.Profile
	lock                   func(locker.Entry) bool
	violated, may, anyWant []string
	rejected               bool
	why                    string
}

// applies reports whether r is a row of lock e, of profile, under a fault
// with traits t.
func (r profileRow) applies(e locker.Entry, profile locker.Profile, t contract.FaultTraits) bool {
	excepted := r.unless != contract.FaultTraits{} && t.Has(r.unless)
	return t.Has(r.when) && !excepted &&
		(r.profile == "" || r.profile == profile) && (r.lock == nil || r.lock(e))
}

// apply adds r's prediction to p.
func (r profileRow) apply(p *locker.Prediction) {
	p.Set(contract.WantViolated, r.violated...)
	p.Set(contract.WantMay, r.may...)
	p.Set(contract.WantAny, r.anyWant...)
	p.Rejected = p.Rejected || r.rejected
	p.Because(r.why)
}

// lossNotice and noLossNotice ask whether an entry promises a loss notice
// (locker.Entry.LossBound); handsOff, a prompt hand-off (Entry.Handoff).
func lossNotice(e locker.Entry) bool   { return e.LossBound != nil }
func noLossNotice(e locker.Entry) bool { return e.LossBound == nil }
func handsOff(e locker.Entry) bool     { return e.Handoff != nil }

// profileRows is the table of the profiles' predictions, (profile × fault
// trait): every row that applies to a lock under a fault adds to its
// prediction, in this order (the order of its sentences). The traits
// that key the rows are each a mechanism; a fault with none of them gets
// the start of every row, every property held.
func profileRows() []profileRow {
	return slices.Concat(pausedOrFailedOverRows(), forgottenRows(), deliveryRows())
}

// The profiles, as profileRows' rows name them.
const (
	fenced = locker.ProfileFenced
	lease  = locker.ProfileLease
)

// pausedOrFailedOverRows are the rows of a holder paused past its lease
// (PausesHolder) and of a failover (FailsOver).
func pausedOrFailedOverRows() []profileRow {
	return []profileRow{
		{when: contract.FaultTraits{PausesHolder: true}, profile: fenced,
			violated: []string{contract.PropClaims}, rejected: true,
			why: "fencing refuses the paused holder's late ops (rejected > 0)"},
		{when: contract.FaultTraits{PausesHolder: true}, profile: lease,
			violated: []string{contract.PropClaims, contract.PropResource},
			why:      "G1 holds (owner-checked release) but the woken holder's unfenced write is stale"},

		{when: contract.FaultTraits{FailsOver: true}, profile: lease,
			may: []string{contract.PropLease, contract.PropResource, contract.PropClaims},
			why: "a lease in the replication gap is lost (G1 may break, and its holder's claim with it) and unfenced data may then be overwritten"},
		// As below: a lease written by the old master's clock lasts up to
		// the skew longer on the promoted node, which refuses acquires the
		// checker knows the key surely free for (found by the simulation:
		// docs/FINDINGS.md).
		{when: contract.FaultTraits{FailsOver: true, SkewsPromoted: true}, profile: lease,
			may: []string{contract.PropLiveness},
			why: "the promoted replica's clock is behind: expiries written by the old master's clock last up to the skew longer there, so the key may stay taken after it surely expired (liveness may break)"},
		{when: contract.FaultTraits{FailsOver: true}, profile: fenced,
			may: []string{contract.PropLease, contract.PropClaims, contract.PropFairness, contract.PropPromptness},
			why: "a lease in the replication gap is lost (G1 may break, and its holder's claim with it), and so are places in line (later joiners may be served first, and a waiter that lost its place is served at its next look, not by the release's hand-off); fencing keeps the data safe"},
		// A release in the gap is lost as well: its hold is back on the
		// promoted master, which nobody knows of, and it keeps the key for
		// up to its TTL after the window, or for as long as its owner
		// re-enters it (a reentrant acquire renews the hold it joins).
		// Found by the simulation: fenced seeds 31755, 44953 and 67059 of
		// 100,000, a waiter served 492ms after the key was free by every
		// recorded op.
		{when: contract.FaultTraits{FailsOver: true}, profile: fenced,
			may: []string{contract.PropLiveness},
			why: "a release in the replication gap is lost too: its hold comes back on the promoted master and keeps the key for up to its TTL, or for as long as its owner re-enters it, so a waiter may be served later than the lock promises (waiter liveness may break)"},
		// Redis replicates expiries as absolute times (PX as PXAT), and the
		// queue's deadlines are the old master's clock readings, so on a
		// promoted node whose clock is behind, the leases and queue places
		// written before the failover last up to the skew longer: a waiter
		// may be served later than the lock's waiter bound once the fault
		// window has closed.
		{when: contract.FaultTraits{FailsOver: true, SkewsPromoted: true}, profile: fenced,
			may: []string{contract.PropLiveness},
			why: "the promoted replica's clock is behind: its clock-based fences fall below the old master's, so the resource refuses new holders until that clock catches up (the stall the fault evidence measures; data stays safe); expiries and queue deadlines written by the old master's clock last up to the skew longer there, so a waiter may be served later than the lock promises (waiter liveness may break)"},
	}
}

// forgottenRows are the rows of a lock Redis forgot (Forgets) and of a
// shard that serves nobody for a while (Unserved).
func forgottenRows() []profileRow {
	return []profileRow{
		// Redis forgot the holder's lock: the next client takes the key
		// while the holder works on, believing it holds. (A restart also
		// cuts every connection for a moment.)
		{when: contract.FaultTraits{Forgets: true},
			may: []string{contract.PropLease, contract.PropClaims}, why: whyForgot},
		// The DEL takes the queue too: the waiters in line lose their
		// places, and later joiners may be served first.
		{when: contract.FaultTraits{Forgets: true}, profile: fenced,
			may: []string{contract.PropFairness, contract.PropLiveness, contract.PropPromptness},
			why: "fencing refuses the old holder's late ops; the queue is deleted with the lock, so waiters lose their places (fair queue, waiter liveness and hand-off promptness may break)"},
		{when: contract.FaultTraits{Forgets: true}, profile: lease,
			may: []string{contract.PropResource},
			why: "the old holder's unfenced write may overwrite the new holder's"},
		{when: contract.FaultTraits{Forgets: true}, lock: lossNotice,
			why: "its watchdog's next renewal finds the key gone and tells the holder within the lock's bound (loss notice)"},
		{when: contract.FaultTraits{Forgets: true}, lock: noLossNotice,
			why: "it runs no watchdog: the holder is never told"},

		// Found by the cluster matrix (watchdog × shard-outage, 167
		// acquires refused while the shard was down): nobody serves the
		// key's slot until the shard is back and agrees with the others.
		{when: contract.FaultTraits{Unserved: true},
			may: []string{contract.PropLiveness},
			why: "the shard serves nobody until it is back and agrees with the others: an acquire of a key surely free is refused meanwhile (liveness may break)"},
	}
}

// deliveryRows are the rows of faults on what is sent and answered: late
// requests (DeliversLate), cut subscriptions (CutsSubscriptions), refused
// writes (RefusesWrites), a frozen master (FreezesMaster).
func deliveryRows() []profileRow {
	return []profileRow{
		// Only a lock that buries the requests its callers gave up on
		// (package lock's cleanup) can refuse one that lands late: here an
		// acquire, a release or a write takes effect after its caller's
		// deadline, when the history says it could not.
		{when: contract.FaultTraits{DeliversLate: true}, profile: lease,
			may: []string{contract.PropLease, contract.PropResource, contract.PropLiveness, contract.PropClaims},
			why: "a request held in transit lands after its sender gave up: an acquire takes the key for nobody, and an unfenced write lands after the next holder's; nothing in the lock can tell it came late (lease, resource, liveness and claims may break)"},
		// Seen in the simulation (fenced, swarm seeds 1160 and 1405 of
		// 2,000): an owner whose lost holds kept its key kept one fence
		// across sections; its write of unknown outcome, held in transit,
		// landed after its later write under that same fence, and the
		// resource took it (a lost update).
		{when: contract.FaultTraits{DeliversLate: true}, profile: fenced,
			may: []string{contract.PropResource},
			why: "a holder's own write held in transit may land after its later write under the same fence: a token orders holders, not one holder's writes (resource may break)"},

		// Found by the simulation (fenced, swarm seed 1546; the counts are
		// in docs/FINDINGS.md): the waiters woken by the drop look at once,
		// and a look that needs a connection more than the client has open
		// dials it in the stall, 250ms; the hand-off given at its place
		// meanwhile (a 100ms lease) runs out, and the waiter, dropped from
		// the line, is served after those behind it, and late. With the
		// stall below the hand-off lease, as predicted. Excused only within
		// a TTL of the window (contract.ExcuseAfter): a waiter deaf to its
		// hand-offs after the fault still shows.
		{when: contract.FaultTraits{CutsSubscriptions: true, KeepsServing: true}, profile: fenced,
			may: []string{contract.PropFairness, contract.PropLiveness, contract.PropPromptness},
			why: "the fault holds back for half a TTL every connection a client opens right after a drop, a command's too: a waiter whose look waits on one takes longer than its hand-off lease and loses its place (fair queue and waiter liveness may break, within a TTL of the window), and a waiter whose subscription is being made again hears of no hand-off and picks it up at its own look (hand-off promptness may break)"},
		// Found by the simulation (fenced, partition seeds 2 and 12 of
		// 25): a release just after the window closed, its head granted
		// 39ms and 47ms later. The fault cut the waiters' pub/sub
		// connection; until the notifier's fresh one is confirmed (a
		// backoff from 10ms) they look every half hand-off lease, and pick
		// a hand-off up at their look, not at its message.
		{when: contract.FaultTraits{CutsSubscriptions: true}, unless: contract.FaultTraits{KeepsServing: true}, profile: fenced, lock: handsOff,
			may: []string{contract.PropPromptness},
			why: "the fault cuts the waiters' pub/sub connection: until a fresh one is confirmed they pick a hand-off up at their own look, every half hand-off lease (hand-off promptness may break, near the window)"},

		// Found by the simulation (fenced, --faults oom, seeds 12, 16, 44,
		// 74 and 99 of 100): a wait whose pickup or leave Redis refused
		// says ErrNotAcquired and leaves the line in the background
		// (package lock's design: its cleanup resends the leave with a
		// backoff up to a second); its place stays in line meanwhile, and
		// each hand-off given to it holds the line up for a hand-off
		// lease. Waiters were served 0.4-0.9s after the key was surely
		// free, within 1.2s of the window's end.
		{when: contract.FaultTraits{RefusesWrites: true}, profile: fenced,
			may: []string{contract.PropLiveness},
			why: "a wait refused in line leaves its place until the lock's background cleanup lands: each hand-off given to that place holds the line up for a hand-off lease (waiter liveness may break, near the window)"},

		// Seen once (lua, a 1-seed default run): an acquire the master
		// executed just before it froze got its reply 750ms later, past
		// its 500ms TTL; another client took the key at the thaw, and the
		// first one's unfenced write then lost the second one's update. G1
		// held (the first lease had expired).
		{when: contract.FaultTraits{FreezesMaster: true}, profile: lease,
			anyWant: []string{contract.PropResource},
			why:     "a grant the frozen master executed just before the freeze reaches its client after the lease expired; that client's unfenced write may then overwrite the next holder's (timing: the grant must land just before the freeze)"},
	}
}
