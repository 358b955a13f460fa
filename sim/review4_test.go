package sim_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// TestRetryShare: Mix.Retry chooses which blocking acquires retry one-shot
// attempts (locker.Retrier) instead of waiting in line: every one at 1,
// none at 0 (each then recorded as a wait).
func TestRetryShare(t *testing.T) {
	for _, share := range []float64{0, 1} {
		mix, err := workload.ParseMix("blocking=1,owner=0,reenter=0,retry=" + strconv.FormatFloat(share, 'f', -1, 64))
		if err != nil {
			t.Fatal(err)
		}
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: 1, Workload: workload.Config{Mix: &mix}})
		waits, oneShot := 0, 0
		for _, o := range r.Ops {
			if o.Kind != history.Acquire {
				continue
			}
			if o.Wait {
				waits++
			} else {
				oneShot++
			}
		}
		if share == 1 && (waits > 0 || oneShot == 0) {
			t.Errorf("retry=1: %d waits, %d one-shot acquires; want every acquire retried one-shot", waits, oneShot)
		}
		if share == 0 && (oneShot > 0 || waits == 0) {
			t.Errorf("retry=0: %d waits, %d one-shot acquires; want every acquire a wait", waits, oneShot)
		}
		if !r.AsExpected {
			t.Errorf("retry=%v: %v, unknown %v", share, r.Mismatches, r.Unknown)
		}
	}
}

// TestFourthReviewScenarios: the scenarios that catch the fourth
// review's defects 2 and 4 on the lock before its redesign (deebaa1;
// docs/FINDINGS.md, 2026-12-07) run the shipped lock as predicted on
// seeds that caught the old one, and do what they are there for: under
// latency a rushed release's request lands after its sender gave up and
// closed the connection (simnet.Rates.Drain); under reset and oom the
// lock's node refuses writes while replies are lost, and retried one-shot
// acquires fail.
func TestFourthReviewScenarios(t *testing.T) {
	// counted is the number a fault window's evidence gives before what.
	counted := func(ops []history.Op, kind, what string) int {
		re := regexp.MustCompile(`(\d+) ` + what)
		n := 0
		for _, o := range ops {
			if o.Kind == history.Fault && contract.FaultKind(o.Name) == kind {
				if m := re.FindStringSubmatch(o.Evidence); m != nil {
					k, _ := strconv.Atoi(m[1])
					n += k
				}
			}
		}
		return n
	}
	for _, sc := range []struct {
		defect, faults, mix string
		clients             int
		seeds               []uint64
		// acts says what the scenario did on a seed, "" when it did not act.
		acts func(ops []history.Op) string
	}{
		{"2", "latency", "rush-release=0.9,reenter=0.9,concurrent=0", 0, []uint64{23, 29}, func(ops []history.Op) string {
			if n := counted(ops, contract.FaultLatency, "requests landed after their sender closed"); n > 0 {
				return strconv.Itoa(n) + " requests landed after their sender closed the connection"
			}
			return ""
		}},
		{"4", "reset,oom", "blocking=1,retry=1,owner=0,concurrent=0,rush-release=0,inspect=1,reenter=0,long-work=0,renew=0", 1, []uint64{42, 85}, func(ops []history.Op) string {
			failed := 0
			for _, o := range ops {
				if o.Kind == history.Acquire && !o.Wait && o.Result == history.Fail {
					failed++
				}
			}
			if n := counted(ops, contract.FaultOOM, "requests refused"); n > 0 && failed > 0 {
				return strconv.Itoa(n) + " requests refused, " + strconv.Itoa(failed) + " retried acquires failed"
			}
			return ""
		}},
	} {
		mix, err := workload.ParseMix(sc.mix)
		if err != nil {
			t.Fatal(err)
		}
		faults, err := sim.Mix(sc.faults)
		if err != nil {
			t.Fatal(err)
		}
		acted := false
		for _, seed := range sc.seeds {
			r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: zoo.FencedName, Seed: seed, Faults: faults(seed),
				Workload: workload.Config{Mix: &mix, Clients: sc.clients}})
			if !r.AsExpected {
				t.Errorf("defect %s, %s seed %d: %v, unknown %v", sc.defect, sc.faults, seed, r.Mismatches, r.Unknown)
			}
			if did := sc.acts(r.Ops); did != "" {
				acted = true
				t.Logf("defect %s, %s seed %d: as predicted; %s", sc.defect, sc.faults, seed, did)
			}
		}
		if !acted {
			t.Errorf("defect %s: %s did not act on seeds %v", sc.defect, sc.faults, sc.seeds)
		}
	}
}
