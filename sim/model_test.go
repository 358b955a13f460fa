package sim_test

import (
	"errors"
	"testing"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/tlatest"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/tla/trace"
	"github.com/lockproof/lockproof/zoo"
)

// TestSimHistoriesFollowTheModel: the fenced lock's simulated histories,
// without faults and under each fault that keeps one master, with a workload that asks the lock who holds the key
// (inspect, holds) as often as it can, follow the TLA+ trace model
// (tla/TraceFencedLock.tla), what the lock said of its holders included,
// and the model and the checker agree on each (tla.Result.Disagreement).
// A history the model refuses names its line. It needs TLC
// ($TLA2TOOLS_JAR) and is skipped without it.
func TestSimHistoriesFollowTheModel(t *testing.T) {
	v := tlatest.Need(t)
	mix := workload.DefaultMix()
	mix.Inspect, mix.Owner, mix.Reenter = 1, 0.5, 0.6
	// The faults that keep one master: the model judges their runs
	// against one state throughout (a failover's runs get two masters'
	// latitude, and a skewed replica's keys outlive their TTL, which the
	// model bounds only within its settle time).
	faults := []string{"", contract.FaultReset, contract.FaultLateDelivery, contract.FaultPauseClient,
		contract.FaultCrashClient, contract.FaultLatency, contract.FaultPauseServer, contract.FaultPubSubReset}
	said, seeds := 0, len(faults)
	if testing.Short() {
		seeds = 4
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		var fs []sim.Fault
		for _, f := range sim.Catalogue() {
			if f.Name == faults[seed-1] {
				fs = append(fs, f)
			}
		}
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed,
			Faults: fs, Workload: workload.Config{Mix: &mix}})
		n := 0
		for _, o := range r.Ops {
			if (o.Kind == history.Inspect || o.Kind == history.Holds) && o.Result == history.OK {
				n++
			}
		}
		said += n
		res, err := v.Validate(t.Context(), r.Ops)
		switch {
		case errors.Is(err, trace.ErrNotFenced):
			t.Fatalf("seed %d: %v", seed, err)
		case err != nil:
			t.Fatalf("seed %d: trace validation: %v", seed, err)
		}
		lease, resource := r.Check.Of(contract.PropLease).Verdict, r.Check.Of(contract.PropResource).Verdict
		if err := res.Disagreement(lease, resource); err != nil {
			t.Errorf("seed %d: %v (line %d)", seed, err, res.Line)
		}
		if !res.Accepted {
			t.Errorf("seed %d (%s): the model refuses line %d (said %v), the checker finds lease %s, resource %s",
				seed, faults[seed-1], res.Line, res.Said, lease, resource)
		}
		t.Logf("seed %d (%s): %d ops, %d answers of the lock; accepted %v (line %d), %d states in %v; lease %s",
			seed, faults[seed-1], len(r.Ops), n, res.Accepted, res.Line, res.States, res.Elapsed.Round(1e6), lease)
	}
	if said < 20*seeds {
		t.Fatalf("only %d ok inspect and holds ops in %d seeds: the test judges too few answers", said, seeds)
	}
}
