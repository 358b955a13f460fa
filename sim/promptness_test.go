package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// pollingFenced is the shipped lock behind an adapter whose release never
// hands the lock off: it deletes the lock's keys with DEL, the hold and
// the line (not the fence), as a release written without the waiters in
// mind does (package lock's own release deletes the hold only when nobody
// is in line), and then lets the lock's Release end the lease (its
// watchdog; the release finds the hold gone, or another client's, and
// changes nothing). The waiters are served by their own next look, which
// finds the lock free and puts them back in line: a third of the queue
// TTL, or the holder's remaining TTL, after their last. (Deleting the
// hold alone is not enough: any other client's attempt on a free lock
// with a line hands it to the head, and the workload's clients make one
// every few milliseconds.) Every call but the release goes through
// zoo.Fenced, and package lock is unchanged.
type pollingFenced struct {
	*zoo.Fenced
	rdb    redis.UniversalClient
	prefix string
}

// pollingLease is a lease of pollingFenced.
type pollingLease struct {
	locker.Lease
	l *pollingFenced
}

func (x *pollingLease) Release(ctx context.Context) error {
	k := lock.RedisKeys(x.l.prefix + x.Key())
	if err := x.l.rdb.Del(ctx, k.Lock, k.Queue, k.QueueDeadlines).Err(); err != nil {
		return locker.ErrUnknownOutcome
	}
	_ = x.Lease.Release(context.WithoutCancel(ctx))
	return nil
}

func (l *pollingFenced) wrap(lease locker.Lease, err error) (locker.Lease, error) {
	if err != nil {
		return nil, err
	}
	return &pollingLease{Lease: lease, l: l}, nil
}

func (l *pollingFenced) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.wrap(l.Fenced.TryAcquire(ctx, key, ttl))
}

func (l *pollingFenced) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.wrap(l.Fenced.Acquire(ctx, key, ttl))
}

func (l *pollingFenced) AcquireInLine(ctx context.Context, key string, ttl time.Duration, inLine func()) (locker.Lease, error) {
	return l.wrap(l.Fenced.AcquireInLine(ctx, key, ttl, inLine))
}

func (l *pollingFenced) AcquireAs(ctx context.Context, key string, ttl time.Duration, owner string, wait bool, inLine func()) (locker.Lease, error) {
	return l.wrap(l.Fenced.AcquireAs(ctx, key, ttl, owner, wait, inLine))
}

func (l *pollingFenced) AcquireRetry(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.wrap(l.Fenced.AcquireRetry(ctx, key, ttl))
}

// pollingRegistry is the built-in locks and "fenced-polling", the shipped
// lock's entry (its hand-off bound too) opening pollingFenced.
func pollingRegistry(t *testing.T) *locker.Registry {
	t.Helper()
	reg := zoo.Builtin()
	e, ok := reg.Lookup(zoo.FencedName)
	if !ok || e.Handoff == nil {
		t.Fatal("the shipped lock states no hand-off bound")
	}
	open := e.Open
	e.Name = "fenced-polling"
	e.Open = func(d locker.Deps) (locker.Locker, error) {
		l, err := open(d)
		if err != nil {
			return nil, err
		}
		return &pollingFenced{Fenced: l.(*zoo.Fenced), rdb: d.Redis, prefix: d.Prefix}, nil
	}
	if err := reg.Add(e); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestPromptnessCatchesAPollingHandoff: a lock whose release deletes the
// lock under its line, so that its waiters are served by their own look,
// is caught by the promptness property without any fault, on each of the
// first seeds (its waiters, back in line only at their next look, are
// overtaken by newcomers until they give up: waiter liveness catches it
// too); the shipped lock, unaltered, is prompt on 100 seeds (10 with
// -short).
func TestPromptnessCatchesAPollingHandoff(t *testing.T) {
	reg := pollingRegistry(t)
	for seed := uint64(1); seed <= 3; seed++ {
		r := sim.Run(t, sim.Scenario{Locks: reg, Lock: "fenced-polling", Seed: seed})
		p := r.Check.Of(contract.PropPromptness)
		if p.Verdict != contract.Violated || len(p.Violations) == 0 || p.Violations[0].Rule != "handoff-late" {
			t.Errorf("seed %d: the polling lock's promptness %s, want violated (handoff-late): %s", seed, p.Verdict, p.Explanation)
			continue
		}
		t.Logf("seed %d: %s (waiter liveness %s)", seed, p.Violations[0].Explanation, r.Check.Of(contract.PropLiveness).Verdict)
	}
	seeds := uint64(100)
	if testing.Short() {
		seeds = 10
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		r := sim.Run(t, sim.Scenario{Locks: reg, Lock: zoo.FencedName, Seed: seed})
		if p := r.Check.Of(contract.PropPromptness); p.Verdict != contract.OK {
			t.Errorf("seed %d: the shipped lock's promptness %s, want ok: %s", seed, p.Verdict, p.Explanation)
		}
	}
}
