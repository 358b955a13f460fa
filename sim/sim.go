// Package sim runs a lock's real code in virtual time: the workload of
// package chaos/workload, on in-process Redis nodes (miniredis, held to a
// real redis-server by internal/fidelity) reached over in-memory pipes,
// inside a testing/synctest bubble, so that seconds of leases, watchdog
// renewals, hand-offs and expiries take milliseconds; its history goes
// through the same checker as a real run's.
//
// What is here is the first step of the simulation of issue 29: the
// environment and the run. Faults at message granularity, byte-identical
// replay of a seed (goroutines that wake at one virtual instant still run
// in the scheduler's order), `lockproof sim` and shrinking are not.
package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/vnode"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/runner"
)

// Scenario is one simulated run.
type Scenario struct {
	// Locks is the registry Lock is looked up in; Lock the lock's name.
	Locks *locker.Registry
	Lock  string
	// Seed seeds the workload.
	Seed uint64
	// Duration is the run's length in virtual time; 0 means 3s.
	Duration time.Duration
	// Workload shapes the workload (Clients, TTL, Hold, Mix, ...); its
	// Lock, Locks and Seed are the scenario's.
	Workload workload.Config
	// Fault is "" (none) or contract.FaultPauseClient: after a fifth of
	// the run plus a seeded share of a tenth, a client picked by the seed
	// is frozen for 3 TTLs once it holds with its write ahead (its gate
	// holds every command, its watchdog's too), as the real-time fault
	// does. Recorded as a fault window.
	Fault string
}

// Result is what a simulated run recorded and what the checker decided.
type Result struct {
	Ops   []history.Op
	Check *checker.Result
}

// ErrScenario wraps a scenario that cannot run.
var ErrScenario = errors.New("sim: bad scenario")

// The nodes' addresses: IP literals, so that nothing looks a name up (the
// resolver's state is the process's, and must not be made in a bubble).
const (
	masterAddr = "127.0.0.1:1"
	fencedAddr = "127.0.0.1:2"
)

// Run runs sc in a synctest bubble of t and checks its history with the
// bounds the lock's entry states (runner.CheckOptions, as a matrix run
// does). It fails t on an error of the run itself.
func Run(t *testing.T, sc Scenario) Result {
	t.Helper()
	entry, ok := sc.Locks.Lookup(sc.Lock)
	if !ok {
		t.Fatalf("%v: lock %q is not in the registry (%v)", ErrScenario, sc.Lock, sc.Locks.Names())
	}
	cfg := sc.Workload
	cfg.Lock, cfg.Locks, cfg.Seed = sc.Lock, sc.Locks, sc.Seed
	if cfg.TTL == 0 {
		cfg.TTL = 500 * time.Millisecond
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = runner.WaitTimeout(entry)
	}
	d := sc.Duration
	if d == 0 {
		d = 3 * time.Second
	}
	switch sc.Fault {
	case "", contract.FaultNone, contract.FaultPauseClient:
	default:
		t.Fatalf("%v: fault %q: the simulation has none and %s so far", ErrScenario, sc.Fault, contract.FaultPauseClient)
	}
	var ops []history.Op
	synctest.Test(t, func(t *testing.T) {
		dial := nodes(t)
		w, err := workload.NewOn(cfg, dial, masterAddr, fencedAddr)
		if err != nil {
			t.Fatal(err)
		}
		// Stamps apart, since no virtual time passes while goroutines
		// run (history.Options.Distinct).
		rec := history.NewRecorder(nil, history.Options{Distinct: true})
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx, rec) }()
		faultErr := inject(ctx, sc, cfg.TTL, d, w, rec)
		runErr := errors.Join(<-ran, faultErr)
		closeErr := w.Close()
		if err := rec.Close(); err != nil {
			t.Fatalf("record: %v", err)
		}
		if runErr != nil || closeErr != nil {
			t.Fatalf("run: %v", errors.Join(runErr, closeErr))
		}
		ops = rec.Ops()
	})
	res, err := checker.Check(context.Background(), ops, runner.CheckOptions(entry, cfg.TTL, time.Minute))
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return Result{Ops: ops, Check: res}
}

// inject applies sc's fault to w's run, recording its window in rec.
func inject(ctx context.Context, sc Scenario, ttl, d time.Duration, w *workload.Workload, rec *history.Recorder) error {
	if sc.Fault != contract.FaultPauseClient {
		return nil
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x5137)) // the fault's own stream: the workload's draws stay as they were
	select {
	case <-time.After(d/5 + time.Duration(rng.Int64N(int64(d/10)+1))):
	case <-ctx.Done():
		return nil
	}
	victim := w.Clients[rng.IntN(len(w.Clients))]
	if err := victim.WaitHolding(ctx); err != nil {
		return nil // it never held again before the run ended
	}
	return nemesis.Apply(ctx, rec, &nemesis.PauseClient{Client: victim.Name, Gate: victim.Gate}, 3*ttl)
}

// nodes starts the lock's and the resources' Redis, in-process
// (package vnode), and returns the dialer that reaches them.
func nodes(t *testing.T) vnode.Dialer {
	t.Helper()
	return vnode.Start(t, masterAddr, fencedAddr)
}
