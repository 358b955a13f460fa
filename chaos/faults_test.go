package chaos

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Catalogue() {
		if f.Name == "" || f.Doc == "" {
			t.Errorf("fault %+v: a name and a doc line are required", f.Name)
		}
		if seen[f.Name] {
			t.Errorf("fault %s listed twice", f.Name)
		}
		seen[f.Name] = true
		if (f.strike == nil) != (f.Name == contract.FaultNone || f.Name == contract.FaultCrowd || f.NotRealTime != "") {
			t.Errorf("fault %s: only none and crowd (a workload shape) and the simulation's own faults strike nothing in real time", f.Name)
		}
		// One fault, both twins or a reason: the simulation's strike
		// (Simulate) or why there is none (NotSimulated), never both; a
		// real-time strike or why there is none (NotRealTime).
		if (f.Simulate == nil) == (f.NotSimulated == "") {
			t.Errorf("fault %s: a simulated twin (Simulate, SimDoc) or why not (NotSimulated), one of them", f.Name)
		}
		if f.Simulate != nil && f.SimDoc == "" {
			t.Errorf("fault %s: its simulated twin has no SimDoc", f.Name)
		}
		if f.NotRealTime != "" {
			if f.strike != nil || f.Simulate == nil || f.Matrix {
				t.Errorf("fault %s: a fault of the simulation alone (NotRealTime) strikes only there, and is in no matrix", f.Name)
			}
			if err := f.Available(env.Process, ""); !errors.Is(err, ErrSimulationOnly) {
				t.Errorf("fault %s: Available = %v; want ErrSimulationOnly", f.Name, err)
			}
			if _, ok := Lookup(f.Name); ok {
				t.Errorf("Lookup(%s) found a fault lockproof run cannot run", f.Name)
			}
			continue
		}
		if f.Scope != ScopeFresh && f.Env != nil {
			t.Errorf("fault %s: an environment of its own (Env) needs ScopeFresh", f.Name)
		}
		if g, ok := Lookup(f.Name); !ok || g.Name != f.Name {
			t.Errorf("Lookup(%s) = %v, %v", f.Name, g.Name, ok)
		}
	}
	if !slices.IsSorted(Faults()) || len(Faults()) != len(seen)-len(NotSimulatedInRealTime()) {
		t.Errorf("Faults() = %v: want every catalogue fault, sorted", Faults())
	}
	if _, ok := Lookup("no-such-fault"); ok {
		t.Error("Lookup found a fault that does not exist")
	}
}

func TestAvailable(t *testing.T) {
	skew, _ := Lookup(contract.FaultFailoverSkew)
	for _, k := range []env.Kind{env.Docker, env.BYO} {
		if err := skew.Available(k, ""); !errors.Is(err, ErrNeedsProcesses) {
			t.Errorf("failover-skew on %s: %v; want ErrNeedsProcesses", k, err)
		}
	}
	if s := skew.FreshSpec(locker.Needs{}); s.ReplicaClockBehind != SkewBehind || s.DownAfter != FreshSpec(locker.Needs{}).DownAfter {
		t.Errorf("failover-skew's environment %+v: want the fresh one with replicas %v behind", s, SkewBehind)
	}
	pause, _ := Lookup(contract.FaultPauseServer)
	if err := pause.Available(env.BYO, ""); !errors.Is(err, ErrNotOurServers) {
		t.Errorf("pause-server on byo: %v", err)
	}
	for _, k := range []env.Kind{env.Process, env.Docker, ""} {
		if err := pause.Available(k, ""); err != nil {
			t.Errorf("pause-server on %q: %v", k, err)
		}
	}
}

// TestFencesBack counts the grants below an earlier grant's fence, per key,
// and only against grants that returned before their call.
func TestFencesBack(t *testing.T) {
	ms := func(v int64) int64 { return v * int64(time.Millisecond) }
	acq := func(key string, call, ret int64, token uint64) history.Op {
		return history.Op{Client: "c", Kind: history.Acquire, Key: key, Call: ms(call), Return: ms(ret), Completed: true,
			Result: history.OK, Token: token, HasToken: true}
	}
	ops := []history.Op{
		acq("a", 0, 1, 1000),
		acq("a", 2, 3, 2000), // the old master's high fence
		acq("a", 2, 5, 1500), // concurrent with the 2000: not behind it
		acq("b", 4, 5, 10),   // another key: not compared with a's
		acq("a", 6, 7, 950),  // behind 2000
		acq("a", 10, 11, 1999),
		acq("a", 12, 13, 2001),
		{Client: "c", Kind: history.Write, Key: "a", Call: ms(8), Return: ms(9), Completed: true, Result: history.Rejected, Token: 950, HasToken: true},
	}
	n, first, last, rejected := fencesBack(ops)
	if n != 2 || first != ms(6) || last != ms(10) || rejected != 1 {
		t.Fatalf("fencesBack = %d grants from %v to %v, %d refused; want 2 from 6ms to 10ms, 1 refused", n, first, last, rejected)
	}
}

