package zoo_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// redlockDeps returns locker.Deps over fresh clients of ps (no pooled connections
// to servers killed earlier).
func redlockDeps(t *testing.T, ps []*redisproc.Process) locker.Deps {
	t.Helper()
	var cs []redis.UniversalClient
	for _, p := range ps {
		cs = append(cs, newClient(t, p))
	}
	return locker.Deps{Redlock: cs}
}

// holders returns how many of ps hold key.
func holders(t *testing.T, ps []*redisproc.Process, key string) int {
	t.Helper()
	n := 0
	for _, p := range ps {
		if p.Exited() {
			continue
		}
		if c, _ := newClient(t, p).Exists(tctx(t), key).Result(); c == 1 {
			n++
		}
	}
	return n
}

func TestRedlock(t *testing.T) {
	ps := []*redisproc.Process{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	const ttl = 10 * time.Second
	const per = 2 * time.Second // generous: the machine is loaded

	a := openRedlock(t, redlockDeps(t, ps), per)
	b := openRedlock(t, redlockDeps(t, ps), per)
	la := acquire(t, a, "k", ttl)
	if _, ok := la.Fence(); ok {
		t.Fatal("redlock has no fencing")
	}
	if n := holders(t, ps, "k"); n != 3 {
		t.Fatalf("held on %d instances, want 3", n)
	}
	refused(t, b, "k", ttl)
	if n := holders(t, ps, "k"); n != 3 {
		t.Fatalf("after a refused attempt held on %d, want 3 (the loser must not unlock the holder)", n)
	}
	if err := la.Renew(tctx(t), ttl); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := holders(t, ps, "k"); n != 0 {
		t.Fatalf("after release held on %d, want 0", n)
	}
	if err := la.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second release: %v, want locker.ErrNotHeld", err)
	}

	// A minority held by another: a majority is still free.
	if err := newClient(t, ps[0]).Set(tctx(t), "m", "someone", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	lm := acquire(t, a, "m", ttl)
	if err := lm.Release(tctx(t)); err != nil {
		t.Fatalf("release with a minority held by another: %v", err)
	}
	// A majority held by another: refused, and the attempt's own key is unlocked.
	if err := newClient(t, ps[1]).Set(tctx(t), "m", "someone", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	refused(t, a, "m", ttl)
	if c, _ := newClient(t, ps[2]).Exists(tctx(t), "m").Result(); c != 0 {
		t.Fatal("a failed attempt left its key on an instance")
	}

	// One instance down: still a majority.
	if err := ps[2].Kill(); err != nil {
		t.Fatal(err)
	}
	a = openRedlock(t, redlockDeps(t, ps), per)
	b = openRedlock(t, redlockDeps(t, ps), per)
	la = acquire(t, a, "k2", ttl)
	refused(t, b, "k2", ttl)
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release with one down: %v", err)
	}

	// Two down: no majority, a definite failure (nothing was sent to the dead ones).
	if err := ps[1].Kill(); err != nil {
		t.Fatal(err)
	}
	a = openRedlock(t, redlockDeps(t, ps), per)
	_, err := a.TryAcquire(tctx(t), "k3", ttl)
	if !errors.Is(err, locker.ErrNotAcquired) || errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("acquire with two of three down: %v, want locker.ErrNotAcquired", err)
	}
	if n := holders(t, ps, "k3"); n != 0 {
		t.Fatalf("failed acquire left the key on %d live instances", n)
	}
}

// TestRedlockPausedInstance: an instance that does not answer within the
// per-instance timeout is skipped; the majority still grants the lock.
func TestRedlockPausedInstance(t *testing.T) {
	ps := []*redisproc.Process{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	t.Cleanup(func() { _ = ps[0].Resume() })
	a := openRedlock(t, redlockDeps(t, ps), 300*time.Millisecond)
	if err := ps[0].Pause(); err != nil {
		t.Fatal(err)
	}
	la := acquire(t, a, "k", 10*time.Second)
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// openRedlock opens the redlock specimen with a per-instance reply timeout.
func openRedlock(t *testing.T, d locker.Deps, timeout time.Duration) locker.Locker {
	t.Helper()
	r, err := locker.NewRegistry(zoo.RedlockEntry(zoo.RedlockOptions{Timeout: timeout}))
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Open("redlock", d)
	if err != nil {
		t.Fatalf("open redlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestRedlockOnOneCluster says what Redlock across the three masters of
// one Redis Cluster gives, a known anti-pattern: no lock at all. The
// masters are not independent instances of one key but shards of one
// key space, and the key lives on one of them: a client per master gets
// a MOVED from the two that do not serve its slot, and one cluster
// client passed as all three instances sends the three SET NX to the one
// master that does, where only the first succeeds. Either way one vote of
// three: every acquire is refused (liveness, not safety, is what breaks).
func TestRedlockOnOneCluster(t *testing.T) {
	c := redistest.StartCluster(t, redisproc.ClusterConfig{})
	perMaster := locker.Deps{}
	for _, n := range c.Nodes[:c.Masters] {
		perMaster.Redlock = append(perMaster.Redlock, newClient(t, n))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	oneCluster := locker.Deps{Redlock: []redis.UniversalClient{cc, cc, cc}}
	for name, d := range map[string]locker.Deps{"a client per master": perMaster, "one cluster client thrice": oneCluster} {
		l := openRedlock(t, d, time.Second)
		for _, key := range []string{"a", "b", "c", "d"} {
			ls, err := l.TryAcquire(tctx(t), key, 10*time.Second)
			if err == nil || !errors.Is(err, locker.ErrNotAcquired) {
				t.Errorf("%s: acquire %q: lease %v, err %v; want it refused (one vote of three)", name, key, ls, err)
			}
			if err != nil && !strings.Contains(err.Error(), "1 of 3 instances") {
				t.Errorf("%s: acquire %q: %v; want 1 of 3 instances", name, key, err)
			}
		}
	}
	// The same clients reach the key: a plain SET through the cluster
	// client works, so the refusals are Redlock's arithmetic, not a
	// broken cluster.
	if err := cc.Set(tctx(t), "a", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockPartialReleaseIsUnknown: a release that deletes the key on
// some masters but not a majority (here the key was already gone from two
// of three, as after another release of the same lease at once) changed
// what it found: it says the outcome is unknown, not that it surely had
// no effect (two releases at once each deleted a minority and together
// freed the key, and both said not held: the cluster matrix under load,
// 2026-12-07). A release that deletes nowhere is not held.
func TestRedlockPartialReleaseIsUnknown(t *testing.T) {
	ps := []*redisproc.Process{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	a := openRedlock(t, redlockDeps(t, ps), 300*time.Millisecond)
	la := acquire(t, a, "k", 10*time.Second)
	for _, p := range ps[1:] {
		if err := newClient(t, p).Del(tctx(t), "k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := la.Release(tctx(t))
	if !errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("a release done on 1 of 3: %v, want locker.ErrUnknownOutcome", err)
	}
	lb := acquire(t, a, "j", 10*time.Second)
	for _, p := range ps {
		if err := newClient(t, p).Del(tctx(t), "j").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lb.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) || errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("a release done nowhere: %v, want locker.ErrNotHeld", err)
	}
}
