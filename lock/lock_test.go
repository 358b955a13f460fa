package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// bound is the generous limit of every wait in these tests (a loaded 2-core machine).
const bound = 20 * time.Second

func newRDB(t *testing.T, p *redisproc.Process) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newLocks(t *testing.T, rdb redis.UniversalClient, opts lock.Options) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts)
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond (a Redis observation) until it holds or bound passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustAcquire(t *testing.T, c *lock.Client, key string, opts ...lock.AcquireOption) *lock.Lease {
	t.Helper()
	l, err := c.Acquire(ctxT(t), key, opts...)
	if err != nil {
		t.Fatalf("acquire %q: %v", key, err)
	}
	return l
}

func queueLen(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), lock.RedisKeys(key).Queue).Result()
	if err != nil {
		t.Fatalf("zcard: %v", err)
	}
	return n
}

// TestMutualExclusion: many goroutines on several clients increment a counter
// non-atomically (GET, then SET) under the lock; the count ends exact, no two
// holders overlap, and fences strictly increase from holder to holder.
func TestMutualExclusion(t *testing.T) {
	p := redistest.Start(t)
	const clients, perClient, iters = 3, 6, 12
	data := newRDB(t, p)
	var (
		inside   atomic.Int32
		mu       sync.Mutex
		lastFnc  uint64
		failures []string
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for i := 0; i < clients; i++ {
		c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
		for g := 0; g < perClient; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				for it := 0; it < iters; it++ {
					l, err := c.Acquire(ctx, "counter")
					if err != nil {
						fail("acquire: %v", err)
						return
					}
					if n := inside.Add(1); n != 1 {
						fail("%d holders at once", n)
					}
					mu.Lock()
					if l.Fence() <= lastFnc {
						failures = append(failures, fmt.Sprintf("fence %d after %d", l.Fence(), lastFnc))
					}
					lastFnc = l.Fence()
					mu.Unlock()
					v, err := data.Get(ctx, "count").Int()
					if err != nil && !errors.Is(err, redis.Nil) {
						fail("get: %v", err)
					}
					if err := data.Set(ctx, "count", v+1, 0).Err(); err != nil {
						fail("set: %v", err)
					}
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						fail("release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	got, err := data.Get(context.Background(), "count").Int()
	if err != nil {
		t.Fatal(err)
	}
	if want := clients * perClient * iters; got != want {
		t.Fatalf("counter = %d, want %d: an update was lost", got, want)
	}
}

// TestNonOwnerRefused: once another owner holds the key, the old lease can
// neither release nor renew it, and the new owner keeps it.
func TestNonOwnerRefused(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: 10 * time.Second})
	l := mustAcquire(t, c, "k")
	keys := lock.RedisKeys("k")
	// Another owner takes the lock behind the lease's back.
	if err := rdb.HSet(ctxT(t), keys.Lock, "o", "intruder").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("renew by non-owner: err = %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("a renew that found the lock taken did not mark the lease lost")
	}
	if !errors.Is(context.Cause(l.Context()), lock.ErrLost) {
		t.Fatalf("lease context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release by non-owner: err = %v, want ErrNotHeld", err)
	}
	if o, err := rdb.HGet(ctxT(t), keys.Lock, "o").Result(); err != nil || o != "intruder" {
		t.Fatalf("owner after refused release = %q, %v; want intruder", o, err)
	}
	// A caller claiming a foreign owner token is no owner either.
	if _, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner("someone")); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-acquire while held: err = %v, want ErrNotAcquired", err)
	}
}

// TestExpiryThenTakeover: a lease without watchdog is lost at its validity
// deadline, the key expires, another client takes it with a higher fence,
// and the first lease's release and renew are refused.
func TestExpiryThenTakeover(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	a := newLocks(t, rdb, lock.Options{TTL: 50 * time.Millisecond})
	b := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	la := mustAcquire(t, a, "k")
	if pttl := rdb.PTTL(ctxT(t), lock.RedisKeys("k").Lock).Val(); pttl <= 0 || pttl > 50*time.Millisecond {
		t.Fatalf("PTTL of the lock = %v, want in (0, 50ms]", pttl)
	}
	select {
	case <-la.Lost():
	case <-time.After(bound):
		t.Fatal("lease without watchdog never reported its expiry")
	}
	lb := mustAcquire(t, b, "k") // waits for the key's PTTL
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence of the taker %d <= fence of the expired holder %d", lb.Fence(), la.Fence())
	}
	if err := la.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("renew after takeover: %v, want ErrNotHeld", err)
	}
	if err := la.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after takeover: %v, want ErrNotHeld", err)
	}
	if _, err := a.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the expired holder's release freed the taker's lock: try-acquire err = %v", err)
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("release by the taker: %v", err)
	}
	if err := lb.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
}

