package runner

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/contract"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// Want is what the guarantees predict for one property of one scenario
// (package contract spells the predictions).
type Want = contract.Want

// The predictions (contract.WantOK, ...).
const (
	WantOK       = contract.WantOK
	WantViolated = contract.WantViolated
	WantMay      = contract.WantMay
	WantAny      = contract.WantAny
)

// Expectation is the prediction for one lock under one fault (a lock's own
// amendments come from its locker.Entry Predict).
type Expectation = locker.Prediction

// noPrediction is an expectation of WantAny for every property.
func noPrediction(why string) Expectation { return Expectation{Why: why} }

// allHold predicts that every property of the contract holds: the
// guarantees' prediction, which the table then amends per lock and fault.
func allHold() Expectation {
	var e Expectation
	e.Set(WantOK, contract.PropertyIDs()...)
	return e
}

// Locks are the built-in lock names (zoo.Builtin), in matrix order.
func Locks() []string { return zoo.Builtin().Names() }

// Faults are the faults of the default matrix (chaos.Fault Matrix), the
// columns of the summary.json contract, in matrix order.
func Faults() []string {
	var names []string
	for _, f := range chaos.Catalogue() {
		if f.Matrix {
			names = append(names, f.Name)
		}
	}
	return names
}

// AvailableFaults splits the default matrix's faults (Faults) into those
// that can run on an environment of kind k and the reasons the others
// cannot (chaos.Fault Available).
func AvailableFaults(k env.Kind) (faults []string, left []error) {
	for _, name := range Faults() {
		f, _ := chaos.Lookup(name)
		if err := f.Available(k); err != nil {
			left = append(left, err)
			continue
		}
		faults = append(faults, name)
	}
	return faults, left
}

// unfencedOwnerChecked are the locks with an owner check on release and no
// fencing token: they keep G1 on one master, their data does not survive a pause.
var unfencedOwnerChecked = map[string]bool{zoo.LuaName: true, zoo.WatchdogName: true, zoo.ReentrantName: true, zoo.RedlockName: true, zoo.LocalRedisName: true}

// checkThenDel are the locks whose release checks the owner (GET) and
// deletes (DEL, UNLINK) in two commands: a delayed delete can remove the
// next holder's lock.
var checkThenDel = map[string]bool{zoo.GetDelName: true, zoo.LocalRedisName: true}

// fencedLocks are the built-in locks with fencing tokens; fenced-v1 is the
// shipped lock before its review's fixes (zoo/internal/fencedv1).
var fencedLocks = map[string]bool{zoo.FencedName: true, zoo.FencedV1Name: true, zoo.FencedV2Name: true}

// reportsLoss reports whether the built-in lock promises a loss notice
// (locker.Entry.LossBound: it renews in the background and says so).
func reportsLoss(lock string) bool {
	e, _ := zoo.Builtin().Lookup(lock)
	return e.LossBound != nil
}

// delNoOwner are the locks whose release may delete another client's lock.
var delNoOwner = map[string]bool{zoo.SetNXExpireName: true, zoo.SetDelName: true, zoo.GetDelName: true}

// blindRelease are the locks whose release deletes the key without asking
// whose lock it is (getset asks only its own clock): a release retried
// after an unknown outcome (the workload cancels some calls mid-flight, as
// a caller's deadline does) deletes the next holder's lock when the first
// attempt had worked. No fault is needed: found by the 10-seed nightly
// (set-del × clock-skew seed 8, getset × pause-client seed 10, both before
// or regardless of the fault).
var blindRelease = map[string]bool{zoo.SetNXName: true, zoo.SetNXExpireName: true, zoo.SetDelName: true, zoo.GetSetName: true}

