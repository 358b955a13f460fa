package judge

import (
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// The profiles' predictions: what DESIGN.md's guarantees (G1–G6) predict
// for a lock that claims a profile (locker.Entry.Profile), fault by fault.
// A lock's own knowledge (what it is known to break, where a fault strikes
// it, its decisive scenario) lives with the lock, in its locker.Entry: the
// specimens' in package zoo, beside their code.
//
//   - none, crowd, crash-client, clock-skew, latency, partition, reset:
//     every property holds; but under partition and reset a fenced
//     lock's hand-off promptness may break near the window (the waiters
//     whose subscription the fault cut look on their own until a fresh
//     one is confirmed).
//   - pubsub-reset: every property holds, but a fenced lock's fair queue,
//     waiter liveness and hand-off promptness may break within a TTL of
//     the window (a waiter whose look waits on a connection the fault
//     holds back loses its place; one whose subscription is being made
//     again picks its hand-off up at its own look).
//   - pause-client (a holder frozen 3×TTL right after its lease check): the
//     woken holder writes on a check another client's grant made false
//     (claims violated); a fenced lock's resource refuses the late write
//     (rejected > 0), a lease lock's accepts it (resource violated).
//   - failover (master isolated after a replication lag): a lease in the
//     replication gap is lost (lease and claims may break), with a fenced
//     lock's places in line (fairness and hand-off promptness may), and a fenced lock's release
//     in the gap comes back with its hold (waiter liveness may); unfenced
//     data may then be overwritten (resource may). failover-skew:
//     besides, a fenced lock's deadlines written by the old master's
//     clock last longer on the promoted one (waiter liveness may), and
//     so do a lease lock's leases (liveness may).
//   - key-loss, restart, force-unlock: Redis forgets the holder's lock
//     (lease and claims may break); a fenced lock's queue goes with it
//     (fairness, waiter liveness and hand-off promptness may), a lease lock's unfenced write may
//     overwrite the next holder's (resource may).
//   - oom (the lock's node refuses some writes): every property holds;
//     but a fenced lock's waiter liveness may break near the window (a
//     wait refused in line leaves its place until the lock's cleanup of
//     it lands, and hand-offs to that place hold the line up).
//   - pause-server: a lease lock's grant the frozen master executed just
//     before the freeze may reach its client after the lease expired
//     (resource: any).
//   - a Redis Cluster's faults read as their Sentinel analogs
//     (contract.Like): takeover and minority-partition as failover,
//     shard-outage as restart, and besides, under shard-outage, liveness
//     may break (the shard serves nobody for a while); migrate: every
//     property holds. On a cluster, failover and failover-skew also let
//     liveness break (PredictOn: the failed shard serves nobody until
//     its replica is elected).
//   - any other fault: no prediction.
//
// ProfileNone predicts nothing.

// Sentences of the profiles' predictions.
const (
	whyCheckedWrite = "the woken holder writes on a check that found its lease valid before the pause (claims: checked-write)"
	whyForgot       = "Redis forgot the holder's lock: another client may take the key while the holder works on (G1 may break, and the holder's claim and its check before writing with it)"
)

// claimsFencing reports whether e claims the fenced profile ("" is
// ProfileFenced, the strongest claim, as locker.Registry reads it).
func claimsFencing(e locker.Entry) bool {
	return e.Profile == locker.ProfileFenced || e.Profile == ""
}

// profile is what lock e's profile predicts under fault.
func profile(e locker.Entry, fault string) locker.Prediction {
	if !contract.Predicted(fault) {
		return locker.NoPrediction("fault outside the contract: no prediction")
	}
	fenced := claimsFencing(e)
	if !fenced && e.Profile != locker.ProfileLease {
		return locker.NoPrediction("the lock claims nothing (locker.ProfileNone): no prediction")
	}
	p := locker.AllHold()
	switch contract.Like(fault) {
	case contract.FaultPauseClient:
		p.Set(contract.WantViolated, contract.PropClaims)
		if fenced {
			p.Rejected = true
			p.Because("fencing refuses the paused holder's late ops (rejected > 0)")
		} else {
			p.Set(contract.WantViolated, contract.PropResource)
			p.Because("G1 holds (owner-checked release) but the woken holder's unfenced write is stale")
		}
	case contract.FaultFailover, contract.FaultFailoverSkew:
		if !fenced {
			p.Set(contract.WantMay, contract.PropLease, contract.PropResource, contract.PropClaims)
			p.Because("a lease in the replication gap is lost (G1 may break, and its holder's claim with it) and unfenced data may then be overwritten")
			if fault == contract.FaultFailoverSkew {
				// As below: a lease written by the old master's clock
				// lasts up to the skew longer on the promoted node, which
				// refuses acquires the checker knows the key surely free
				// for (found by the simulation: docs/FINDINGS.md).
				p.Set(contract.WantMay, contract.PropLiveness)
				p.Because("the promoted replica's clock is behind: expiries written by the old master's clock last up to the skew longer there, so the key may stay taken after it surely expired (liveness may break)")
			}
			break
		}
		p.Set(contract.WantMay, contract.PropLease, contract.PropClaims, contract.PropFairness, contract.PropPromptness)
		p.Because("a lease in the replication gap is lost (G1 may break, and its holder's claim with it), and so are places in line (later joiners may be served first, and a waiter that lost its place is served at its next look, not by the release's hand-off); fencing keeps the data safe")
		// A release in the gap is lost as well: its hold is back on the
		// promoted master, which nobody knows of, and it keeps the key
		// for up to its TTL after the window, or for as long as its
		// owner re-enters it (a reentrant acquire renews the hold it
		// joins). Found by the simulation: fenced seeds 31755, 44953 and
		// 67059 of 100,000, a waiter served 492ms after the key was free
		// by every recorded op.
		p.Set(contract.WantMay, contract.PropLiveness)
		p.Because("a release in the replication gap is lost too: its hold comes back on the promoted master and keeps the key for up to its TTL, or for as long as its owner re-enters it, so a waiter may be served later than the lock promises (waiter liveness may break)")
		if fault == contract.FaultFailoverSkew {
			// Redis replicates expiries as absolute times (PX as PXAT),
			// and the queue's deadlines are the old master's clock
			// readings, so on a promoted node whose clock is behind, the
			// leases and queue places written before the failover last up
			// to the skew longer: a waiter may be served later than the
			// lock's waiter bound once the fault window has closed.
			p.Set(contract.WantMay, contract.PropLiveness)
			p.Because("the promoted replica's clock is behind: its clock-based fences fall below the old master's, so the resource refuses new holders until that clock catches up (the stall the fault evidence measures; data stays safe); expiries and queue deadlines written by the old master's clock last up to the skew longer there, so a waiter may be served later than the lock promises (waiter liveness may break)")
		}
	case contract.FaultKeyLoss, contract.FaultRestart, contract.FaultForceUnlock:
		// Redis forgot the holder's lock: the next client takes the key
		// while the holder works on, believing it holds. (A restart
		// also cuts every connection for a moment.)
		p.Set(contract.WantMay, contract.PropLease, contract.PropClaims)
		p.Because(whyForgot)
		if fenced {
			// The DEL takes the queue too: the waiters in line lose their
			// places, and later joiners may be served first.
			p.Set(contract.WantMay, contract.PropFairness, contract.PropLiveness, contract.PropPromptness)
			p.Because("fencing refuses the old holder's late ops; the queue is deleted with the lock, so waiters lose their places (fair queue, waiter liveness and hand-off promptness may break)")
		} else {
			p.Set(contract.WantMay, contract.PropResource)
			p.Because("the old holder's unfenced write may overwrite the new holder's")
		}
		if e.LossBound != nil {
			p.Because("its watchdog's next renewal finds the key gone and tells the holder within the lock's bound (loss notice)")
		} else {
			p.Because("it runs no watchdog: the holder is never told")
		}
	case contract.FaultLateDelivery:
		if !fenced {
			// Only a lock that buries the requests its callers gave up on
			// (package lock's cleanup) can refuse one that lands late:
			// here an acquire, a release or a write takes effect after its
			// caller's deadline, when the history says it could not.
			p.Set(contract.WantMay, contract.PropLease, contract.PropResource, contract.PropLiveness, contract.PropClaims)
			p.Because("a request held in transit lands after its sender gave up: an acquire takes the key for nobody, and an unfenced write lands after the next holder's; nothing in the lock can tell it came late (lease, resource, liveness and claims may break)")
		} else {
			// Seen in the simulation (fenced, swarm seeds 1160 and 1405
			// of 2,000 on 2026-11-29): an owner whose lost holds kept its
			// key kept one fence across sections; its write of unknown
			// outcome, held in transit, landed after its later write under
			// that same fence, and the resource took it (a lost update).
			p.Set(contract.WantMay, contract.PropResource)
			p.Because("a holder's own write held in transit may land after its later write under the same fence: a token orders holders, not one holder's writes (resource may break)")
		}
	case contract.FaultPubSubReset:
		if fenced {
			// Found by the simulation (fenced, swarm seed 1546; the counts
			// are in docs/FINDINGS.md): the waiters woken by the drop
			// look at once, and a look that needs a connection more than
			// the client has open dials it in the stall, 250ms; the
			// hand-off given at its place meanwhile (a 100ms lease) runs
			// out, and the waiter, dropped from the line, is served after
			// those behind it, and late. With the stall below the
			// hand-off lease, as predicted. Excused only within a TTL of
			// the window (contract.ExcuseAfter): a waiter deaf to its
			// hand-offs after the fault still shows.
			p.Set(contract.WantMay, contract.PropFairness, contract.PropLiveness, contract.PropPromptness)
			p.Because("the fault holds back for half a TTL every connection a client opens right after a drop, a command's too: a waiter whose look waits on one takes longer than its hand-off lease and loses its place (fair queue and waiter liveness may break, within a TTL of the window), and a waiter whose subscription is being made again hears of no hand-off and picks it up at its own look (hand-off promptness may break)")
		}
	case contract.FaultPartition, contract.FaultReset:
		if fenced && e.Handoff != nil {
			// Found by the simulation (fenced, partition seeds 2 and 12
			// of 25, 2026-12-07): a release just after the window
			// closed, its head granted 39ms and 47ms later. The fault
			// cut the waiters' pub/sub connection; until the notifier's
			// fresh one is confirmed (a backoff from 10ms) they look
			// every half hand-off lease, and pick a hand-off up at
			// their look, not at its message.
			p.Set(contract.WantMay, contract.PropPromptness)
			p.Because("the fault cuts the waiters' pub/sub connection: until a fresh one is confirmed they pick a hand-off up at their own look, every half hand-off lease (hand-off promptness may break, near the window)")
		}
	case contract.FaultOOM:
		if fenced {
			// Found by the simulation (fenced, --faults oom, seeds 12,
			// 16, 44, 74 and 99 of 100, 2026-12-07): a wait whose pickup
			// or leave Redis refused says ErrNotAcquired and leaves the
			// line in the background (package lock's design: its
			// cleanup resends the leave with a backoff up to a second);
			// its place stays in line meanwhile, and each hand-off given
			// to it holds the line up for a hand-off lease. Waiters
			// were served 0.4-0.9s after the key was surely free, within
			// 1.2s of the window's end.
			p.Set(contract.WantMay, contract.PropLiveness)
			p.Because("a wait refused in line leaves its place until the lock's background cleanup lands: each hand-off given to that place holds the line up for a hand-off lease (waiter liveness may break, near the window)")
		}
	case contract.FaultPauseServer:
		if !fenced {
			// Seen once (lua, the 1-seed default run of 2026-11-24): an
			// acquire the master executed just before it froze got its reply
			// 750ms later, past its 500ms TTL; another client took the key
			// at the thaw, and the first one's unfenced write then lost the
			// second one's update. G1 held (the first lease had expired).
			p.Set(contract.WantAny, contract.PropResource)
			p.Because("a grant the frozen master executed just before the freeze reaches its client after the lease expired; that client's unfenced write may then overwrite the next holder's (timing: the grant must land just before the freeze)")
		}
	}
	if fault == contract.FaultShardOutage {
		// Found by the cluster matrix (watchdog × shard-outage, 167
		// acquires refused while the shard was down): nobody serves the
		// key's slot until the shard is back and agrees with the others.
		p.Set(contract.WantMay, contract.PropLiveness)
		p.Because("the shard serves nobody until it is back and agrees with the others: an acquire of a key surely free is refused meanwhile (liveness may break)")
	}
	return p
}

// whyShardDown says why liveness may break under a cluster's failover.
const whyShardDown = "on a Redis Cluster the failed master's shard serves nobody until its replica is elected (the node timeout and a vote): an acquire of a key surely free is refused meanwhile (liveness may break), where Sentinel's failed master keeps serving its clients"

// PredictOn is lock e's prediction under fault on topology: Predict's,
// and on a Redis Cluster, under failover and failover-skew, liveness may
// break besides. A cluster's failover kills the shard's master (a
// cluster you bring is failed over by CLUSTER FAILOVER, which stops the
// master's clients while its replica catches up), and nobody serves its
// slots until the replica is promoted; Sentinel's cuts the master off
// from its replicas while it goes on serving its clients. Found by the
// cluster matrix on Docker (set-del and watchdog × failover: acquires
// refused while the key was surely free), once a killed node's port
// refused from the kill on (env.Crash): before, the unknown outcomes of
// dials a dead node's proxy accepted and dropped had excused them.
func PredictOn(e locker.Entry, fault, topology string) locker.Prediction {
	exp := Predict(e, fault)
	if topology == contract.TopologyCluster && (fault == contract.FaultFailover || fault == contract.FaultFailoverSkew) &&
		exp.Wants != nil && exp.Want(contract.PropLiveness) == contract.WantOK {
		exp.Wants = maps.Clone(exp.Wants) // the lock's own may be shared
		exp.Set(contract.WantMay, contract.PropLiveness)
		exp.Because(whyShardDown)
	}
	return exp
}

// Predict is lock e's prediction under fault: its profile's, amended by
// the entry's own (locker.Entry.Predict); the matrix and the simulation
// both judge by it.
func Predict(e locker.Entry, fault string) locker.Prediction {
	exp := profile(e, fault)
	if e.Predict != nil {
		exp = e.Predict(fault, exp)
	}
	if fault == contract.FaultPauseClient && exp.Want(contract.PropClaims) == contract.WantViolated && !strings.Contains(exp.Why, whyCheckedWrite) {
		// The workload's mechanism at this fault, whoever predicted it.
		exp.Because(whyCheckedWrite)
	}
	return exp
}

// PointOf is where fault strikes lock e in the matrix and the simulation (locker.Entry
// FaultPoint), else the profile's: for pause-client, right after the
// holder's lease check for a lock without fencing (a pause "while holding"
// can land after the write on a loaded machine), the fault's own moment for
// a fenced lock (its fenced ops are scripts like its lock ops, and its late
// write is refused wherever the pause lands).
func PointOf(e locker.Entry, fault string) contract.Point {
	if e.FaultPoint != nil {
		if p := e.FaultPoint(fault); !p.IsZero() {
			return p
		}
	}
	fenced := claimsFencing(e)
	if fault == contract.FaultPauseClient && !fenced {
		return contract.Point{After: contract.LeaseCheckPoint}
	}
	return contract.Point{}
}

// Decisive is the cheapest scenario in which a lock's known weakness shows:
// the fault, the property that breaks, and the fault point.
type Decisive struct {
	Lock, Fault, Property string
	// Point is where the fault strikes (the zero Point: the fault's default
	// timing, while the victim holds its lock).
	Point contract.Point
}

// DecisiveOf returns the decisive scenario of each lock of reg that states
// one (locker.Entry.Decisive), in registry order.
func DecisiveOf(reg *locker.Registry) []Decisive {
	var ds []Decisive
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		if e.Decisive == nil {
			continue
		}
		ds = append(ds, Decisive{Lock: e.Name, Fault: e.Decisive.Fault, Property: e.Decisive.Property, Point: PointOf(e, e.Decisive.Fault)})
	}
	return ds
}

