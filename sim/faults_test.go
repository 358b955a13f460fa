package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// TestEachFaultBites: every simulated fault, alone on the shipped lock,
// acts on the run (its evidence counts what it did, or the history shows
// its effect), and the lock keeps what its predictions say under the
// real-time fault of that kind.
func TestEachFaultBites(t *testing.T) {
	number := regexp.MustCompile(`\d+`)
	for _, f := range sim.Catalogue() {
		t.Run(f.Name, func(t *testing.T) {
			bit := 0
			for seed := uint64(1); seed <= 3; seed++ {
				r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed, Faults: []sim.Fault{f}})
				if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
					t.Errorf("seed %d: %v, unknown %v", seed, r.Mismatches, r.Unknown)
					for _, p := range r.Check.Props {
						t.Logf("%s: %s %s", p.ID, p.Verdict, p.Explanation)
					}
				}
				var w *history.Op
				for i := range r.Ops {
					if r.Ops[i].Kind == history.Fault {
						w = &r.Ops[i]
					}
				}
				if w == nil {
					t.Logf("seed %d: the fault found no moment to strike", seed)
					continue
				}
				if contract.FaultKind(w.Name) != f.Name {
					t.Fatalf("seed %d: window %q, want kind %s", seed, w.Name, f.Name)
				}
				if bites(t, f.Name, w, r.Ops, number) {
					bit++
				}
				t.Logf("seed %d: %s", seed, w.Evidence)
			}
			if bit == 0 {
				t.Errorf("%s did nothing on 3 seeds", f.Name)
			}
		})
	}
}

// bites says whether fault window w did what its fault does: its
// evidence counts something it did, or the history shows the effect.
func bites(t *testing.T, kind string, w *history.Op, ops []history.Op, number *regexp.Regexp) bool {
	t.Helper()
	counted := false
	for _, n := range number.FindAllString(w.Evidence, -1) {
		if v, _ := strconv.Atoi(n); v > 0 {
			counted = true
		}
	}
	switch kind {
	case contract.FaultPauseClient:
		return w.Evidence != "" && !bytes.Contains([]byte(w.Evidence), []byte("held 0"))
	case contract.FaultCrashClient:
		victim := strings.Fields(w.Name)[1]
		for _, o := range ops {
			if o.Client == victim && o.Kind != history.Fault && o.Kind != history.Lost && o.Call > w.Return {
				return false // the crashed client went on
			}
		}
		return true
	case contract.FaultPubSubReset:
		// Held-back connections alone do not count: a subscription dropped.
		var dropped int
		_, _ = fmt.Sscanf(w.Evidence[strings.Index(w.Evidence, ": ")+2:], "%d pub/sub connections dropped", &dropped)
		return dropped > 0
	case contract.FaultReset:
		for _, o := range ops {
			if o.Result == history.Unknown && o.Call >= w.Call && o.Call <= w.Return {
				return counted // a lost message left an outcome unknown
			}
		}
		return false
	}
	return counted
}

// TestSeedReplays: a seed gives the same history byte for byte, faults
// and all (swarm mixes of every fault), for the locks without pub/sub or
// a watchdog. The fenced locks replay most seeds, not all (README, "The
// simulation"): not asserted here.
func TestSeedReplays(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector randomizes the order of runnable goroutines: a seed replays only without it")
	}
	for _, lock := range []string{zoo.LuaName, zoo.SetNXName} {
		for seed := uint64(1); seed <= 6; seed++ {
			sc := sim.Scenario{Locks: zoo.Builtin(), Lock: lock, Seed: seed, Faults: sim.Swarm(seed)}
			a, b := encode(t, sim.Run(t, sc).Ops), encode(t, sim.Run(t, sc).Ops)
			if !bytes.Equal(a, b) {
				t.Errorf("%s seed %d (%s): two runs differ (%d and %d bytes)", lock, seed, sim.Label(sc.Faults), len(a), len(b))
			}
		}
	}
}

func encode(t *testing.T, ops []history.Op) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range ops {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "%s\n", b)
	}
	return buf.Bytes()
}

