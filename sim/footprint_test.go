package sim_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// leakyFenced is the shipped lock behind an adapter that leaks, as an
// adapter that keeps an audit of its holders for operators does when it
// never cleans it up: after each acquire that got the lock it records the
// hold in a hash beside the lock's keys ("{key}:audit", the lock's hash
// tag), and nothing ever deletes it. Its Footprint measures the lock's keys
// and the audit; its bound is the shipped lock's. Package lock is
// unchanged: every call goes through zoo.Fenced.
type leakyFenced struct {
	*zoo.Fenced
	rdb    redis.UniversalClient
	prefix string
	n      int
}

func (l *leakyFenced) audit(key string) string { return lock.RedisKeys(l.prefix+key).Lock + ":audit" }

// audited records a hold got from an acquire that returned lease, err.
func (l *leakyFenced) audited(ctx context.Context, key string, lease locker.Lease, err error) (locker.Lease, error) {
	if err == nil {
		l.n++
		fence, _ := lease.Fence()
		_ = l.rdb.HSet(context.WithoutCancel(ctx), l.audit(key), strconv.FormatUint(fence, 10)+"."+strconv.Itoa(l.n), "held").Err()
	}
	return lease, err
}

func (l *leakyFenced) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	lease, err := l.Fenced.TryAcquire(ctx, key, ttl)
	return l.audited(ctx, key, lease, err)
}

func (l *leakyFenced) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	lease, err := l.Fenced.Acquire(ctx, key, ttl)
	return l.audited(ctx, key, lease, err)
}

func (l *leakyFenced) AcquireInLine(ctx context.Context, key string, ttl time.Duration, inLine func()) (locker.Lease, error) {
	lease, err := l.Fenced.AcquireInLine(ctx, key, ttl, inLine)
	return l.audited(ctx, key, lease, err)
}

func (l *leakyFenced) AcquireAs(ctx context.Context, key string, ttl time.Duration, owner string, wait bool, inLine func()) (locker.Lease, error) {
	lease, err := l.Fenced.AcquireAs(ctx, key, ttl, owner, wait, inLine)
	return l.audited(ctx, key, lease, err)
}

func (l *leakyFenced) AcquireRetry(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	lease, err := l.Fenced.AcquireRetry(ctx, key, ttl)
	return l.audited(ctx, key, lease, err)
}

// Footprint is the lock's keys' and the audit's.
func (l *leakyFenced) Footprint(ctx context.Context, key string) (locker.Footprint, error) {
	fp, err := l.Fenced.Footprint(ctx, key)
	if err != nil {
		return fp, err
	}
	n, err := l.rdb.HLen(ctx, l.audit(key)).Result()
	if err != nil {
		return fp, locker.ErrUnknownOutcome
	}
	fp.Records += n
	return fp, nil
}

// leakyRegistry is the built-in locks and "fenced-leaky", the shipped
// lock's entry (its bound too) opening leakyFenced.
func leakyRegistry(t *testing.T) *locker.Registry {
	t.Helper()
	reg := zoo.Builtin()
	e, ok := reg.Lookup(zoo.FencedName)
	if !ok || e.Footprint == nil {
		t.Fatal("the shipped lock states no footprint bound")
	}
	open := e.Open
	e.Name = "fenced-leaky"
	e.Open = func(d locker.Deps) (locker.Locker, error) {
		l, err := open(d)
		if err != nil {
			return nil, err
		}
		return &leakyFenced{Fenced: l.(*zoo.Fenced), rdb: d.Redis, prefix: d.Prefix}, nil
	}
	if err := reg.Add(e); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestFootprintCatchesALeak: the footprint property finds a real leak, a
// record left in Redis by every hold, on the seeds where the shipped lock,
// unaltered, keeps within its bound; and it is sampled during the run and
// after it.
func TestFootprintCatchesALeak(t *testing.T) {
	reg := leakyRegistry(t)
	for seed := uint64(1); seed <= 2; seed++ {
		for _, faults := range [][]sim.Fault{nil, sim.Swarm(seed)} {
			shipped := sim.Run(t, sim.Scenario{Locks: reg, Lock: zoo.FencedName, Seed: seed, Faults: faults})
			if p := shipped.Check.Of(contract.PropFootprint); p.Verdict != contract.OK {
				t.Errorf("seed %d, faults %v: the shipped lock's footprint %s, want ok: %s", seed, names(faults), p.Verdict, p.Explanation)
			}
			samples := 0
			for _, o := range shipped.Ops {
				if o.Kind == history.Footprint && o.Result == history.OK {
					samples++
				}
			}
			if samples < 5 {
				t.Errorf("seed %d: %d ok footprint samples in a 3s run, want one every 250ms and one at the end", seed, samples)
			}
			leaky := sim.Run(t, sim.Scenario{Locks: reg, Lock: "fenced-leaky", Seed: seed, Faults: faults})
			p := leaky.Check.Of(contract.PropFootprint)
			if p.Verdict != contract.Violated || len(p.Violations) == 0 || p.Violations[0].Rule != "footprint-bound" {
				t.Errorf("seed %d, faults %v: the leaky lock's footprint %s, want violated (footprint-bound): %s", seed, names(faults), p.Verdict, p.Explanation)
				continue
			}
			t.Logf("seed %d, faults %v: %s", seed, names(faults), p.Explanation)
		}
	}
}

// TestFootprintNotSampledWithoutBound: a lock that states no bound is not
// sampled (its histories and seeds are what they were), and the property
// is n/a for it.
func TestFootprintNotSampledWithoutBound(t *testing.T) {
	for _, name := range []string{zoo.FencedV2Name, "lua"} {
		r := sim.Run(t, sim.Scenario{Locks: zoo.Builtin(), Lock: name, Seed: 1})
		for _, o := range r.Ops {
			if o.Kind == history.Footprint {
				t.Fatalf("%s: a footprint sample (line %d) of a lock without a bound", name, o.Line)
			}
		}
		if v := r.Check.Of(contract.PropFootprint).Verdict; v != contract.NA {
			t.Errorf("%s: footprint %s, want n/a", name, v)
		}
	}
}

func names(fs []sim.Fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}
