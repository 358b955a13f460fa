package judge

import (
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// claimsFencing reports whether e claims the fenced profile ("" is
// ProfileFenced, the strongest claim, as locker.Registry reads it).
func claimsFencing(e locker.Entry) bool {
	return e.Profile == locker.ProfileFenced || e.Profile == ""
}

// profile is what lock e's profile predicts under fault: every property
// holds, amended by each row of the profiles' table (profileRows) that
// the fault's traits (contract.Traits) and e's profile call for.
func profile(e locker.Entry, fault string) locker.Prediction {
	if !contract.Predicted(fault) {
		return locker.NoPrediction("fault outside the contract: no prediction")
	}
	prof := locker.ProfileLease
	if claimsFencing(e) {
		prof = locker.ProfileFenced
	} else if e.Profile != locker.ProfileLease {
		return locker.NoPrediction("the lock claims nothing (locker.ProfileNone): no prediction")
	}
	traits, _ := contract.Traits(fault)
	p := locker.AllHold()
	for _, r := range profileRows() {
		if r.applies(e, prof, traits) {
			r.apply(&p)
		}
	}
	return p
}

// whyShardDown says why liveness may break under a cluster's failover.
const whyShardDown = "on a Redis Cluster the failed master's shard serves nobody until its replica is elected (the node timeout and a vote): an acquire of a key surely free is refused meanwhile (liveness may break), where Sentinel's failed master keeps serving its clients"

// PredictOn is lock e's prediction under fault on topology: Predict's,
// and on a Redis Cluster, under a fault that leaves the shard without a
// master there (contract.FaultTraits.UnservedOnCluster: failover and
// failover-skew), liveness may break besides. A cluster's failover kills the shard's master (a
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
	if t, _ := contract.Traits(fault); topology == contract.TopologyCluster && t.UnservedOnCluster &&
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
	if t, _ := contract.Traits(fault); t.PausesHolder && exp.Want(contract.PropClaims) == contract.WantViolated && !strings.Contains(exp.Why, whyCheckedWrite) {
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
	if t, _ := contract.Traits(fault); t.PausesHolder && !claimsFencing(e) {
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
