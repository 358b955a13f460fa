package sim_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// withAltered returns the built-in registry with the shipped lock also
// registered as name, each Locker wrapped by wrap: an altered lock the
// harness must catch.
func withAltered(t *testing.T, name string, wrap func(locker.Locker) locker.Locker) *locker.Registry {
	t.Helper()
	reg := zoo.Builtin()
	e, _ := reg.Lookup(zoo.FencedName)
	open := e.Open
	e.Name = name
	e.Open = func(d locker.Deps) (locker.Locker, error) {
		l, err := open(d)
		if err != nil {
			return nil, err
		}
		return wrap(l), nil
	}
	if err := reg.Add(e); err != nil {
		t.Fatal(err)
	}
	return reg
}

// sharedTTL is the shipped lock whose released nested leases answer
// TTLLeft with their outer lease's hold, as the old lock's did (its holds
// shared one record: package lock's review defect 7). Its Locker has
// TryAcquire only, and its leases Reenter, ValidUntil and TTLLeft.
type sharedTTL struct{ locker.Locker }

func (l sharedTTL) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	x, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &sharedLease{Lease: x}, nil
}

type sharedLease struct {
	locker.Lease
	outer    *sharedLease // the lease it re-entered; nil for an outer one
	released atomic.Bool
}

func (x *sharedLease) Release(ctx context.Context) error {
	err := x.Lease.Release(ctx)
	if err == nil {
		x.released.Store(true)
	}
	return err
}

func (x *sharedLease) TTLLeft(ctx context.Context) (time.Duration, error) {
	if x.released.Load() && x.outer != nil {
		return x.outer.TTLLeft(ctx)
	}
	return x.Lease.(locker.ServerClaimer).TTLLeft(ctx)
}

func (x *sharedLease) ValidUntil() time.Time { return x.Lease.(locker.Claimer).ValidUntil() }

func (x *sharedLease) Reenter(ctx context.Context, ttl time.Duration) (locker.Lease, error) {
	in, err := x.Lease.(locker.Reentrant).Reenter(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &sharedLease{Lease: in, outer: x}, nil
}

// TestTTLAsksCatchAReleasedNestedClaim: the workload asks a lease's server
// how long it is valid (workload.Mix.TTL), a nested lease again after its
// release, and the claims property's released-claim rule catches a lock
// whose released nested lease is still said valid (package lock's review
// defect 7, here an alteration of the shipped lock); the shipped lock, on
// the same seeds, is as predicted, its released leases said not held.
func TestTTLAsksCatchAReleasedNestedClaim(t *testing.T) {
	reg := withAltered(t, "fenced-shared-ttl", func(l locker.Locker) locker.Locker { return sharedTTL{l} })
	mix := workload.DefaultMix()
	mix.TTL = 1
	caught, refused := 0, 0
	for seed := uint64(1); seed <= 3; seed++ {
		sc := sim.Scenario{Locks: reg, Lock: "fenced-shared-ttl", Seed: seed, Workload: workload.Config{Mix: &mix}}
		r := sim.Run(t, sc)
		if slices.ContainsFunc(r.Check.Of(contract.PropClaims).Violations, func(v checker.Violation) bool { return v.Rule == checker.RuleReleasedClaim }) {
			caught++
		}
		sc.Lock = zoo.FencedName
		r = sim.Run(t, sc)
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("seed %d: the shipped lock not as predicted %v, undecided %v", seed, r.Mismatches, r.Unknown)
		}
		refused += afterRelease(r.Ops, history.Fail)
	}
	if caught == 0 {
		t.Error("a released nested lease said valid was not caught on any of 3 seeds")
	}
	if refused == 0 {
		t.Error("the shipped lock's released leases were never asked")
	}
	t.Logf("caught on %d seeds of 3; the shipped lock's released leases said not held %d times", caught, refused)
}

