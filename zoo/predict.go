package zoo

import (
	"strings"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// What the specimens are known to do, beyond what their profile predicts
// (the profiles' table in package judge: ProfileLease for an
// owner-checked lease without fencing, ProfileFenced for the fenced
// locks). Each specimen's entry, beside its code, amends its profile's
// prediction with its own (locker.Entry.Predict), reading what the fault
// does from its traits (contract.FaultTraits); the sentences shared by
// several are here.

// whyBlind: the release deletes the key without asking whose lock it is
// (getset asks only its own clock). A release retried after an unknown
// outcome (the workload cancels some calls mid-flight, as a caller's
// deadline does) deletes the next holder's lock when the first attempt had
// worked. No fault is needed: found by the 10-seed nightly (set-del ×
// clock-skew seed 8, getset × pause-client seed 10, both before or
// regardless of the fault).
const whyBlind = "a release retried after an unknown outcome deletes whatever lock holds the key, the next holder's included; the holders then overlap and their writes may conflict"

// whyDelayedDelete: a release whose delete is not owner-checked in one
// step (DEL without owner check, GET then DEL) can be delayed past the
// lease's expiry (latency, partition, pause-server, reset) and delete the
// next holder's lock: the literature says it can happen, whether a run
// lines it up depends on timing this harness does not schedule (any).
const whyDelayedDelete = "a release delayed past the lease's expiry may delete the next holder's lock; whether a run lines it up depends on timing"

// traitsOf is fault's row in contract's trait table: the specimens'
// predictions read what a fault does there, not its name.
func traitsOf(fault string) contract.FaultTraits {
	t, _ := contract.Traits(fault)
	return t
}

// delayedDelete amends p for a lock whose delete a delay can land on the
// next holder's lock (whyDelayedDelete), under the faults that delay
// (contract.FaultTraits.Delays).
func delayedDelete(fault string, p *locker.Prediction) bool {
	if !traitsOf(fault).Delays {
		return false
	}
	p.Set(contract.WantAny, contract.PropLease, contract.PropResource, contract.PropClaims)
	p.Why = whyDelayedDelete
	return true
}

// blindRelease returns the Predict of a lock whose release deletes without
// asking (whyBlind): under every fault of the contract lease, resource and
// claims may break, then row amends the fault's own prediction; under any
// fault the sentence is said.
func blindRelease(row func(fault string, p *locker.Prediction)) func(string, locker.Prediction) locker.Prediction {
	return func(fault string, p locker.Prediction) locker.Prediction {
		if contract.Predicted(fault) {
			p.Set(contract.WantMay, contract.PropLease, contract.PropResource, contract.PropClaims)
			row(fault, &p)
		}
		if !strings.Contains(p.Why, whyBlind) {
			p.Because(whyBlind)
		}
		return p
	}
}

// mayBreak predicts that props may break where p says they hold: a known
// weakness that shows or not by timing, which a fault's stronger
// prediction (violated, any) keeps overriding.
func mayBreak(p *locker.Prediction, props ...string) {
	for _, prop := range props {
		if p.Want(prop) == contract.WantOK {
			p.Set(contract.WantMay, prop)
		}
	}
}

// pointUnder is a locker.Entry FaultPoint: p under fault, the profile's
// under any other.
func pointUnder(fault string, p contract.Point) func(string) contract.Point {
	return func(f string) contract.Point {
		if f == fault {
			return p
		}
		return contract.Point{}
	}
}

// before puts why ahead of p's reasons: what the lock is known for comes
// first, then what the fault does.
func before(p *locker.Prediction, why string) {
	if p.Why == "" {
		p.Why = why
		return
	}
	p.Why = why + "; " + p.Why
}