// PromisedRate is the detection rate a prediction of WantViolated
// promises: the break shows in at least 9 seeds of 10 (docs/DESIGN.md,
// "Detection rates"; the decisive scenarios measure 19 or 20 of 20).
const PromisedRate = 0.9

// regressionAlpha is how unlikely a cell's found count must be, were the
// promised rate true, to be called a regression: P(found or fewer | seeds,
// PromisedRate) below 1 in 1000. A lower bar would turn a nightly of ~40
// must-break cells red on chance alone every few nights; with one seed no
// count can be a regression (a miss there is a mismatch, as before).
const regressionAlpha = 0.001

// Promise records, on a cell, the rate each must-break property promises
// and flags the found rates too far below it to be chance.
func Promise(c *contract.Cell, exp locker.Prediction) {
	for _, p := range contract.PropertyIDs() {
		if exp.Want(p) != contract.WantViolated {
			continue
		}
		if c.Promised == nil {
			c.Promised = map[string]float64{}
		}
		c.Promised[p] = PromisedRate
		found := c.Found[p]
		if c.Seeds == 0 || found == 0 {
			continue // no seed decided, or a plain miss: a mismatch of its rows
		}
		if tail := binomialCDF(found, c.Seeds, PromisedRate); tail < regressionAlpha {
			c.Regressions = append(c.Regressions, fmt.Sprintf(
				"%s violated on %d of %d seeds, below the promised %.0f%% (P = %.2g by chance): the fault or the harness regressed",
				p, found, c.Seeds, 100*PromisedRate, tail))
		}
	}
}

// binomialCDF is P(X <= k) for X ~ Binomial(n, p).
func binomialCDF(k, n int, p float64) float64 {
	sum, coef := 0.0, 1.0 // coef = C(n, i)
	for i := 0; i <= k && i <= n; i++ {
		if i > 0 {
			coef = coef * float64(n-i+1) / float64(i)
		}
		sum += coef * math.Pow(p, float64(i)) * math.Pow(1-p, float64(n-i))
	}
	return min(sum, 1)
}