// afterRelease counts the ttl ops with result res of a hold whose release
// returned ok before them.
func afterRelease(ops []history.Op, res history.Result) int {
	type hold struct {
		client string
		lease  uint64
	}
	released := map[hold]int64{}
	for _, o := range ops {
		if o.Kind == history.Release && o.Result == history.OK && o.Hold != 0 {
			h := hold{o.Client, o.Hold}
			if t, ok := released[h]; !ok || o.Return < t {
				released[h] = o.Return
			}
		}
	}
	n := 0
	for _, o := range ops {
		if t, ok := released[hold{o.Client, o.Hold}]; ok && o.Kind == history.TTL && o.Result == res && t <= o.Call {
			n++
		}
	}
	return n
}

// closeSkipsWaits is the shipped lock whose Close does not reach the waits
// in progress that asked for no watchdog: it closes the client only once
// they have returned, so that one served after Close keeps the lock, as
// the old lock's did (package lock's review defect 8). Its Locker has
// TryAcquire, Acquire, AcquireUnwatched and CloseContext.
type closeSkipsWaits struct {
	locker.Locker
	mu      sync.Mutex
	waits   int
	closing bool
}

func (l *closeSkipsWaits) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.Locker.(locker.Waiter).Acquire(ctx, key, ttl)
}

func (l *closeSkipsWaits) AcquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (locker.Lease, error) {
	l.mu.Lock()
	l.waits++
	l.mu.Unlock()
	x, err := l.Locker.(locker.Unwatched).AcquireUnwatched(ctx, key, ttl, wait, inLine)
	l.mu.Lock()
	l.waits--
	late := l.closing && l.waits == 0
	l.mu.Unlock()
	if late {
		_ = l.Locker.(locker.ContextCloser).CloseContext(context.WithoutCancel(ctx))
	}
	return x, err
}

func (l *closeSkipsWaits) CloseContext(ctx context.Context) error {
	l.mu.Lock()
	l.closing = true
	waiting := l.waits > 0
	l.mu.Unlock()
	if waiting {
		return nil // closed when the waits end
	}
	return l.Locker.(locker.ContextCloser).CloseContext(ctx)
}

// TestCloseWaitingCatchesAGrantAfterClose: the workload closes a client's
// Locker while one of its waits is in line (workload.Mix.CloseWaiting),
// half of them without the watchdog, and the calls property's closed-grant
// rule catches a lock that grants such a wait after Close (package lock's
// review defect 8, here an alteration of the shipped lock); the shipped
// lock, on the same seeds, is as predicted.
func TestCloseWaitingCatchesAGrantAfterClose(t *testing.T) {
	reg := withAltered(t, "fenced-close-skips", func(l locker.Locker) locker.Locker { return &closeSkipsWaits{Locker: l} })
	mix := workload.DefaultMix()
	mix.CloseWaiting = 1
	caught := 0
	for seed := uint64(1); seed <= 3; seed++ {
		sc := sim.Scenario{Locks: reg, Lock: "fenced-close-skips", Seed: seed, Workload: workload.Config{Mix: &mix}}
		r := sim.Run(t, sc)
		if slices.ContainsFunc(r.Check.Of(contract.PropCalls).Violations, func(v checker.Violation) bool { return v.Rule == checker.RuleClosedGrant }) {
			caught++
		}
		sc.Lock = zoo.FencedName
		r = sim.Run(t, sc)
		if len(r.Mismatches) > 0 || len(r.Unknown) > 0 {
			t.Errorf("seed %d: the shipped lock not as predicted %v, undecided %v", seed, r.Mismatches, r.Unknown)
		}
		closes := 0
		for _, o := range r.Ops {
			if o.Kind == history.Close {
				closes++
			}
		}
		if closes == 0 {
			t.Errorf("seed %d: no client closed its Locker", seed)
		}
	}
	if caught == 0 {
		t.Error("a wait granted after Close was not caught on any of 3 seeds")
	}
	t.Logf("caught on %d seeds of 3", caught)
}
