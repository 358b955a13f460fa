package sim_test

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedInVirtualTime: the shipped lock, its watchdog, queue and
// owners included, runs the default workload for 3s of virtual time per
// seed on in-process nodes, and the checker finds nothing.
func TestFencedInVirtualTime(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		start := time.Now()
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed})
		if r.Check.Verdict != contract.OK {
			for _, p := range r.Check.Props {
				t.Logf("%s: %s %s", p.Property, p.Verdict, p.Explanation)
			}
			t.Fatalf("seed %d: verdict %s, want ok", seed, r.Check.Verdict)
		}
		if r.Check.Counts.LeaseOps < 100 {
			t.Fatalf("seed %d: only %d lease ops in 3s of virtual time", seed, r.Check.Counts.LeaseOps)
		}
		t.Logf("seed %d: %d ops in %v", seed, r.Check.Counts.Ops, time.Since(start).Round(time.Millisecond))
	}
}

// TestSimCatchesTheOldLocks: the frozen copies' defects that show without
// a fault show in virtual time too: fenced-v1's nested hold with a
// shorter TTL shortens its lease (lease), and fenced-v2's owner handed
// the lock in line counts it twice (lease token-order or waiter liveness).
func TestSimCatchesTheOldLocks(t *testing.T) {
	owners := workload.DefaultMix()
	owners.Owner, owners.Blocking, owners.Cancel = 1, 1, 0
	for _, c := range []struct {
		lock string
		mix  *workload.Mix
	}{{zoo.FencedV1Name, nil}, {zoo.FencedV2Name, &owners}} {
		caught := 0
		for seed := uint64(1); seed <= 5; seed++ {
			r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: c.lock, Seed: seed, Workload: workload.Config{Mix: c.mix}})
			if r.Check.Of(contract.PropLease).Verdict == contract.Violated || r.Check.Of(contract.PropLiveness).Verdict == contract.Violated {
				caught++
			}
		}
		if caught == 0 {
			t.Errorf("%s: caught on none of 5 seeds", c.lock)
		}
		t.Logf("%s: caught on %d of 5 seeds", c.lock, caught)
	}
}

// TestSimPauseClient: a holder frozen between its lease check and its
// write, in virtual time: the unfenced lua lock's late write gets in
// (resource safety breaks, as pause-client shows in real time), and the
// fenced lock's is refused: it keeps what the matrix predicts of it (its
// claims may break: a frozen holder cannot see its lease run out).
func TestSimPauseClient(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 3; seed++ {
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.LuaName, Seed: seed, Faults: faults(t, contract.FaultPauseClient)})
		if r.Check.Counts.Faults != 1 {
			t.Fatalf("lua seed %d: %d fault windows, want 1", seed, r.Check.Counts.Faults)
		}
		if r.Check.Of(contract.PropResource).Verdict == contract.Violated {
			caught++
		}
		f := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed, Faults: faults(t, contract.FaultPauseClient)})
		exp := judge.Named(zoo.Builtin(), zoo.FencedName, contract.FaultPauseClient, contract.TopologySentinel)
		for _, p := range f.Check.Props {
			if !exp.Want(p.ID).Matches(p.Verdict) {
				t.Errorf("fenced seed %d: %s %s under pause-client, predicted %s: %s", seed, p.Property, p.Verdict, exp.Want(p.ID), p.Explanation)
			}
		}
		if f.Check.Counts.Rejected == 0 {
			t.Errorf("fenced seed %d: no write refused: the pause did not bite", seed)
		}
	}
	if caught == 0 {
		t.Error("lua: the paused holder's late write got in on none of 3 seeds")
	}
	t.Logf("lua: resource safety broken on %d of 3 seeds", caught)
}

// faults looks the simulation's faults up by name.
func faults(t *testing.T, names ...string) []sim.Fault {
	t.Helper()
	var fs []sim.Fault
	for _, n := range names {
		f, ok := sim.Lookup(n)
		if !ok {
			t.Fatalf("no simulated fault %q (%v)", n, sim.Names())
		}
		fs = append(fs, f)
	}
	return fs
}

// TestOwnerWaitsTwice: with every section a blocking acquire as the
// client's owner and a second wait of that owner beside it (Mix.Twice),
// the history shows one client's two waits on its key at once, both
// granted on some seed (the second through reentrancy, or after the
// first's release), and the shipped lock stays as predicted.
func TestOwnerWaitsTwice(t *testing.T) {
	mix := workload.DefaultMix()
	mix.Owner, mix.Blocking, mix.Cancel, mix.Twice = 1, 1, 0.2, 1
	both := 0
	for seed := uint64(1); seed <= 3; seed++ {
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed, Workload: workload.Config{Mix: &mix}})
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("seed %d: not as predicted %v, undecided %v", seed, r.Mismatches, r.Unknown)
		}
		var waits []history.Op
		for _, o := range r.Ops {
			if o.Kind == history.Acquire && o.Wait {
				waits = append(waits, o)
			}
		}
		for i, a := range waits {
			for _, b := range waits[i+1:] {
				if a.Client == b.Client && a.Hold != b.Hold && a.Result == history.OK && b.Result == history.OK &&
					a.Call < b.Return && b.Call < a.Return {
					both++
				}
			}
		}
	}
	if both == 0 {
		t.Error("no client's two waits at once were both granted on 3 seeds")
	}
	t.Logf("%d pairs of one client's waits at once, both granted", both)
}