// TestPerCallTTL: WithTTL overrides Options.TTL.
func TestPerCallTTL(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	l := mustAcquire(t, c, "k", lock.WithTTL(3*time.Second))
	defer l.Release(context.Background())
	pttl := rdb.PTTL(ctxT(t), lock.RedisKeys("k").Lock).Val()
	if pttl <= 0 || pttl > 3*time.Second {
		t.Fatalf("PTTL = %v, want in (0, 3s]", pttl)
	}
	if l.TTL() != 3*time.Second {
		t.Fatalf("lease TTL = %v", l.TTL())
	}
	if time.Until(l.ValidUntil()) > 3*time.Second {
		t.Fatalf("ValidUntil %v is beyond the TTL", time.Until(l.ValidUntil()))
	}
}

// TestWatchdog: the watchdog keeps a lease alive for many TTLs, and signals
// loss (channel and context) when the key is deleted behind its back.
func TestWatchdog(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	// Renewals are counted through OnRenew, not timed: the lease must live
	// on through several of them, whatever the scheduling delays.
	ttl := 900 * time.Millisecond
	var renewed atomic.Int32
	c := newLocks(t, rdb, lock.Options{TTL: ttl, Watchdog: true,
		OnRenew: func(key string, fence uint64, d time.Duration) func(error) {
			if key != "k" || d != ttl {
				t.Errorf("OnRenew(%q, %d, %v); want k and the TTL %v", key, fence, d, ttl)
			}
			return func(err error) {
				if err == nil {
					renewed.Add(1)
				}
			}
		}})
	other := newLocks(t, newRDB(t, p), lock.Options{})
	l := mustAcquire(t, c, "k")
	firstValid := l.ValidUntil()
	eventually(t, "4 renewals (more than a TTL)", func() bool { return renewed.Load() >= 4 })
	select {
	case <-l.Lost():
		t.Fatalf("lease lost while the watchdog renews it: %v", context.Cause(l.Context()))
	default:
	}
	if !l.ValidUntil().After(firstValid) {
		t.Fatal("ValidUntil did not move although renewals succeeded")
	}
	if _, err := other.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another client acquired a watched lease after 4 renewals: err = %v", err)
	}
	if err := rdb.Del(ctxT(t), lock.RedisKeys("k").Lock).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(bound):
		t.Fatal("watchdog never reported the deleted key")
	}
	select {
	case <-l.Context().Done():
	case <-time.After(bound):
		t.Fatal("lease context not canceled on loss")
	}
	if !errors.Is(context.Cause(l.Context()), lock.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("renew of a lost lease: %v, want ErrNotHeld", err)
	}
}

// TestWatchdogStoppedByRelease: once released, a lease's watchdog sends no
// renewal (counted through OnRenew over several renewal periods) and never
// reports loss.
func TestWatchdogStoppedByRelease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var renewals atomic.Int32
	c := newLocks(t, rdb, lock.Options{TTL: 150 * time.Millisecond, Watchdog: true,
		OnRenew: func(string, uint64, time.Duration) func(error) { renewals.Add(1); return nil }})
	l := mustAcquire(t, c, "k")
	eventually(t, "a first renewal", func() bool { return renewals.Load() >= 1 })
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(l.Context()), lock.ErrReleased) {
		t.Fatalf("cause = %v, want ErrReleased", context.Cause(l.Context()))
	}
	at := renewals.Load()
	time.Sleep(4 * 50 * time.Millisecond) // four renewal periods (TTL/3)
	if n := renewals.Load(); n != at {
		t.Fatalf("%d renewals after the release", n-at)
	}
	if n := rdb.Exists(ctxT(t), lock.RedisKeys("k").Lock).Val(); n != 0 {
		t.Fatal("lock key exists after release")
	}
	select {
	case <-l.Lost():
		t.Fatal("a released lease reported loss")
	default:
	}
}

