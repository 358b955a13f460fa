package ownlock

import (
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/sim"
)

// TestMyLockInSimulation: your lock in virtual time, nothing installed:
// swarm seeds (each its own mix of simulated faults) keep what its
// profile predicts, and a paused holder's late write gets in, as under
// the real-time pause-client.
func TestMyLockInSimulation(t *testing.T) {
	locks := &locker.Registry{}
	if err := locks.Add(entry()); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		r := sim.Run(t, sim.Scenario{Locks: locks, Lock: "mylock", Seed: seed, Faults: sim.Swarm(seed)})
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("seed %d (%s): %v, unknown %v", seed, sim.Label(sim.Swarm(seed)), r.Mismatches, r.Unknown)
		}
	}
	pause, _ := sim.Lookup(contract.FaultPauseClient)
	r := sim.Run(t, sim.Scenario{Locks: locks, Lock: "mylock", Seed: 1, Faults: []sim.Fault{pause}})
	if v := r.Check.Of(contract.PropResource).Verdict; v != contract.Violated {
		t.Errorf("mylock × simulated pause-client: resource %s, want violated", v)
	}
}