// Expected returns what the guarantees of DESIGN.md and the literature
// cited in package specimen predict for lock under fault. The table:
//
//   - none: every property holds for every lock, but that setnx,
//     setnx-expire, set-del and getset may break lease and resource under
//     every fault, none included: their release deletes the key without
//     asking whose lock it is, and a release retried after an unknown
//     outcome (the workload cancels some calls) deletes the next holder's.
//   - pause-client (a holder frozen 3×TTL between its read and its write):
//     set-del and setnx-expire wake and DEL the next holder's lock (lease
//     violated) after a stale write (resource violated); get-del is paused
//     right after its GET (After "get") and its DEL deletes the
//     next holder's lock (lease violated; the two holders that follow may
//     then overwrite each other: resource may); lua, watchdog, reentrant and
//     redlock keep G1 (owner-checked release) but their unfenced late write
//     is accepted (resource violated: stale holder, lost update); getset's
//     release checks its own clock (G1 holds), its late write is stale
//     (resource violated); setnx ignores the TTL asked for, so nobody takes
//     the lock over, but the history asks for a TTL and the woken holder's
//     release comes after it (lease violated, rule not-owner); fenced keeps
//     everything and refuses the late write (rejected > 0).
//   - crash-client: setnx's lock is never freed (liveness violated);
//     setnx-expire is crashed after a SETNX that succeeded, right before its
//     PEXPIRE (Before "pexpire"), leaving a key without TTL (liveness violated); every lock
//     with a TTL frees the lock (ok).
//   - clock-skew (one client's clock 4×TTL ahead): getset takes an
//     unexpired lock over (lease violated; the overlapping holders' writes
//     then usually conflict: resource may); no other lock reads client clocks.
//   - failover (master isolated after a replication lag): every lock on the
//     Sentinel-managed master may lose a lease (lease may) and unfenced data
//     then may be overwritten (resource may); fenced keeps resource safety;
//     setnx's keys without TTL may be stranded on the new master (liveness
//     may); redlock does not use the Sentinel master at all (ok).
//   - latency (20±10ms on half the clients), partition (half the clients
//     blackholed 3×TTL, ops time out after 1s), pause-server (master frozen
//     1.5×TTL): G1 and G2 hold for owner-checked locks; for the locks whose
//     release is a DEL without owner check (setnx, setnx-expire, set-del,
//     get-del) and getset, a DEL delayed past the lease's expiry can delete the next
//     holder's lock: the literature says it can happen, whether a run lines
//     it up depends on timing this harness does not schedule (any).
//
// Unknown names get WantAny everywhere.
func Expected(lock, fault string) (e Expectation) {
	if !slices.Contains(Locks(), lock) {
		return noPrediction("unknown lock: no prediction")
	}
	e = allHold()
	const blind = "a release retried after an unknown outcome deletes whatever lock holds the key, the next holder's included; the holders then overlap and their writes may conflict"
	if blindRelease[lock] {
		e.Set(WantMay, contract.PropLease, contract.PropResource, contract.PropClaims)
		defer func() {
			if !strings.Contains(e.Why, blind) {
				e.Why = joinWhy(e.Why, blind)
			}
		}()
	}
	if lock == zoo.FencedV1Name {
		// The workload's nested holds with a fifth of the TTL shorten the
		// old lock's lease (its PEXPIRE takes the nested TTL): another
		// client takes the key while the outer lease is valid, when it
		// tries in that window: 9 runs in 10 without a fault (3s runs).
		// One run may miss it; a few seeds find it
		// (TestHarnessCatchesTheOldLock).
		e.Set(WantMay, contract.PropLease, contract.PropClaims)
		e.Why = "a nested hold with a shorter TTL shortens the old lock's lease (fixed in package lock), while the outer hold still claims its validity"
		if fault == contract.FaultCrashClient {
			// The old lock hands a waiter that died in line the whole TTL,
			// and keeps a dead head of the queue first until its place
			// expires: a live waiter behind it is served late (waiter
			// liveness), when the crash lines it up.
			e.Set(WantMay, contract.PropLiveness)
			e.Why += "; a waiter that died in line holds the old lock up for a TTL (waiter liveness)"
		}
	}
	if lock == zoo.FencedV1Name || lock == zoo.FencedV2Name {
		// The old locks' waiters drop out of line under churn (a hand-off
		// to another waiter put off the attempt that refreshes their
		// place): later joiners are served first.
		e.Set(WantMay, contract.PropFairness)
		e.Why = joinWhy(e.Why, "under churn a waiter drops out of line and later joiners are served first (fair queue)")
	}
	if lock == zoo.FencedV1Name || lock == zoo.FencedV2Name {
		// The workload's owned acquires (workload.Mix.Owner): an owner
		// handed the lock in line counts it twice, and its one release
		// leaves the lock held for its TTL (the next acquire as that
		// owner then gets the same token again, and waiters wait);
		// and a lost lease's release frees the owner's newer hold.
		e.Set(WantMay, contract.PropLease, contract.PropLiveness)
		e.Why = joinWhy(e.Why, "an owner handed the lock in line counts it twice: its one release leaves the lock held (lease: the owner's next acquire gets the same token; waiter liveness), and a lost lease's release frees the owner's newer hold (lease: not-owner)")
	}
	if lock == zoo.FencedV2Name {
		// Both need a rushed release (the workload's rush-release share)
		// or a release landing on a watchdog renewal: most runs show one.
		e.Set(WantMay, contract.PropClaims, contract.PropNotice)
		e.Why = joinWhy(e.Why, "a release of unknown outcome that did hand the lock on leaves the old lock claiming the lease (claims); a release racing its watchdog reports the released lease lost (loss notice)")
	}
	switch fault {
	case contract.FaultNone, contract.FaultCrowd:
	case contract.FaultPubSubReset:
		// Only the fenced locks wait on pub/sub; the others poll and do
		// not notice. The old locks' notifier takes a dropped subscription
		// whose re-SUBSCRIBE was refused for a live one: a waiter sleeps
		// through its hand-off until its next look (a third of the queue
		// TTL, or the holder's TTL), its provisional lease runs out, and
		// the waiters behind it are served first.
		switch lock {
		case zoo.FencedV2Name:
			// 4 of 4 seeds showed the fair queue broken, 3 of 4 a waiter
			// served late (2026-11-25).
			e.Set(WantViolated, contract.PropFairness)
			e.Set(WantMay, contract.PropLiveness)
			e.Why = joinWhy(e.Why, "the old lock's waiters take a dead subscription for a live one and sleep through their hand-offs: later joiners are served first (fair queue), and the waiter late (waiter liveness)")
		case zoo.FencedV1Name:
			e.Set(WantMay, contract.PropLiveness)
			e.Why = joinWhy(e.Why, "the old lock's waiters take a dead subscription for a live one and may sleep through their hand-offs (waiter liveness)")
		}
	case contract.FaultPauseClient:
		// Every holder checks its lease right before its write; the pause
		// strikes after the check (the workload's LeaseCheckPoint, or while
		// holding for fenced, whose check comes before the gate): the
		// woken holder acts on a check another client's grant made false.
		if lock == zoo.GetDelName || lock == zoo.SetNXName {
			e.Set(WantMay, contract.PropClaims)
		} else {
			e.Set(WantViolated, contract.PropClaims)
		}
		defer func() {
			const why = "the woken holder writes on a check that found its lease valid before the pause (claims: checked-write)"
			if e.Want(contract.PropClaims) == WantViolated {
				e.Why = joinWhy(e.Why, why)
			}
		}()
		switch {
		case fencedLocks[lock]:
			e.Rejected = true
			e.Why = joinWhy(e.Why, "fencing refuses the paused holder's late ops (rejected > 0)")
		case lock == zoo.SetNXName:
			e.Set(WantViolated, contract.PropLease)
			e.Why = "setnx ignores the TTL asked for: nobody takes the paused holder's lock over, but its release after the asked TTL is, against the contract, a release of an expired lease (rule not-owner)"
		case lock == zoo.GetDelName:
			e.Set(WantViolated, contract.PropLease)
			e.Set(WantMay, contract.PropResource)
			e.Why = "paused between the GET and the DEL of its release, the holder wakes and deletes the next holder's lock; a third client then takes it while the second still works: their writes may conflict"
		case delNoOwner[lock]:
			e.Set(WantViolated, contract.PropLease, contract.PropResource)
			e.Why = "the woken holder writes stale data and its DEL deletes the next holder's lock"
		case lock == zoo.GetSetName:
			e.Set(WantViolated, contract.PropResource)
			e.Why = "the woken holder's unfenced write is stale; its release checks its own clock, so the pause alone does not break G1"
		case unfencedOwnerChecked[lock]:
			e.Set(WantViolated, contract.PropResource)
			e.Why = "G1 holds (owner-checked release) but the woken holder's unfenced write is stale"
		}
	case contract.FaultCrashClient:
		if lock == zoo.SetNXName || lock == zoo.SetNXExpireName {
			e.Set(WantViolated, contract.PropLiveness)
			e.Why = "the crashed holder's key has no TTL: nobody frees it"
		}
	case contract.FaultClockSkew:
		if lock == zoo.GetSetName {
			e.Set(WantViolated, contract.PropLease)
			e.Set(WantMay, contract.PropResource, contract.PropClaims)
			e.Why = "the skewed client sees an unexpired lock as expired and takes it over; the two holders' writes may conflict"
		}
	case contract.FaultFailover, contract.FaultFailoverSkew:
		if fault == contract.FaultFailoverSkew && fencedLocks[lock] {
			// Redis replicates expiries as absolute times (PX as PXAT),
			// and the queue's deadlines are the old master's clock
			// readings, so on a promoted node whose clock is behind, the
			// leases and queue places written before the failover last up
			// to the skew longer: a waiter may be served later than the
			// lock's waiter bound once the fault window has closed.
			defer func() {
				e.Set(WantMay, contract.PropLiveness)
				e.Why = joinWhy(e.Why, "the promoted replica's clock is behind: its clock-based fences fall below the old master's, so the resource refuses new holders until that clock catches up (the stall the fault evidence measures; data stays safe); expiries and queue deadlines written by the old master's clock last up to the skew longer there, so a waiter may be served later than the lock promises (waiter liveness may break)")
			}()
		}
		switch lock {
		case zoo.RedlockName:
			e.Why = "redlock's masters are independent of the failed-over one"
		case zoo.FencedName, zoo.FencedV1Name, zoo.FencedV2Name:
			e.Set(WantMay, contract.PropLease, contract.PropClaims, contract.PropFairness)
			e.Why = joinWhy(e.Why, "a lease in the replication gap is lost (G1 may break, and its holder's claim with it), and so are places in line (later joiners may be served first); fencing keeps the data safe")
		case zoo.SetNXName:
			e.Set(WantMay, contract.PropLease, contract.PropResource, contract.PropLiveness, contract.PropClaims)
			e.Why = "leases in the replication gap are lost; a key without TTL may be stranded on the new master"
		default:
			e.Set(WantMay, contract.PropLease, contract.PropResource, contract.PropClaims)
			e.Why = "a lease in the replication gap is lost (G1 may break, and its holder's claim with it) and unfenced data may then be overwritten"
		}
	case contract.FaultKeyLoss, contract.FaultRestart, contract.FaultForceUnlock:
		if fault == contract.FaultRestart && lock == zoo.RedlockName {
			// One master of three forgets the lock; the two others still
			// hold it, so nobody gets a majority until it expires.
			e.Why = "one of redlock's three masters forgets the lock: the other two keep it, so no other client gets a majority (G1 holds)"
			break
		}
		// Redis forgot the holder's lock: the next client takes the key
		// while the holder works on, believing it holds. (A restart
		// also cuts every connection for a moment.)
		e.Set(WantMay, contract.PropLease, contract.PropClaims)
		e.Why = joinWhy(e.Why, "Redis forgot the holder's lock: another client may take the key while the holder works on (G1 may break, and the holder's claim and its check before writing with it)")
		if fencedLocks[lock] {
			// The DEL takes the queue too: the waiters in line lose their
			// places, and later joiners may be served first.
			e.Set(WantMay, contract.PropFairness, contract.PropLiveness)
			e.Why = joinWhy(e.Why, "fencing refuses the old holder's late ops; the queue is deleted with the lock, so waiters lose their places (fair queue and waiter liveness may break)")
		} else {
			e.Set(WantMay, contract.PropResource)
			e.Why = joinWhy(e.Why, "the old holder's unfenced write may overwrite the new holder's")
		}
		if reportsLoss(lock) {
			e.Why = joinWhy(e.Why, "its watchdog's next renewal finds the key gone and tells the holder within the lock's bound (loss notice)")
		} else {
			e.Why = joinWhy(e.Why, "it runs no watchdog: the holder is never told")
		}
	case contract.FaultLatency, contract.FaultPartition, contract.FaultPauseServer, contract.FaultReset:
		if delNoOwner[lock] || checkThenDel[lock] || lock == zoo.GetSetName || lock == zoo.SetNXName {
			e.Set(WantAny, contract.PropLease, contract.PropResource, contract.PropClaims)
			e.Why = "a release delayed past the lease's expiry may delete the next holder's lock; whether a run lines it up depends on timing"
		} else if fault == contract.FaultPauseServer && unfencedOwnerChecked[lock] && lock != zoo.RedlockName {
			// Seen once (lua, the 1-seed default run of 2026-11-24): an
			// acquire the master executed just before it froze got its reply
			// 750ms later, past its 500ms TTL; another client took the key
			// at the thaw, and the first one's unfenced write then lost the
			// second one's update. G1 held (the first lease had expired).
			e.Set(WantAny, contract.PropResource)
			e.Why = joinWhy(e.Why, "a grant the frozen master executed just before the freeze reaches its client after the lease expired; that client's unfenced write may then overwrite the next holder's (timing: the grant must land just before the freeze)")
		}
	default:
		return noPrediction("fault outside the contract: no prediction")
	}
	return e
}