// TestCloseStopsWatchdogs: Client.Close stops the watchdogs of its leases
// without releasing them (a process that goes away): no renewal after it,
// and the lock expires with its TTL. StopWatchdog does it for one lease.
func TestCloseStopsWatchdogs(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var renewals atomic.Int32
	c, err := lock.New(rdb, lock.Options{TTL: 300 * time.Millisecond, Watchdog: true,
		OnRenew: func(string, uint64, time.Duration) func(error) { renewals.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, c, "k")
	one := mustAcquire(t, c, "one")
	eventually(t, "renewals of both", func() bool { return renewals.Load() >= 4 })
	one.StopWatchdog()
	eventually(t, "the lease whose watchdog stopped to expire", func() bool {
		return rdb.Exists(context.Background(), lock.RedisKeys("one").Lock).Val() == 0
	})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := renewals.Load()
	eventually(t, "the lock to expire after Close", func() bool {
		return rdb.Exists(context.Background(), lock.RedisKeys("k").Lock).Val() == 0
	})
	if n := renewals.Load(); n != at {
		t.Fatalf("%d renewals after Close", n-at)
	}
	if l.Context().Err() == nil {
		select {
		case <-l.Lost():
		case <-time.After(bound):
			t.Fatal("the lease whose client closed never reported its expiry")
		}
	}
}

// TestReentrancy: the same owner acquires again, the hold count grows, the
// fence stays, and the lock is freed only when every hold is released.
func TestReentrancy(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: 10 * time.Second})
	other := newLocks(t, newRDB(t, p), lock.Options{})
	keys := lock.RedisKeys("k")
	l1 := mustAcquire(t, c, "k")
	l2, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner(l1.Owner()))
	if err != nil {
		t.Fatalf("reentrant try-acquire: %v", err)
	}
	l3 := mustAcquire(t, c, "k", lock.WithOwner(l1.Owner()))
	if l2.Fence() != l1.Fence() || l3.Fence() != l1.Fence() {
		t.Fatalf("fences %d %d %d: a reentrant hold must keep its owner's fence", l1.Fence(), l2.Fence(), l3.Fence())
	}
	if l1.Holds() != 1 || l2.Holds() != 2 || l3.Holds() != 3 {
		t.Fatalf("holds %d %d %d, want 1 2 3", l1.Holds(), l2.Holds(), l3.Holds())
	}
	if n := rdb.HGet(ctxT(t), keys.Lock, "n").Val(); n != "3" {
		t.Fatalf("hold count in Redis = %q, want 3", n)
	}
	for i, l := range []*lock.Lease{l1, l3} {
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if _, err := other.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("lock freed with holds left (after release %d): %v", i, err)
		}
	}
	if err := l1.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("a lease released twice decremented again: %v", err)
	}
	if n := rdb.HGet(ctxT(t), keys.Lock, "n").Val(); n != "1" {
		t.Fatalf("hold count = %q, want 1", n)
	}
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	lo, err := other.TryAcquire(ctxT(t), "k")
	if err != nil {
		t.Fatalf("lock not freed at zero holds: %v", err)
	}
	if lo.Fence() <= l1.Fence() {
		t.Fatalf("fence %d after %d", lo.Fence(), l1.Fence())
	}
	// A fresh (non-reentrant) token never increments: it is a new owner.
	if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("fresh owner acquired a held lock: %v", err)
	}
}

// TestWaiterWakesOnRelease: a waiter wakes on the release's publish. The
// holder's TTL and the waiter's queue refresh are far beyond the waiter's
// deadline, so only the publish can explain the acquire.
func TestWaiterWakesOnRelease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute}
	holder := newLocks(t, rdb, opts)
	waiter := newLocks(t, newRDB(t, p), opts)
	l := mustAcquire(t, holder, "k")
	type result struct {
		l   *lock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		wl, err := waiter.Acquire(ctx, "k")
		got <- result{wl, err}
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	time.Sleep(50 * time.Millisecond) // let its subscription settle (the test also passes without)
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v (TTL %v and queue refresh %v are beyond its %v deadline: it missed the publish)",
			r.err, opts.TTL, opts.QueueTTL/3, bound)
	}
	if r.l.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d", r.l.Fence(), l.Fence())
	}
	if n := queueLen(t, rdb, "k"); n != 0 {
		t.Fatalf("queue length %d after the waiter acquired", n)
	}
}

// TestFIFO: waiters are served in arrival order, and a holder that releases
// and asks again immediately queues behind them.
func TestFIFO(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute}
	c := newLocks(t, rdb, opts)
	l := mustAcquire(t, c, "k")
	got := make([]chan *lock.Lease, 2)
	for i := range got {
		got[i] = make(chan *lock.Lease, 1)
		wc := newLocks(t, newRDB(t, p), opts)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			wl, err := wc.Acquire(ctx, "k")
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			got[i] <- wl
		}()
		eventually(t, fmt.Sprintf("waiter %d to queue", i), func() bool { return queueLen(t, rdb, "k") == int64(i+1) })
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a greedy re-acquire jumped the queue: err = %v", err)
	}
	first := <-got[0]
	if first == nil {
		t.FailNow()
	}
	select {
	case <-got[1]:
		t.Fatal("second waiter acquired while the first holds the lock")
	default:
	}
	if err := first.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	second := <-got[1]
	if second == nil {
		t.FailNow()
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d", second.Fence(), first.Fence())
	}
	_ = second.Release(ctxT(t))
}

