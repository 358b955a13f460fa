package sim_test

import (
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// TestSharedSpecimensCaught: each broken read-write lock and semaphore of
// the zoo is caught by the property its flaw breaks, under the fault that
// shows it, on most of ten simulated seeds; the shipped read-write lock
// and semaphore keep every property on the same seeds, their fair queue
// judged on most of them.
func TestSharedSpecimensCaught(t *testing.T) {
	reg := zoo.Builtin()
	for _, c := range []struct {
		lock, fault, prop string
		atLeast           int // of 10 seeds
	}{
		{zoo.RWUnlockDeletesName, contract.FaultNone, contract.PropLease, 9},
		{zoo.RWShortReentryName, contract.FaultNone, contract.PropLease, 5},
		{zoo.SemGetSetName, contract.FaultNone, contract.PropLease, 2},
		{zoo.SemNoExpiryName, contract.FaultCrashClient, contract.PropLiveness, 5},
		{zoo.FencedRWName, contract.FaultNone, "", 0},
		{zoo.FencedSemName, contract.FaultCrashClient, "", 0},
	} {
		t.Run(c.lock+"/"+c.fault, func(t *testing.T) {
			var faults []sim.Fault
			if c.fault != contract.FaultNone {
				f, ok := sim.Lookup(c.fault)
				if !ok {
					t.Fatalf("%s is not simulated", c.fault)
				}
				faults = []sim.Fault{f}
			}
			caught, fair := 0, 0
			for seed := uint64(1); seed <= 10; seed++ {
				r := sim.Run(t, sim.Scenario{Locks: reg, Lock: c.lock, Seed: seed, Faults: faults})
				for _, p := range r.Check.Props {
					if c.prop == "" && p.Verdict == contract.Violated {
						t.Errorf("seed %d: %s violated: %s", seed, p.ID, p.Explanation)
					}
					if p.ID == contract.PropFairness && p.Verdict == contract.OK {
						fair++
					}
					if p.ID == c.prop && p.Verdict == contract.Violated {
						caught++
					}
				}
			}
			if caught < c.atLeast {
				t.Errorf("%s violated on %d of 10 seeds, want at least %d: the harness missed what %s is known to break", c.prop, caught, c.atLeast, c.lock)
			}
			// The shipped kinds declare a fair queue (one FIFO line
			// across modes): their waits are judged, not passed over.
			if c.prop == "" && fair < 5 {
				t.Errorf("fairness decided (ok) on %d of 10 seeds, want at least 5: the fair queue of %s goes unjudged", fair, c.lock)
			}
			t.Logf("%s: %s violated on %d of 10 seeds; fairness ok on %d", c.lock, c.prop, caught, fair)
		})
	}
}