// TestSwarm: over swarm seeds (each its own mix of every simulated
// fault), the shipped lock keeps every prediction and decides every
// property, and the unfenced lua lock shows what its predictions say it
// breaks (a paused holder's late write gets in) on some seed.
func TestSwarm(t *testing.T) {
	const seeds = 30
	first := map[string]uint64{}
	for seed := uint64(1); seed <= seeds; seed++ {
		sc := sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed, Faults: sim.Swarm(seed)}
		r := sim.Run(t, sc)
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("fenced seed %d (%s): %v, unknown %v", seed, sim.Label(sc.Faults), r.Mismatches, r.Unknown)
		}
		sc.Lock = zoo.LuaName
		r = sim.Run(t, sc)
		if len(r.Mismatches) > 0 {
			t.Errorf("lua seed %d (%s): %v", seed, sim.Label(sc.Faults), r.Mismatches)
		}
		for _, p := range r.Check.Props {
			if _, seen := first[p.ID]; !seen && p.Verdict == contract.Violated {
				first[p.ID] = seed
			}
		}
	}
	if _, ok := first[contract.PropResource]; !ok {
		t.Errorf("lua: no stale write got in on %d swarm seeds", seeds)
	}
	t.Logf("lua: first seed to break each property: %v", first)
}

// TestSavedSeedsReplay: the seeds saved in testdata/regressions.jsonl
// (written by `lockproof sim --out`, each lock's first finding of each
// property) give the same history, byte for byte, on this machine as on
// the one that saved them, and still break what they broke.
func TestSavedSeedsReplay(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector randomizes the order of runnable goroutines: a seed replays only without it")
	}
	regs, err := sim.ReadRegressions("testdata/regressions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range regs {
		// The fenced lock's seeds replay byte for byte almost always, not
		// always (goroutines woken at one virtual instant run in an order
		// Go does not fix; docs/SIMULATION.md): like lockproof sim
		// --replay, a seed whose history differs runs again.
		tries := 1
		if reg.Lock == zoo.FencedName {
			// The saved seeds replayed 5 times in 5; an owner's two waits
			// racing for one hand-off make others replay less often
			// (docs/SIMULATION.md).
			tries = 5
		}
		var r sim.Result
		var digest string
		for try := 1; try <= tries; try++ {
			r, _ = replay(t, reg)
			_, digest, err = sim.Encode(r.Ops)
			if err != nil {
				t.Fatal(err)
			}
			if digest == reg.SHA256 {
				break
			}
		}
		if digest != reg.SHA256 {
			t.Errorf("%s seed %d: history %s, saved %s", reg.Lock, reg.Seed, digest[:12], reg.SHA256[:12])
		}
		for _, p := range r.Check.Props {
			if strings.Contains(reg.Why, "violated "+p.ID) && p.Verdict != contract.Violated {
				t.Errorf("%s seed %d: %s %s, saved as %q", reg.Lock, reg.Seed, p.ID, p.Verdict, reg.Why)
			}
		}
	}
}

// TestFencedFindingsFixed: the 20 swarm seeds on which the fenced lock
// was not as predicted (testdata/fenced-swarm-findings.jsonl, each with
// its mix, found on 2026-11-26 before the day's fixes: an undo that could
// not tell the orphan hold of a lost reply from the owner's newer one, an
// owner's hold whose release was lost and which its later acquires kept
// alive, an acquire that ran after its own cleanup, a fresh token's lost
// release whose hold outlived it, and the checker's window of an unknown
// release and of an acquire a fault held) now run as predicted, every
// property decided.
func TestFencedFindingsFixed(t *testing.T) {
	regs, err := sim.ReadRegressions("testdata/fenced-swarm-findings.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 20 {
		t.Fatalf("%d seeds in the file, want the 20 findings", len(regs))
	}
	for _, reg := range regs {
		r, faults := replay(t, reg)
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("%s seed %d (%s): not as predicted %v, undecided %v", reg.Lock, reg.Seed, sim.Label(faults), r.Mismatches, r.Unknown)
		}
	}
}