// TestCrashedWaiterExpires: a waiter that stops refreshing its place (crash)
// is dropped after QueueTTL, so it cannot block the lock forever.
func TestCrashedWaiterExpires(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	// A crashed waiter's leftovers: first in line, place valid 200ms more.
	now := time.Now()
	if err := rdb.ZAdd(ctxT(t), keys.Queue, redis.Z{Score: 1, Member: "60000:ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctxT(t), keys.QueueDeadlines, redis.Z{Score: float64(now.Add(200 * time.Millisecond).UnixMilli()), Member: "60000:ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	c := newLocks(t, rdb, lock.Options{TTL: time.Second})
	if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-acquire jumped a live waiter: %v", err)
	}
	l := mustAcquire(t, c, "k") // served once the ghost's place expires
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestCancelWhileWaiting: a waiter whose ctx is canceled or times out returns
// the ctx error and leaves the queue.
func TestCancelWhileWaiting(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute}
	c := newLocks(t, rdb, opts)
	l := mustAcquire(t, c, "k")
	defer l.Release(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Acquire(ctx, "k"); errc <- err }()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: err = %v, want context.Canceled", err)
	}
	leftLine(t, rdb, err, "canceled")

	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	_, err = c.Acquire(dctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past deadline: err = %v, want context.DeadlineExceeded", err)
	}
	leftLine(t, rdb, err, "timed-out")
}

// leftLine checks that a waiter that gave up with err left the queue of
// "k": at once when err says ErrNotAcquired (the leave is done), or, when
// the leave outran its budget on a loaded machine (ErrUnknownOutcome: it
// goes on in the background, as Acquire's doc says), once that is done.
func leftLine(t *testing.T, rdb *redis.Client, err error, who string) {
	t.Helper()
	switch {
	case errors.Is(err, lock.ErrNotAcquired):
		if n := queueLen(t, rdb, "k"); n != 0 {
			t.Fatalf("%s waiter left %d queue entries", who, n)
		}
	case errors.Is(err, lock.ErrUnknownOutcome):
		eventually(t, who+" waiter's background leave", func() bool { return queueLen(t, rdb, "k") == 0 })
	default:
		t.Fatalf("%s waiter: %v, want ErrNotAcquired or ErrUnknownOutcome", who, err)
	}
}

// TestSentinel: the lock works through a Sentinel-backed failover client,
// including a waiter woken by pub/sub.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	redistest.Start(t, "replicaof 127.0.0.1 "+strconv.Itoa(master.Port))
	sentinel := redistest.StartSentinel(t,
		"sentinel monitor m 127.0.0.1 "+strconv.Itoa(master.Port)+" 1",
		"sentinel down-after-milliseconds m 5000")
	newFailover := func() *redis.Client {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{sentinel.Addr}})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	// Timers of a minute or more: only the pub/sub hand-off through Sentinel's
	// master can wake the waiter (another Client: no in-process delivery)
	// within its 5s.
	a := newLocks(t, newFailover(), lock.Options{TTL: time.Minute, QueueTTL: 3 * time.Minute})
	b := newLocks(t, newFailover(), lock.Options{TTL: time.Minute, QueueTTL: 3 * time.Minute})
	la := mustAcquire(t, a, "orders")
	got := make(chan error, 1)
	var lb *lock.Lease
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	go func() {
		var err error
		lb, err = b.Acquire(wctx, "orders")
		got <- err
	}()
	probe := newRDB(t, master)
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, probe, "orders") == 1 })
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter through sentinel: %v", err)
	}
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence %d after %d", lb.Fence(), la.Fence())
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAmbiguousOutcome: with the server paused, an acquire whose deadline
// passes mid-command reports ErrUnknownOutcome (not ErrNotAcquired); after
// the server resumes the key is cleaned up or expires. A release whose
// reply is lost is unknown too, not "not held".
func TestAmbiguousOutcome(t *testing.T) {
	for _, ctxTimeouts := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			testAmbiguousOutcome(t, ctxTimeouts)
		})
	}
}

