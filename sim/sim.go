// Package sim runs a lock's real code in virtual time: the workload of
// package chaos/workload, on in-process Redis nodes (miniredis, held to a
// real redis-server by internal/fidelity) reached through a simulated
// network (internal/simnet/nodes: in-memory pipes whose messages it delays,
// holds or loses), inside a testing/synctest bubble, so that seconds of
// leases, watchdog renewals, hand-offs and expiries take milliseconds; its
// history goes through the same checker as a real run's, judged by the
// same predictions (judge.Predict).
//
// A seed decides everything: the workload's choices, the faults (Swarm
// draws a seed's own mix), their moments and victims, every message's
// fate, and the lock's own tokens and jitter (workload.Config.Replayable).
// The bubble runs on one processor (GOMAXPROCS 1 for the run) with no
// garbage collection, so that goroutines woken at one instant run in the
// same order: the locks without pub/sub or a watchdog replay a seed byte
// for byte (TestSeedReplays); the fenced locks most seeds, not all
// (goroutines woken at one virtual instant by timers of the lock's own
// still run in an order Go does not fix; docs/SIMULATION.md).
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/simnet/nodes"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// Scenario is one simulated run.
type Scenario struct {
	// Locks is the registry Lock is looked up in; Lock the lock's name.
	Locks *locker.Registry
	Lock  string
	// Seed seeds the workload, the faults and the network.
	Seed uint64
	// Duration is the run's length in virtual time; 0 means 3s.
	Duration time.Duration
	// Workload shapes the workload (Clients, TTL, Hold, Mix, ...); its
	// Lock, Locks and Seed are the scenario's.
	Workload workload.Config
	// Faults run at once, each at its own moment (Catalogue, Swarm); none
	// is a run without faults.
	Faults []Fault
}

// Result is what a simulated run recorded and what the checker decided.
type Result struct {
	Ops   []history.Op
	Check *checker.Result
	// Expected is what the lock's predictions say of the run: per
	// property, ok when every fault of the run predicts it holds
	// (judge.Predict), else what the faults allow (expect).
	Expected locker.Prediction
	// Mismatches name the properties whose verdict the prediction does
	// not allow ("lease violated, expected ok"), and the violations no
	// fault window excuses (Unexcused, also listed alone), as judge.Seed
	// finds them; Unknown the properties undecided.
	Mismatches, Unknown, Unexcused []string
	// Details are the Mismatches in structured form, in order
	// (contract.Row.MismatchDetails).
	Details []contract.Mismatch
	// AsExpected is the judge's word on the run (judge.Seed): no
	// mismatch, and every verdict known.
	AsExpected bool
}

// ErrScenario wraps a scenario that cannot run.
var ErrScenario = errors.New("sim: bad scenario")

// The nodes' addresses: IP literals, so that nothing looks a name up (the
// resolver's state is the process's, and must not be made in a bubble).
const (
	masterAddr = "127.0.0.1:1"
	fencedAddr = "127.0.0.1:2"
)

// redlockAddrs are the independent masters of a lock that needs them
// (locker.Needs.Redlock), three as in the real-time environments.
func redlockAddrs() []string { return []string{"127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"} }

// one serialises the runs of a process: each sets GOMAXPROCS to 1.
var one sync.Mutex

