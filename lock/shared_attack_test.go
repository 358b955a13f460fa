package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Attacks on the read-write lock and the semaphore (commit 22e95e7).
// TestAttackShared_* that fail show a defect; the others are attacks that
// held.

// TestAttackShared_UpgradeRefusalLeavesItsPlaceWithoutAWakeUp: a queued
// writer refused as an upgrade ({-2}: its owner got a read hold while it
// waited) leaves its place in the script, but publishes nothing. A reader
// that waited only behind that writer is not told: it sleeps until its
// next refresh (QueueTTL/3) although it could enter at once. The contract
// (shared_scripts.go): "A change that may let somebody in (a hold ended,
// a place left) publishes "" on the channel when somebody is in line".
func TestAttackShared_UpgradeRefusalLeavesItsPlaceWithoutAWakeUp(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: time.Minute, QueueTTL: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := keysOf("k", ":rw")
	// P holds the write hold; owner o queues a read, then a write.
	p := sharedAttempt(c, keys, "p", false, "w", 1, 0, newToken(c.rnd))
	if res, err := p.try(ctx, "t"); err != nil || !res.ok {
		t.Fatalf("p's write: %+v, %v", res, err)
	}
	oRead := sharedAttempt(c, keys, "o", true, "r", 1, 0, newToken(c.rnd))
	if res, err := oRead.try(ctx, "w"); err != nil || res.ok {
		t.Fatalf("o's read beside p's write: %+v, %v; want in line", res, err)
	}
	oWrite := sharedAttempt(c, keys, "o", true, "w", 1, 0, newToken(c.rnd))
	if res, err := oWrite.try(ctx, "w"); err != nil || res.ok {
		t.Fatalf("o's write: %+v, %v; want in line", res, err)
	}
	// Q, a reader of another owner, waits behind o's writer.
	type result struct {
		l   *Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.RWLock("k").RLock(ctx)
		got <- result{l, err, time.Now()}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.ZCard(ctx, keys.Queue).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("line: %d places, want 3 (o's read, o's write, q)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // q subscribed, sleeping
	// P releases (publishes ""): q looks, blocked by o's writer ahead.
	if err := p.end(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	// o's read is admitted; q's next look sees its hold (60s) and sleeps
	// until its refresh (10s).
	if res, err := oRead.try(ctx, "w"); err != nil || !res.ok {
		t.Fatalf("o's read once p released: %+v, %v", res, err)
	}
	time.Sleep(500 * time.Millisecond)
	// o's queued write is refused as an upgrade: its place is left.
	if res, err := oWrite.try(ctx, "w"); err != nil || !res.upgrade {
		t.Fatalf("o's write while o reads: %+v, %v; want refused as an upgrade", res, err)
	}
	left := time.Now()
	if n, _ := rdb.ZCard(ctx, keys.Queue).Result(); n > 1 {
		t.Fatalf("line after the refusal: %d places, want q's alone (or none: q woke and entered)", n)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("q: %v", r.err)
		}
		defer r.l.Release(ctx)
		t.Logf("q admitted %v after the writer ahead left", r.at.Sub(left).Round(time.Millisecond))
	case <-time.After(2 * time.Second):
		r := <-got
		if r.err != nil {
			t.Fatalf("q: %v", r.err)
		}
		_ = r.l.Release(ctx)
		t.Fatalf("q, a reader with nothing but a refused writer ahead of it, was admitted %v after that writer left its place "+
			"(nobody woke it: it waited for its refresh, QueueTTL/3 = 10s); want at once",
			r.at.Sub(left).Round(time.Millisecond))
	}
}

// TestAttackShared_MutexNamedRWColonSharesTheRWLocksKeys: RWLock("x") kept
// its holds at RedisKeys("rw:x"), which was exactly the mutex "rw:x"'s keys
// (and Semaphore("x")'s those of the mutex "sem:x"). Each kind's scripts
// read the other's hash as free: the mutex was granted beside a read hold,
// a write hold beside the mutex, and the write acquire deleted the mutex's
// hold record. Now the kinds' keys are apart (keysOf): the mutex "rw:x"
// and RWLock("x") are two locks, each granted and each hold intact beside
// the other.
func TestAttackShared_MutexNamedRWColonSharesTheRWLocksKeys(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"rw:x", "sem:x"} {
		var other *Lease
		var err error
		if name == "rw:x" {
			other, err = c.RWLock("x").TryLock(ctx)
		} else {
			s, _ := c.Semaphore("x", 1)
			other, err = s.TryAcquire(ctx, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("the mutex %q beside the %s of \"x\": %v (they are two locks)", name, other.Mode(), err)
		}
		if keysOf("x", ":rw") == RedisKeys(name) || keysOf("x", ":sem") == RedisKeys(name) {
			t.Fatalf("the mutex %q has a shared kind's keys", name)
		}
		for _, l := range []*Lease{m, other} {
			if _, err := l.TTLLeft(ctx); err != nil {
				t.Errorf("%s hold after the other kind's acquire: %v", l.Mode(), err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("release of the %s hold: %v", l.Mode(), err)
			}
		}
	}
}

// TestAttackShared_RequestsTwiceLateOrConcurrent (held): a reentry that
// lands twice makes one hold; a reentry landing after its cleanup takes
// nothing; a leave/undo landing after the hold's release ends nothing of
// the owner's other holds; a renewal landing after the release extends
// nothing; Release and Renew, Release and Reenter at once on one lease.
func TestAttackShared_RequestsTwiceLateOrConcurrent(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rw := c.RWLock("k")
	keys := rw.keys
	w, err := rw.Lock(ctx, WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	reenter := func(id string) (any, error) {
		return c.run(ctx, sharedReenterScript, []string{keys.Lock, keys.Gone}, w.owner, formatFence(w.fence), int64(10000), id, "", w.id)
	}
	id := newToken(c.rnd)
	for i := 0; i < 2; i++ {
		if n, err := reenter(id); err != nil || n != int64(2) {
			t.Fatalf("a reentry delivered %d times: %v, %v; want 2 holds", i+1, n, err)
		}
	}
	// Its cleanup (bury + end), then the same reentry late.
	a := newAttempt(c, "k", keys, w.owner, "o", callConfig{ttl: 10 * time.Second, owner: "o", ownerSet: true}, "reenter")
	a.proto, a.mode, a.permits = &sharedProto, "w", 1
	a.setID(id)
	if err := a.end(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	if n, err := reenter(id); err != nil || n != int64(0) {
		t.Fatalf("a reentry landing after its cleanup: %v, %v; want 0", n, err)
	}
	if n, _ := c.sharedHolds(ctx, "k", keys, "o"); n != 1 {
		t.Fatalf("o's holds: %d, want the outer one", n)
	}
	// A downgrade, then the write's undo landing twice after the release.
	r, err := rw.RLock(ctx, WithOwner("o"))
	if err != nil || r.Fence() != w.Fence() {
		t.Fatalf("downgrade: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wa := newAttempt(c, "k", keys, w.owner, "o", callConfig{ttl: 10 * time.Second, owner: "o", ownerSet: true}, "acquire")
	wa.proto, wa.mode, wa.permits = &sharedProto, "w", 1
	wa.setID(w.id)
	for i := 0; i < 2; i++ {
		if err := wa.end(ctx, true, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.TTLLeft(ctx); err != nil {
		t.Fatalf("the downgraded read hold after late undos of the write: %v", err)
	}
	if reply, err := c.run(ctx, sharedRenewScript, []string{keys.Lock, keys.Gone}, w.owner, int64(60000), formatFence(w.fence), w.id+".9", w.id); err != nil || reply != int64(0) {
		t.Fatalf("a late renewal of the released write hold: %v, %v", reply, err)
	}
	// Release with Renew / Reenter at once, many times.
	for i := 0; i < 30; i++ {
		l, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var nested *Lease
		wg.Add(3)
		go func() { defer wg.Done(); _ = l.Release(ctx) }()
		go func() { defer wg.Done(); _ = l.Renew(ctx) }()
		go func() { defer wg.Done(); nested, _ = l.Reenter(ctx) }()
		wg.Wait()
		if nested != nil {
			if err := nested.Release(ctx); err != nil {
				t.Fatalf("a nested hold made beside the release: %v", err)
			}
		}
		select {
		case <-l.Lost():
			t.Fatalf("a released lease reported lost")
		default:
		}
	}
	_ = r.Release(ctx)
	info, err := rw.Inspect(ctx)
	if err != nil || len(info.Holds) != 0 || info.Waiting != 0 {
		t.Fatalf("after everything: %+v, %v; want nothing", info, err)
	}
}

// TestAttackShared_ChurnKeepsExclusionAndN (held): waiters that give up at
// random (their leave and cleanup racing the others' acquires), readers,
// writers, downgrades and a semaphore: a write hold never stands beside
// another hold, never more than N permits, every call returns within its
// context (plus the leave's budget), and nothing is left behind.
func TestAttackShared_ChurnKeepsExclusionAndN(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: 5 * time.Second})
	rw := c.RWLock("churn")
	sem, _ := c.Semaphore("churn", 3)
	var readers, writers, permits atomic.Int32
	var mu sync.Mutex
	var bad []string
	fail := func(s string) { mu.Lock(); bad = append(bad, s); mu.Unlock() }
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			for it := 0; it < 25; it++ {
				limit := time.Duration(5+rnd.IntN(60)) * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				called := time.Now()
				var l *Lease
				var err error
				kind := rnd.IntN(3)
				k := 1 + rnd.IntN(3)
				switch kind {
				case 0:
					l, err = rw.RLock(ctx)
				case 1:
					l, err = rw.Lock(ctx, WithOwner("w"+string(rune('a'+g))))
				default:
					l, err = sem.Acquire(ctx, k)
				}
				if took := time.Since(called); took > limit+300*time.Millisecond {
					fail("a call returned " + took.String() + " after it was called with " + limit.String())
				}
				cancel()
				if err != nil {
					if !errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrUnknownOutcome) {
						fail("acquire: " + err.Error())
					}
					continue
				}
				switch kind {
				case 0:
					if readers.Add(1); writers.Load() > 0 {
						fail("a read hold beside a write hold")
					}
				case 1:
					if writers.Add(1) > 1 || readers.Load() > 0 {
						fail("a write hold beside another hold")
					}
				default:
					if n := permits.Add(int32(k)); n > 3 {
						fail("more than 3 permits out")
					}
				}
				time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
				var down *Lease
				if kind == 1 && rnd.IntN(2) == 0 {
					rctx, rc := context.WithTimeout(context.Background(), time.Second)
					down, err = rw.RLock(rctx, WithOwner(l.Owner()))
					rc()
					if err != nil {
						fail("downgrade: " + err.Error())
					}
				}
				switch kind {
				case 0:
					readers.Add(-1)
				case 1:
					writers.Add(-1)
				default:
					permits.Add(-int32(k))
				}
				rctx, rc := context.WithTimeout(context.Background(), time.Second)
				if down != nil {
					readers.Add(1)
				}
				if err := l.Release(rctx); err != nil {
					fail("release: " + err.Error())
				}
				if down != nil {
					readers.Add(-1)
					if err := down.Release(rctx); err != nil {
						fail("release of the downgraded hold: " + err.Error())
					}
				}
				rc()
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.Sleep(200 * time.Millisecond) // background cleanups
	for _, info := range []func(context.Context) (SharedInfo, error){rw.Inspect, sem.Inspect} {
		i, err := info(ctx)
		if err != nil || len(i.Holds) != 0 || i.Waiting != 0 {
			t.Errorf("left behind: %+v, %v", i, err)
		}
	}
}