func testAmbiguousOutcome(t *testing.T, ctxTimeouts bool) {
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: ctxTimeouts})
	t.Cleanup(func() { _ = rdb.Close() })
	probe := newRDB(t, p)
	// A minute: only the lock's cleanup, not expiry, can free the key in time.
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	warm := mustAcquire(t, c, "warm") // scripts cached, connections open
	if err := warm.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := p.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.TryAcquire(ctx, "k")
	cancel()
	if !errors.Is(err, lock.ErrUnknownOutcome) || errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("acquire with lost reply: err = %v, want ErrUnknownOutcome", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unknown outcome does not wrap its cause: %v", err)
	}
	resume()
	// Let the server run what it buffered while paused (the abandoned acquire
	// may run now and take the lock), then the key must go: the cleanup
	// goes on in the background until Redis answers (the TTL is a minute).
	if err := probe.Ping(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	eventually(t, "the ambiguous acquire's key to be cleaned up", func() bool {
		n, err := probe.Exists(context.Background(), lock.RedisKeys("k").Lock).Result()
		return err == nil && n == 0
	})

	l := mustAcquire(t, c, "k2")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed = false
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	err = l.Release(ctx)
	cancel()
	if !errors.Is(err, lock.ErrUnknownOutcome) || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release with lost reply: err = %v, want ErrUnknownOutcome", err)
	}
	// The release may have happened: the lease no longer vouches for
	// itself (the next waiter may hold the lock already), without calling
	// itself lost.
	if l.Context().Err() == nil || !errors.Is(context.Cause(l.Context()), lock.ErrUnknownOutcome) {
		t.Errorf("after a release of unknown outcome Context is live (cause %v); want it done with ErrUnknownOutcome", context.Cause(l.Context()))
	}
	select {
	case <-l.Lost():
		t.Error("a release of unknown outcome closed Lost")
	default:
	}
	resume()
	// It can be retried: the first one happened, or this one does.
	if err := l.Release(ctxT(t)); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("retried release: %v", err)
	}
}

// TestReplicaAcks: with one real replica, asking for one ack succeeds;
// asking for two fails with ErrReplicaAcks and leaves the key released.
func TestReplicaAcks(t *testing.T) {
	master := redistest.Start(t)
	redistest.Start(t, "replicaof 127.0.0.1 "+strconv.Itoa(master.Port))
	rdb := newRDB(t, master)
	eventually(t, "the replica to connect", func() bool {
		info := rdb.Info(context.Background(), "replication").Val()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	one := newLocks(t, rdb, lock.Options{TTL: 10 * time.Second, ReplicaAcks: 1, ReplicaTimeout: 5 * time.Second})
	l := mustAcquire(t, one, "k")
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	two := newLocks(t, rdb, lock.Options{TTL: 10 * time.Second, ReplicaAcks: 2, ReplicaTimeout: 100 * time.Millisecond})
	if _, err := two.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrReplicaAcks) {
		t.Fatalf("2 acks with 1 replica: err = %v, want ErrReplicaAcks", err)
	}
	if n := rdb.Exists(ctxT(t), lock.RedisKeys("k").Lock).Val(); n != 0 {
		t.Fatal("lock left held after ErrReplicaAcks")
	}
}

// TestBadInput: every bad input is an error wrapping ErrInvalid naming the field, never a panic.
func TestBadInput(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var nilClient *redis.Client
	for _, tc := range []struct {
		name, field string
		rdb         redis.UniversalClient
		opts        lock.Options
	}{
		{"nil client", "rdb", nil, lock.Options{}},
		{"typed nil client", "rdb", nilClient, lock.Options{}},
		{"negative TTL", "TTL", rdb, lock.Options{TTL: -time.Second}},
		{"TTL below floor", "TTL", rdb, lock.Options{TTL: 5 * time.Millisecond}},
		{"negative drift", "Drift", rdb, lock.Options{Drift: -0.1}},
		{"drift 1", "Drift", rdb, lock.Options{Drift: 1}},
		{"drift NaN", "Drift", rdb, lock.Options{Drift: math.NaN()}},
		{"negative replica acks", "ReplicaAcks", rdb, lock.Options{ReplicaAcks: -1}},
		{"negative replica timeout", "ReplicaTimeout", rdb, lock.Options{ReplicaTimeout: -1}},
		{"tiny queue TTL", "QueueTTL", rdb, lock.Options{QueueTTL: time.Millisecond}},
		{"drift that leaves nothing of the lease", "Drift", rdb, lock.Options{Drift: 0.999999}},
		{"more replica acks than any deployment", "ReplicaAcks", rdb, lock.Options{ReplicaAcks: 1 << 20}},
		{"tiny hand-off lease", "HandoffTTL", rdb, lock.Options{HandoffTTL: time.Millisecond}},
		{"negative hand-off lease", "HandoffTTL", rdb, lock.Options{HandoffTTL: -time.Second}},
	} {
		_, err := lock.New(tc.rdb, tc.opts)
		if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New with %s: err = %v, want ErrInvalid naming %s", tc.name, err, tc.field)
		}
	}
	c := newLocks(t, rdb, lock.Options{})
	var nilCtx context.Context
	for _, tc := range []struct {
		name, field string
		ctx         context.Context
		key         string
		opts        []lock.AcquireOption
	}{
		{"empty key", "key", ctxT(t), "", nil},
		{"nil ctx", "ctx", nilCtx, "k", nil},
		{"zero WithTTL", "WithTTL", ctxT(t), "k", []lock.AcquireOption{lock.WithTTL(0)}},
		{"negative WithTTL", "WithTTL", ctxT(t), "k", []lock.AcquireOption{lock.WithTTL(-time.Second)}},
		{"WithTTL below floor", "WithTTL", ctxT(t), "k", []lock.AcquireOption{lock.WithTTL(time.Millisecond)}},
		{"empty owner", "WithOwner", ctxT(t), "k", []lock.AcquireOption{lock.WithOwner("")}},
		{"nil option", "option", ctxT(t), "k", []lock.AcquireOption{nil}},
	} {
		for _, try := range []bool{true, false} {
			var err error
			if try {
				_, err = c.TryAcquire(tc.ctx, tc.key, tc.opts...)
			} else {
				_, err = c.Acquire(tc.ctx, tc.key, tc.opts...)
			}
			if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("acquire (try=%v) with %s: err = %v, want ErrInvalid naming %s", try, tc.name, err, tc.field)
			}
		}
	}
	var nilLocks *lock.Client
	if _, err := nilLocks.Acquire(ctxT(t), "k"); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("acquire on nil client: %v", err)
	}
	var nilLease *lock.Lease
	if err := nilLease.Release(ctxT(t)); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("release of nil lease: %v", err)
	}
	if err := nilLease.Renew(ctxT(t)); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("renew of nil lease: %v", err)
	}
	if nilLease.Key() != "" || nilLease.Fence() != 0 || !nilLease.ValidUntil().IsZero() || nilLease.Context().Err() == nil {
		t.Error("nil lease accessors do not report an empty, ended lease")
	}
	select {
	case <-nilLease.Lost():
	default:
		t.Error("nil lease Lost() is not closed")
	}
	l := mustAcquire(t, c, "k")
	if err := l.Release(nilCtx); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "ctx") {
		t.Errorf("release with nil ctx: %v", err)
	}
	if err := l.Renew(nilCtx); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "ctx") {
		t.Errorf("renew with nil ctx: %v", err)
	}
	_ = l.Release(ctxT(t))
}

