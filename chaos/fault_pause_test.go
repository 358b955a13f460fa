package chaos_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/zoo"
)

// TestPauseWaitsForItsVictim: pause-client's victim, chosen by the seed
// before the run, is paused for the full 3 TTLs even when it first holds
// the lock after the run's Duration, as on a loaded machine: runs far
// shorter than the holds (runs of 300ms, holds of up to 800ms) make most
// seeds' victims win the lock late. Bounded by the Duration, such a
// victim went unpaused (the fault did not strike) or was paused for less
// than the TTL.
func TestPauseWaitsForItsVictim(t *testing.T) {
	t.Parallel()
	e := chaostest.StartProcess(t, env.Spec{})
	const ttl, dur = 300 * time.Millisecond, 300 * time.Millisecond
	late := 0
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultPauseClient, Seed: seed, Duration: dur, TTL: ttl, Clients: 3,
				Workload: workload.Config{Locks: zoo.Builtin(), Hold: 800 * time.Millisecond, Think: 5 * time.Millisecond, OpTimeout: 3 * time.Second}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := chaos.Run(ctx, e, sc, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if out.FaultErr != nil {
				t.Fatalf("fault %q: %v", out.FaultName, out.FaultErr)
			}
			var start int64 = -1
			var pause *history.Op
			for i, op := range out.Ops {
				if start < 0 || op.Call < start {
					start = op.Call
				}
				// The pause, not a stall window the run observed.
				if op.Kind == history.Fault && !contract.Observed(contract.FaultKind(op.Name)) {
					pause = &out.Ops[i]
				}
			}
			if pause == nil || !pause.Completed {
				t.Fatalf("no completed pause in the history (fault %q)", out.FaultName)
			}
			if got := time.Duration(pause.Return - pause.Call); got < 3*ttl {
				t.Errorf("%s paused for %v; want the full 3 TTLs (%v)", out.FaultName, got, 3*ttl)
			}
			if time.Duration(pause.Call-start) > dur {
				late++
			}
			t.Logf("%s at %v for %v: %s", out.FaultName, time.Duration(pause.Call-start), time.Duration(pause.Return-pause.Call), out.FaultEvidence)
		})
	}
	if late == 0 && !t.Failed() {
		t.Errorf("every victim held within the run's %v: the test did not exercise a late strike", dur)
	}
}