// Run runs sc in a synctest bubble of t and checks its history with the
// bounds the lock's entry states (judge.CheckOptions, as a matrix run
// does). It fails t on an error of the run itself. Runs of one process
// take turns: each runs on one processor (GOMAXPROCS 1, put back after).
func Run(t *testing.T, sc Scenario) Result {
	t.Helper()
	r, err := Simulate(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Simulate is Run returning the run's error instead of failing t.
func Simulate(t *testing.T, sc Scenario) (Result, error) {
	if sc.Locks == nil {
		return Result{}, fmt.Errorf("%w: Locks is nil", ErrScenario)
	}
	entry, ok := sc.Locks.Lookup(sc.Lock)
	if !ok {
		return Result{}, fmt.Errorf("%w: lock %q is not in the registry (%v)", ErrScenario, sc.Lock, sc.Locks.Names())
	}
	if entry.Needs.Replicas > nodes.Replicas {
		return Result{}, fmt.Errorf("%w: lock %q needs %d replicas (locker.Needs.Replicas): the simulation's master has %d", ErrScenario, sc.Lock, entry.Needs.Replicas, nodes.Replicas)
	}
	cfg := sc.Workload
	cfg.Lock, cfg.Locks, cfg.Seed, cfg.Replayable = sc.Lock, sc.Locks, sc.Seed, true
	if cfg.TTL == 0 {
		cfg.TTL = 500 * time.Millisecond
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = judge.WaitTimeout(entry)
	}
	d := sc.Duration
	if d == 0 {
		d = 3 * time.Second
	}
	if len(sc.Faults) == 1 {
		// One fault alone gets the workload the matrix gives its twin
		// (chaos.Fault.Shape): under pause-client, operations outlast the
		// pause, so that a client paused between two commands of one
		// operation still sends the second when it wakes.
		if twin, ok := chaos.Lookup(sc.Faults[0].Name); ok {
			shape := twin.WorkloadShape()
			cfg.Clients = cmp.Or(cfg.Clients, shape.Clients)
			cfg.Hold = cmp.Or(cfg.Hold, shape.Hold)
			cfg.Think = cmp.Or(cfg.Think, shape.Think)
			cfg.OpTimeout = cmp.Or(cfg.OpTimeout, shape.OpTimeout)
		}
	}
	for i, f := range sc.Faults {
		if f.simulate == nil {
			return Result{}, fmt.Errorf("%w: Faults[%d] %q is not of the catalogue (%v)", ErrScenario, i, f.Name, Names())
		}
	}
	one.Lock()
	defer one.Unlock()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// No collection during the run: the collector's workers take the one
	// processor at moments of the process's heap, not of the seed, and a
	// goroutine they preempt goes behind others woken at the same
	// instant. The run's garbage is collected after it.
	defer runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ops []history.Op
	var runErr error
	synctest.Test(t, func(t *testing.T) {
		ops, runErr = simulate(sc, entry, cfg, d)
	})
	if runErr != nil {
		return Result{}, fmt.Errorf("sim %s seed %d: %w", sc.Lock, sc.Seed, runErr)
	}
	res, err := checker.Check(context.Background(), ops, judge.CheckOptions(entry, cfg.TTL, time.Minute))
	if err != nil {
		return Result{}, fmt.Errorf("sim %s seed %d: check: %w", sc.Lock, sc.Seed, err)
	}
	r := Result{Ops: ops, Check: res, Expected: judge.Mix(entry, faultNames(sc.Faults))}
	row := contract.Row{Verdicts: contract.Verdicts{}}
	for _, p := range res.Props {
		row.Verdicts[p.ID] = p.Verdict
		if p.Verdict == contract.Unknown {
			r.Unknown = append(r.Unknown, p.ID)
		}
	}
	// A break that a fault of the mix may cause counts only near one of
	// its windows: a swarm seed whose mix holds a failover no longer
	// excuses a lease break anywhere in the run.
	r.Unexcused = judge.Unexcused(res, judge.WindowsOf(ops),
		func(kind string) locker.Prediction { return judge.Predict(entry, kind) },
		judge.Bounds{TTL: cfg.TTL, Skew: chaos.SkewBehind})
	// The judge decides "as predicted", as it does for the matrix: a seed
	// alone (judge.Seed), whose campaign counts the must-breaks it missed.
	row.Unexcused = r.Unexcused
	judge.Seed(r.Expected, &row)
	r.Mismatches, r.Details, r.AsExpected = row.Mismatches, row.MismatchDetails, row.AsExpected
	return r, nil
}

// simulate runs the workload and the faults in the bubble and returns the
// history.
func simulate(sc Scenario, entry locker.Entry, cfg workload.Config, d time.Duration) ([]history.Op, error) {
	// The lock's nodes: the master, or a Redlock's independent masters,
	// which pause-server and key-loss strike instead.
	lockNodes, redlock := []string{masterAddr}, []string(nil)
	if entry.Needs.Redlock {
		redlock = redlockAddrs()
		lockNodes = redlock
	}
	n := nodes.NewNet(sc.Seed, append([]string{masterAddr, fencedAddr}, redlock...)...)
	defer n.Close()
	w, err := workload.NewOn(cfg, func(c string) func(context.Context, string, string) (net.Conn, error) { return n.Dialer(c) }, masterAddr, fencedAddr, redlock...)
	if err != nil {
		return nil, err
	}
	// Stamps apart, since no virtual time passes while goroutines run
	// (history.Options.Distinct).
	rec := history.NewRecorder(nil, history.Options{Distinct: true})
	// The workload runs for d, and on until the last fault window has
	// closed and two TTLs more (as the real-time matrix lingers): a fault
	// that strikes late still has its whole window, and what it did shows.
	// A fault that has not struck when d is up does not strike.
	run, stop := context.WithCancel(context.Background())
	defer stop()
	moments, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(run, rec) }()
	faultErrs := make(chan error, len(sc.Faults))
	for i, f := range sc.Faults {
		s := &chaos.SimStrike{Ctx: moments, Rng: rand.New(rand.NewPCG(sc.Seed, 0x5137+uint64(i))), Net: n, Workload: w, Rec: rec, TTL: cfg.TTL, Run: d,
			OpTimeout: cmp.Or(cfg.OpTimeout, time.Second),
			Point:     judge.PointOf(entry, f.Name), Master: masterAddr, LockNodes: lockNodes}
		go func() { faultErrs <- f.simulate(s) }()
	}
	var errs []error
	for range sc.Faults {
		errs = append(errs, <-faultErrs)
	}
	<-moments.Done()
	if len(sc.Faults) > 0 {
		time.Sleep(2 * cfg.TTL)
	}
	stop()
	errs = append(errs, <-ran, w.Close())
	if err := rec.Close(); err != nil {
		errs = append(errs, fmt.Errorf("record: %w", err))
	}
	n.Close()
	// A bubble must end with no goroutine left: go-redis's dials that
	// failed in a cut retry after a backoff, and now fail at once (the
	// network is closed). Virtual time is free.
	time.Sleep(time.Minute)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rec.Ops(), nil
}

// faultNames are the names of fs, in order.
func faultNames(fs []Fault) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}