// tableLocks are the locks the expectation table (Expected) has rows for.
// Any other lock, built-in or not, gets the row of the profile it claims.
var tableLocks = map[string]bool{
	zoo.SetNXName: true, zoo.SetNXExpireName: true, zoo.SetDelName: true, zoo.GetDelName: true, zoo.GetSetName: true,
	zoo.LuaName: true, zoo.WatchdogName: true, zoo.ReentrantName: true, zoo.RedlockName: true, zoo.LocalRedisName: true,
	zoo.FencedName: true, zoo.FencedV1Name: true, zoo.FencedV2Name: true,
}

// expectedOf is the prediction for lock of reg under fault: the table's
// row for a lock it knows (tableLocks), else the row of the profile the
// lock claims (locker.Entry.Profile): ProfileFenced the fenced lock's,
// ProfileLease the lua lock's (owner-checked, unfenced), ProfileNone no
// prediction; then the lock's own amendments (locker.Entry.Predict). A
// nil reg is zoo.Builtin().
func expectedOf(reg *locker.Registry, lock, fault string) Expectation {
	if reg == nil {
		reg = zoo.Builtin()
	}
	e, ok := reg.Lookup(lock)
	if !ok {
		return Expected(lock, fault)
	}
	var exp Expectation
	if tableLocks[lock] {
		exp = Expected(lock, fault)
	} else {
		var like string
		switch e.Profile {
		case locker.ProfileFenced, "":
			like = zoo.FencedName
		case locker.ProfileLease:
			like = zoo.LuaName
		}
		if like == "" {
			exp = noPrediction("the lock claims nothing (locker.ProfileNone): no prediction")
		} else {
			exp = Expected(like, fault)
			if exp.Why != "" {
				exp.Why = fmt.Sprintf("as for %s (locker.Profile %q): %s", like, e.Profile, exp.Why)
			}
		}
	}
	if e.Predict != nil {
		exp = e.Predict(fault, exp)
	}
	return exp
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Decisive is the cheapest scenario in which a lock's known weakness shows:
// the fault, the property that breaks, and the fault point.
type Decisive struct {
	Lock, Fault, Property string
	// Point is where the fault strikes (the zero Point: the fault's default
	// timing, while the victim holds its lock).
	Point gate.Point
}

// DecisiveScenarios returns, per lock in Locks order, its decisive
// scenario; the fenced lock's is its resource safety under pause-client
// (with rejected > 0), which must hold, not break.
func DecisiveScenarios() []Decisive {
	ds := []Decisive{
		{Lock: zoo.SetNXName, Fault: contract.FaultCrashClient, Property: contract.PropLiveness},
		{Lock: zoo.SetNXExpireName, Fault: contract.FaultCrashClient, Property: contract.PropLiveness},
		{Lock: zoo.SetDelName, Fault: contract.FaultPauseClient, Property: contract.PropLease},
		{Lock: zoo.GetDelName, Fault: contract.FaultPauseClient, Property: contract.PropLease},
		{Lock: zoo.GetSetName, Fault: contract.FaultClockSkew, Property: contract.PropLease},
		{Lock: zoo.LuaName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
		{Lock: zoo.WatchdogName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
		{Lock: zoo.ReentrantName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
		{Lock: zoo.RedlockName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
		{Lock: zoo.LocalRedisName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
		{Lock: zoo.FencedName, Fault: contract.FaultPauseClient, Property: contract.PropResource},
	}
	for i := range ds {
		ds[i].Point = faultPoint(ds[i].Lock, ds[i].Fault)
	}
	return ds
}

// leaseCheck is the workload's point between a holder's lease check and
// its write (workload.LeaseCheckPoint): a pause right there is the GC
// pause of the literature, and the woken holder writes on a stale check.
const leaseCheck = workload.LeaseCheckPoint

// faultPoint returns the fault point the matrix uses for lock under fault
// (the zero Point for the fault's default: while the victim holds its lock).
//
//   - pause-client: get-del right after the GET of its release (between GET
//     and DEL, where the literature's bug lies); the other locks without
//     fencing right after their lease check, before their write (a pause
//     "while holding" can land after the write on a loaded machine);
//     fenced keeps the default (its fenced read is a script like its lock
//     ops, and its late write is refused wherever the pause lands).
//   - crash-client: setnx-expire right before its PEXPIRE, which it sends
//     only after a SETNX that succeeded: the crash between SETNX and EXPIRE
//     that leaves a key without TTL (crashing after the SETNX's reply would
//     also strike after SETNXs that failed).
func faultPoint(lock, fault string) gate.Point {
	switch fault {
	case contract.FaultPauseClient:
		switch {
		case lock == zoo.GetDelName:
			return gate.Point{After: "get"}
		case fencedLocks[lock]:
			return gate.Point{}
		}
		if slices.Contains(Locks(), lock) {
			return gate.Point{After: leaseCheck}
		}
	case contract.FaultCrashClient:
		if lock == zoo.SetNXExpireName {
			return gate.Point{Before: "pexpire"}
		}
	}
	return gate.Point{}
}

// promisedRate is the detection rate a prediction of WantViolated
// promises: the break shows in at least 9 seeds of 10 (docs/DESIGN.md,
// "Detection rates"; the decisive scenarios measure 19 or 20 of 20).
const promisedRate = 0.9

// regressionAlpha is how unlikely a cell's found count must be, were the
// promised rate true, to be called a regression: P(found or fewer | seeds,
// promisedRate) below 1 in 1000. A lower bar would turn a nightly of ~40
// must-break cells red on chance alone every few nights; with one seed no
// count can be a regression (a miss there is a mismatch, as before).
const regressionAlpha = 0.001

// promise records, on a cell, the rate each must-break property promises
// and flags the found rates too far below it to be chance.
func promise(c *Cell, exp Expectation) {
	for _, p := range contract.PropertyIDs() {
		if exp.Want(p) != WantViolated {
			continue
		}
		if c.Promised == nil {
			c.Promised = map[string]float64{}
		}
		c.Promised[p] = promisedRate
		found := c.Found[p]
		if c.Seeds == 0 || found == 0 {
			continue // no seed decided, or a plain miss: a mismatch of its rows
		}
		if tail := binomialCDF(found, c.Seeds, promisedRate); tail < regressionAlpha {
			c.Regressions = append(c.Regressions, fmt.Sprintf(
				"%s violated on %d of %d seeds, below the promised %.0f%% (P = %.2g by chance): the fault or the harness regressed",
				p, found, c.Seeds, 100*promisedRate, tail))
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