// TestKeysWithBraces: keys containing hash-tag braces still map every Redis
// name of the lock to one well-formed tag, and work.
func TestKeysWithBraces(t *testing.T) {
	for _, key := range []string{"orders", "a}b", "{x}", "}", "{"} {
		k := lock.RedisKeys(key)
		tag := func(s string) string {
			i := strings.IndexByte(s, '{')
			j := strings.IndexByte(s[i+1:], '}')
			return s[i+1 : i+1+j]
		}
		for _, name := range []string{k.Fence, k.Queue, k.QueueDeadlines} {
			if tag(name) != tag(k.Lock) || tag(name) == "" {
				t.Errorf("key %q: %q and %q have tags %q and %q", key, k.Lock, name, tag(k.Lock), tag(name))
			}
		}
	}
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{})
	l := mustAcquire(t, c, "a}b{")
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestFenceAboveClock: when the fencing counter is ahead of the server clock
// in µs (a counter from a server with a faster clock), the next fences are
// counter+1, counter+2: max(counter+1, server µs), on the uncontended path
// and on a hand-off to a waiter.
func TestFenceAboveClock(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	const ahead = uint64(1) << 52 // far above any µs clock reading today, exact in a Lua number
	if err := rdb.Set(ctxT(t), keys.Fence, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	l := mustAcquire(t, c, "k")
	if l.Fence() != ahead+1 {
		t.Fatalf("fence %d, want counter+1 = %d", l.Fence(), ahead+1)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		w, err := c.Acquire(ctxT(t), "k")
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if w.Fence() != ahead+2 {
		t.Fatalf("hand-off fence %d, want %d", w.Fence(), ahead+2)
	}
	if err := w.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Get(ctxT(t), keys.Fence).Uint64(); err != nil || n != ahead+2 {
		t.Fatalf("counter %d (%v), want %d", n, err, ahead+2)
	}
	// With the counter behind the clock again, the fence is the clock in µs.
	if err := rdb.Set(ctxT(t), keys.Fence, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := rdb.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, c, "k")
	after, err := rdb.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if f := l.Fence(); f < uint64(before.UnixMicro()) || f > uint64(after.UnixMicro()) {
		t.Fatalf("fence %d, want the server clock in µs when it was granted, within [%d, %d]", f, before.UnixMicro(), after.UnixMicro())
	}
	_ = l.Release(ctxT(t))
}

// TestShorterHoldNeverShortensTheLease: a nested hold (WithOwner) or a
// renewal asking for a shorter TTL leaves the lock's expiry where the
// longest hold put it: another client cannot take the key while the outer
// lease's ValidUntil is ahead. (The old scripts PEXPIREd with the caller's
// TTL: 150ms after a 50ms nested hold another client took a lock whose
// outer lease had a minute left.) No timing is asserted: the key's TTL is
// read from Redis.
func TestShorterHoldNeverShortensTheLease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	outer, err := c.TryAcquire(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner(outer.Owner()), lock.WithTTL(50*time.Millisecond))
	if err != nil {
		t.Fatalf("nested acquire: %v", err)
	}
	if inner.Fence() != outer.Fence() || inner.Holds() != 2 {
		t.Fatalf("nested hold: fence %d holds %d; want fence %d, holds 2", inner.Fence(), inner.Holds(), outer.Fence())
	}
	pttl := func() time.Duration {
		d, err := rdb.PTTL(ctxT(t), lock.RedisKeys("k").Lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := pttl(); d < 30*time.Second {
		t.Fatalf("after a 50ms nested hold the lock expires in %v; want the outer lease's minute", d)
	}
	if err := inner.Renew(ctxT(t)); err != nil {
		t.Fatalf("renew the nested hold: %v", err)
	}
	if d := pttl(); d < 30*time.Second {
		t.Fatalf("after renewing the 50ms hold the lock expires in %v; want the outer lease's minute", d)
	}
	if err := inner.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	other := newLocks(t, rdb, lock.Options{})
	if _, err := other.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another client's TryAcquire while the outer lease is valid: %v; want ErrNotAcquired", err)
	}
	// A longer nested hold does extend the lock.
	long, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner(outer.Owner()), lock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if d := pttl(); d < 59*time.Minute {
		t.Fatalf("after a one-hour nested hold the lock expires in %v; want about an hour", d)
	}
	_ = long.Release(ctxT(t))
	_ = outer.Release(ctxT(t))
}

// TestDeadWaiterGetsOnlyAHandoffLease: a waiter that died in line (its place
// left in the queue, as a SIGKILLed process leaves it) is handed the lock on
// release with a provisional lease of HandoffTTL, not a whole TTL, and a
// live waiter behind it gets the lock once that runs out. (The old release
// gave the dead waiter the full TTL: 10 s at defaults, during which the lock
// was unusable.) The bound is read from Redis: no timing is asserted.
func TestDeadWaiterGetsOnlyAHandoffLease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, QueueTTL: time.Minute, HandoffTTL: 300 * time.Millisecond})
	a := mustAcquire(t, c, "k")
	// The dead waiter: first in line, its place valid for a minute, put
	// there as acquireScript's join does (the place, and w on the held
	// lock: somebody is in line).
	if err := rdb.ZAdd(ctxT(t), keys.Queue, redis.Z{Score: 1, Member: "60000#dead:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctxT(t), keys.QueueDeadlines, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "60000#dead:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctxT(t), keys.Lock, "w", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	owner, _ := rdb.HGet(ctxT(t), keys.Lock, "o").Result()
	pttl, _ := rdb.PTTL(ctxT(t), keys.Lock).Result()
	if owner != "dead" || pttl > 300*time.Millisecond || pttl <= 0 {
		t.Fatalf("after the release the lock is held by %q for %v; want the dead waiter for at most the 300ms hand-off lease", owner, pttl)
	}
	live := newLocks(t, newRDB(t, p), lock.Options{TTL: time.Minute, QueueTTL: time.Minute})
	l := mustAcquire(t, live, "k") // served once the hand-off lease runs out
	if pttl, _ := rdb.PTTL(ctxT(t), keys.Lock).Result(); pttl < 30*time.Second {
		t.Fatalf("the live waiter's lease expires in %v; want its minute", pttl)
	}
	_ = l.Release(ctxT(t))
}

// TestFreeLockGoesToTheHeadProvisionally: a free lock whose queue head is a
// waiter that died (no release to hand it over) is handed to that head by
// the next attempt, provisionally, so a live waiter is not held up until the
// dead one's place expires (a minute here).
func TestFreeLockGoesToTheHeadProvisionally(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	if err := rdb.ZAdd(ctxT(t), keys.Queue, redis.Z{Score: 1, Member: "60000#dead:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctxT(t), keys.QueueDeadlines, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "60000#dead:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, QueueTTL: time.Minute, HandoffTTL: 200 * time.Millisecond})
	if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-acquire jumped the queue: %v", err)
	}
	if owner, _ := rdb.HGet(ctxT(t), keys.Lock, "o").Result(); owner != "dead" {
		t.Fatalf("the free lock was not handed to the head of the queue (owner %q)", owner)
	}
	l := mustAcquire(t, c, "k")
	_ = l.Release(ctxT(t))
}

// TestQueueExpiryOnlyGrows: the queue's keys live at least QueueTTL from a
// waiter's last refresh, whatever TTL another waiter asked for: a waiter
// with WithTTL(200ms) no longer makes the queue expire under the others.
func TestQueueExpiryOnlyGrows(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, QueueTTL: time.Minute})
	holder := mustAcquire(t, c, "k")
	defer holder.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = c.Acquire(ctx, "k") }()
	eventually(t, "the first waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	short := newLocks(t, newRDB(t, p), lock.Options{TTL: time.Minute, QueueTTL: 200 * time.Millisecond})
	go func() { _, _ = short.Acquire(ctx, "k", lock.WithTTL(200*time.Millisecond)) }()
	eventually(t, "the second waiter to queue", func() bool { return queueLen(t, rdb, "k") == 2 })
	for _, k := range []string{keys.Queue, keys.QueueDeadlines} {
		if d, _ := rdb.PTTL(ctxT(t), k).Result(); d < 30*time.Second {
			t.Fatalf("%s expires in %v after a 200ms waiter joined; want the first waiter's minute", k, d)
		}
	}
}