// replay runs a saved seed of a built-in lock, with its faults.
func replay(t *testing.T, reg sim.Regression) (sim.Result, []sim.Fault) {
	t.Helper()
	mix, err := sim.Mix(reg.Faults)
	if err != nil {
		t.Fatal(err)
	}
	faults := mix(reg.Seed)
	return sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: reg.Lock, Seed: reg.Seed,
		Duration: time.Duration(reg.DurationMs) * time.Millisecond, Faults: faults}), faults
}

// TestDecisiveFindingsInSimulation: every built-in lock's decisive finding
// of the real-time detection list (locker.Entry.Decisive: the fault and
// the property it breaks, or for a correct lock keeps while its fencing
// refuses the late ops) is found in simulation, that fault alone, within
// 5 seeds, Redlock's on its three independent masters.
func TestDecisiveFindingsInSimulation(t *testing.T) {
	reg := zoo.Builtin()
	found := 0
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		if e.Decisive == nil {
			continue
		}
		// A flaw that shows with no fault (a specimen of a shared kind)
		// is decided by a run without one.
		var faults []sim.Fault
		f := sim.Fault{Name: contract.FaultNone}
		if e.Decisive.Fault != contract.FaultNone {
			var ok bool
			if f, ok = sim.Lookup(e.Decisive.Fault); !ok {
				t.Errorf("%s: its decisive fault %s is not simulated", name, e.Decisive.Fault)
				continue
			}
			faults = []sim.Fault{f}
		}
		want := judge.Predict(e, f.Name)
		breaks := want.Want(e.Decisive.Property) == contract.WantViolated
		first := 0
		for seed := uint64(1); seed <= 5 && first == 0; seed++ {
			r := sim.Run(t, sim.Scenario{Locks: reg, Lock: name, Seed: seed, Faults: faults})
			for _, p := range r.Check.Props {
				if p.ID != e.Decisive.Property {
					continue
				}
				if breaks && p.Verdict == contract.Violated ||
					!breaks && p.Verdict == contract.OK && (!want.Rejected || r.Check.Counts.Rejected > 0) {
					first = int(seed)
				}
			}
		}
		what := "violated"
		if !breaks {
			what = "kept, late ops refused"
		}
		if first == 0 {
			t.Errorf("%s × %s: %s not %s in 5 seeds", name, f.Name, e.Decisive.Property, what)
			continue
		}
		found++
		t.Logf("%s × %s: %s %s, first on seed %d", name, f.Name, e.Decisive.Property, what, first)
	}
	if found == 0 {
		t.Fatal("no lock with a decisive finding")
	}
}

// TestCataloguesAgree: each fault of `lockproof run`'s catalogue is
// simulated or says why not (sim.Unsimulated), each simulated fault is in
// the real-time catalogue or says why not (chaos.NotSimulatedInRealTime),
// and neither list names a fault that is in both, or in neither (issue 41:
// the two catalogues agree).
func TestCataloguesAgree(t *testing.T) {
	real, simulated := map[string]bool{}, map[string]bool{}
	for _, f := range chaos.Faults() {
		real[f] = true
	}
	for _, f := range sim.Names() {
		simulated[f] = true
	}
	un, notReal := sim.Unsimulated(), chaos.NotSimulatedInRealTime()
	for f := range real {
		if !simulated[f] && un[f] == "" {
			t.Errorf("%s: a fault of lockproof run that the simulation neither has nor says why not (sim.Unsimulated)", f)
		}
	}
	for f := range simulated {
		if !real[f] && notReal[f] == "" {
			t.Errorf("%s: a simulated fault lockproof run neither has nor says why not (chaos.NotSimulatedInRealTime)", f)
		}
	}
	for f := range un {
		if simulated[f] || !real[f] {
			t.Errorf("sim.Unsimulated names %s, which the simulation has or lockproof run lacks", f)
		}
	}
	for f := range notReal {
		if real[f] || !simulated[f] {
			t.Errorf("chaos.NotSimulatedInRealTime names %s, which lockproof run has or the simulation lacks", f)
		}
	}
}