// Each fault takes the fault points its kind says, and only those; a
// scenario with a point its fault does not take is refused before it runs.
func TestCheckPoint(t *testing.T) {
	after, before := contract.Point{After: "get"}, contract.Point{Before: "pexpire"}
	for _, f := range Catalogue() {
		if err := f.CheckPoint(contract.Point{}); err != nil {
			t.Errorf("%s: the zero point: %v", f.Name, err)
		}
		if err := f.CheckPoint(after); (err == nil) != (f.Takes != PointNone) {
			t.Errorf("%s (takes %d): after: %v", f.Name, f.Takes, err)
		}
		if err := f.CheckPoint(before); (err == nil) != (f.Takes == PointAfterOrBefore) {
			t.Errorf("%s (takes %d): before: %v", f.Name, f.Takes, err)
		}
		if err := f.CheckPoint(contract.Point{After: "get", Before: "del"}); !errors.Is(err, contract.ErrBadPoint) {
			t.Errorf("%s: after and before: %v", f.Name, err)
		}
	}
	if f, _ := Lookup(contract.FaultPauseClient); f.Takes != PointAfter {
		t.Errorf("pause-client takes %d, want PointAfter", f.Takes)
	}
	if f, _ := Lookup(contract.FaultCrashClient); f.Takes != PointAfterOrBefore {
		t.Errorf("crash-client takes %d, want PointAfterOrBefore", f.Takes)
	}
	_, _, err := Scenario{Lock: "lua", Fault: contract.FaultLatency, Point: after}.withDefaults()
	if !errors.Is(err, ErrScenario) || !errors.Is(err, contract.ErrBadPoint) {
		t.Errorf("latency with a fault point: %v; want ErrScenario and contract.ErrBadPoint", err)
	}
}

// TestPacedSearchRestsAfterEachLook: the holder search of key-loss and
// its kin rests nine times as long as a look took (issue 47 item 5): a
// look that costs 10ms (a SCAN of a large keyspace) is asked at most
// about once per 100ms, where an unpaced search asked it back to back.
// A loaded machine only makes looks slower and fewer.
func TestPacedSearchRestsAfterEachLook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// Each rest is held to the look before it, as measured here: on a
	// loaded machine a 10ms sleep takes longer, and paced rests longer
	// after it (a share of the whole run's time would count the last
	// look, whose rest the deadline cuts).
	type look struct{ start, end time.Time }
	var looks []look
	err := paced(ctx, func() (bool, error) {
		l := look{start: time.Now()}
		time.Sleep(10 * time.Millisecond)
		l.end = time.Now()
		looks = append(looks, l)
		return false, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paced: %v; want the context's end", err)
	}
	if len(looks) < 2 {
		t.Fatalf("%d looks in 500ms; want a second after a rest", len(looks))
	}
	for i := 1; i < len(looks); i++ {
		took, rest := looks[i-1].end.Sub(looks[i-1].start), looks[i].start.Sub(looks[i-1].end)
		// The rest is timed from the look's start as paced saw it: allow
		// the millisecond between that and this closure's clock.
		if rest < scanRest*took-time.Millisecond*scanRest {
			t.Errorf("look %d took %v, then a rest of %v; want at least %d times the look", i, took, rest, scanRest)
		}
	}
	found := errors.New("look failed")
	if err := paced(context.Background(), func() (bool, error) { return false, found }); !errors.Is(err, found) {
		t.Errorf("a failed look: %v; want its error", err)
	}
	if err := paced(context.Background(), func() (bool, error) { return true, nil }); err != nil {
		t.Errorf("a look that finds: %v", err)
	}
}

// TestEveryFaultHasItsTraits: a fault is its file plus one row of the
// trait table (contract.FaultTraits): every fault of the catalogue has a
// row, and every row is a catalogue fault or one the harness observes (a
// stall). A fault without a row would be judged as no catalogue fault:
// unpredicted, excusing nothing of what a failover, a forgotten lock or a
// stopped client may cause (issue 64).
func TestEveryFaultHasItsTraits(t *testing.T) {
	names := map[string]bool{}
	for _, f := range Catalogue() {
		names[f.Name] = true
		if _, ok := contract.Traits(f.Name); !ok {
			t.Errorf("fault %q has no row in contract's trait table (contract.FaultTraits)", f.Name)
		}
	}
	for _, n := range contract.TraitNames() {
		tr, _ := contract.Traits(n)
		if !names[n] && !tr.Observed {
			t.Errorf("trait row %q is no catalogue fault and no observed one", n)
		}
		if tr.Like != "" && !names[tr.Like] {
			t.Errorf("trait row %q: Like %q is no catalogue fault", n, tr.Like)
		}
		if tr.ExcusesAs != "" && !names[tr.ExcusesAs] {
			t.Errorf("trait row %q: ExcusesAs %q is no catalogue fault", n, tr.ExcusesAs)
		}
	}
}