// TestHandedOffLeaseIsValidFromTheHandoff: a waiter that waited most of a
// TTL gets a lease whose validity counts from the hand-off, not from its
// first attempt. (The old lease counted from the last attempt and could be
// born with a few milliseconds left, and its watchdog then declared it lost.)
func TestHandedOffLeaseIsValidFromTheHandoff(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	const ttl = 2 * time.Second
	c := newLocks(t, rdb, lock.Options{TTL: ttl, QueueTTL: time.Minute})
	a := mustAcquire(t, c, "k")
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := c.Acquire(ctxT(t), "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	time.Sleep(ttl * 3 / 4) // the waiter waits most of a TTL (its only attempt was at the start)
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if left := time.Until(l.ValidUntil()); left < ttl/2 {
		t.Fatalf("the handed-off lease is valid %v more; want about its TTL %v (counted from the hand-off)", left, ttl)
	}
	_ = l.Release(ctxT(t))
}

// TestReleaseIsRetryable: a release whose ctx was done before sending
// changes nothing and can be sent again; the lock is then free at once.
// (The old release marked the lease released first: the key stayed held for
// its TTL and a retry said "already released".)
func TestReleaseIsRetryable(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	l := mustAcquire(t, c, "k")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Release(done); !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release with a canceled ctx: %v; want context.Canceled", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n, _ := rdb.Exists(ctxT(t), lock.RedisKeys("k").Lock).Result(); n != 0 {
		t.Fatal("the lock is still held after the retried release")
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after release: %v; want ErrNotHeld", err)
	}
}

// TestGivingUpIsNotAcquired: a waiter whose ctx ends while it waits and who
// left the queue surely does not hold the lock: ErrNotAcquired (with the
// ctx error), not an unknown outcome.
func TestGivingUpIsNotAcquired(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	l := mustAcquire(t, c, "k")
	defer l.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "k")
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("gave up waiting: %v; want ErrNotAcquired wrapping context.DeadlineExceeded", err)
	}
	if n := queueLen(t, rdb, "k"); n != 0 {
		t.Fatalf("the waiter left %d queue entries", n)
	}
}

// TestFenceKeyExpiresAndFencesStillGrow: the fence counter of a lock name
// is not kept for good (it lives an hour past the last grant), and a fence
// issued after it is gone is still above every earlier one (the server
// clock is).
func TestFenceKeyExpiresAndFencesStillGrow(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Second})
	l := mustAcquire(t, c, "k")
	first := l.Fence()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	d, err := rdb.PTTL(ctxT(t), lock.RedisKeys("k").Fence).Result()
	if err != nil || d <= 0 || d > time.Hour {
		t.Fatalf("fence key PTTL %v (%v); want a lifetime of at most an hour", d, err)
	}
	if err := rdb.Del(ctxT(t), lock.RedisKeys("k").Fence).Err(); err != nil { // as if it expired
		t.Fatal(err)
	}
	l = mustAcquire(t, c, "k")
	if l.Fence() <= first {
		t.Fatalf("fence %d after the counter expired; want above %d", l.Fence(), first)
	}
	_ = l.Release(ctxT(t))
}
