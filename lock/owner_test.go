package lock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestOwnerWaiterCountsOnceOnPickup: a waiter acquiring WithOwner that is
// handed the lock holds it once, and its one Release frees it (review
// defect 2: the pickup attempt counted as a reentrant acquire, Holds was
// 2, and the lock stayed held for its TTL after the only Release).
func TestOwnerWaiterCountsOnceOnPickup(t *testing.T) {
	p := redistest.Start(t)
	opts := lock.Options{TTL: time.Minute}
	holder, waiter, other := newLocks(t, newRDB(t, p), opts), newLocks(t, newRDB(t, p), opts), newLocks(t, newRDB(t, p), opts)
	l := mustAcquire(t, holder, "k")
	got := make(chan *lock.Lease, 1)
	go func() {
		wl, err := waiter.Acquire(ctxT(t), "k", lock.WithOwner("worker-1"))
		if err != nil {
			t.Error(err)
		}
		got <- wl
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, newRDB(t, p), "k") == 1 })
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wl := <-got
	if wl == nil {
		t.FailNow()
	}
	if n := wl.Holds(); n != 1 {
		t.Errorf("Holds() = %d after a hand-off, want 1", n)
	}
	if err := wl.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ol, err := other.TryAcquire(ctxT(t), "k")
	if err != nil {
		t.Fatalf("after the owner's only Release the lock is still held: %v", err)
	}
	_ = ol.Release(ctxT(t))

	// A nested hold of the same owner still counts: the hand-off mark
	// is confirmed once.
	a := mustAcquire(t, waiter, "k", lock.WithOwner("worker-1"))
	b := mustAcquire(t, waiter, "k", lock.WithOwner("worker-1"))
	if b.Holds() != 2 {
		t.Errorf("a nested hold: Holds() = %d, want 2", b.Holds())
	}
	for _, x := range []*lock.Lease{b, a} {
		if err := x.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleaseOfALostLeaseSparesTheNewerHold: an owner whose lease expired
// and who acquired the lock again (the same WithOwner token) cannot free
// or renew the newer hold through the lost lease: Release and Renew of
// the lost one return ErrNotHeld, and the newer hold keeps the lock
// (review defect 4: the owner-only check let the lost lease's Release
// free it, and another client took the key while the newer hold claimed
// seconds more).
func TestReleaseOfALostLeaseSparesTheNewerHold(t *testing.T) {
	p := redistest.Start(t)
	c, other := newLocks(t, newRDB(t, p), lock.Options{}), newLocks(t, newRDB(t, p), lock.Options{})
	old := mustAcquire(t, c, "k", lock.WithOwner("worker-1"), lock.WithTTL(100*time.Millisecond))
	eventually(t, "the lease to expire", func() bool {
		n, err := newRDB(t, p).Exists(ctxT(t), lock.RedisKeys("k").Lock).Result()
		return err == nil && n == 0
	})
	newer := mustAcquire(t, c, "k", lock.WithOwner("worker-1"), lock.WithTTL(time.Minute))
	if err := old.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Renew of the lost lease: %v, want ErrNotHeld", err)
	}
	if err := old.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of the lost lease: %v, want ErrNotHeld", err)
	}
	if ol, err := other.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		if ol != nil {
			_ = ol.Release(ctxT(t))
		}
		t.Errorf("another client's TryAcquire while the newer hold is valid: %v, want ErrNotAcquired", err)
	}
	if newer.Context().Err() != nil {
		t.Error("the newer hold's Context ended")
	}
	if err := newer.Release(ctxT(t)); err != nil {
		t.Errorf("the newer hold's Release: %v", err)
	}
}

// TestOwnerGivingUpPassesAHandOffOn: a waiter WithOwner that gives up
// after a release handed it the lock (before it picked the lock up)
// passes the lock on to the next waiter, as a fresh token's waiter does.
// Before, the provisional hold stayed the owner's: the next waiter waited
// out the hand-off lease, and the owner's next acquire, even a TryAcquire,
// took the lock ahead of the line (the crowd scenario showed it as a
// fair-queue violation of the fixed lock, once under load).
func TestOwnerGivingUpPassesAHandOffOn(t *testing.T) {
	p := redistest.Start(t)
	// A long hand-off lease, and a waiter that hears no pub/sub: it polls
	// every half hand-off lease, so the test cancels it before it looks.
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute, HandoffTTL: 4 * time.Second}
	holder, next := newLocks(t, newRDB(t, p), opts), newLocks(t, newRDB(t, p), opts)
	var eaten atomic.Int64
	owner := newLocks(t, deafRDB(t, p, &eaten), opts)
	admin := newRDB(t, p)

	l := mustAcquire(t, holder, "k")
	octx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := owner.Acquire(octx, "k", lock.WithOwner("worker-1"))
		gaveUp <- err
	}()
	eventually(t, "the owner to queue", func() bool { return queueLen(t, admin, "k") == 1 && eaten.Load() > 0 })
	got := make(chan error, 1)
	go func() {
		nl, err := next.Acquire(ctxT(t), "k")
		if err == nil {
			err = nl.Release(ctxT(t))
		}
		got <- err
	}()
	eventually(t, "the next waiter to queue", func() bool { return queueLen(t, admin, "k") == 2 })
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the owner's wait: %v, want ErrNotAcquired", err)
	}
	if o, err := admin.HGet(ctxT(t), lock.RedisKeys("k").Lock, "o").Result(); err == nil && o == "worker-1" {
		t.Fatal("the owner gave up, yet the lock handed to it stays its own")
	}
	if err := <-got; err != nil {
		t.Fatalf("the next waiter: %v", err)
	}
}

// TestHoldsOf: an owner's hold count, owner-checked and without a Lease:
// nested holds count, another owner's and a hand-off not yet picked up do
// not, and bad input names what is missing.
func TestHoldsOf(t *testing.T) {
	p := redistest.Start(t)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute, HandoffTTL: 4 * time.Second}
	c := newLocks(t, newRDB(t, p), opts)
	var eaten atomic.Int64
	w2c := newLocks(t, deafRDB(t, p, &eaten), opts)
	holds := func(owner string) int64 {
		t.Helper()
		on := c
		if owner == "w2" {
			on = w2c // an owner token belongs to its Client (Options.SharedOwners)
		}
		n, err := on.HoldsOf(ctxT(t), "k", owner)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	b := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	if holds("w1") != 2 || holds("w2") != 0 {
		t.Fatalf("holds: w1 %d, w2 %d; want 2, 0", holds("w1"), holds("w2"))
	}
	_ = b.Release(ctxT(t))
	// A hand-off to a deaf waiter (it polls every 2 s): handed, not held.
	w := w2c
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := w.Acquire(ctxT(t), "k", lock.WithOwner("w2"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "w2 to queue", func() bool { return queueLen(t, newRDB(t, p), "k") == 1 && eaten.Load() > 0 })
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := holds("w2"); n != 0 {
		t.Errorf("a hand-off not yet picked up: HoldsOf = %d, want 0", n)
	}
	l := <-got
	if n := holds("w2"); l == nil || n != 1 {
		t.Errorf("after the pickup: HoldsOf = %d, want 1", n)
	}
	if _, err := c.HoldsOf(ctxT(t), "k", ""); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("HoldsOf without an owner: %v, want ErrInvalid", err)
	}
}

// TestOwnerLostReplyLeavesNoOrphanHold: a reentrant acquire WithOwner
// whose reply is lost (the server paused past its deadline, then resumed
// to run it) adds a hold nobody has a Lease for; the lock takes it back in
// the background, so the owner's one visible Release frees the lock
// (review defect 11: the orphan hold kept it for its TTL, a minute here).
func TestOwnerLostReplyLeavesNoOrphanHold(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: time.Minute})
	probe := newRDB(t, p)
	outer := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = p.Resume()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Acquire(ctx, "k", lock.WithOwner("w1"))
	cancel()
	if !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the reentrant acquire with a lost reply: %v, want ErrUnknownOutcome", err)
	}
	resumed = true
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock to be free after the owner's only visible Release", func() bool {
		n, err := probe.Exists(context.Background(), lock.RedisKeys("k").Lock).Result()
		return err == nil && n == 0
	})
}

// dropNext is a go-redis hook that, once armed, fails the next command
// without sending it, as a connection reset before the request reached
// Redis does: the caller cannot tell it from a reply lost after the
// command ran (an unknown outcome).
type dropNext struct{ armed atomic.Bool }

func (d *dropNext) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *dropNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d.armed.CompareAndSwap(true, false) {
			err := &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (d *dropNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// droppingLocks is a lock client on a fresh redis-server whose commands
// dropNext can lose, and a probe of that server.
func droppingLocks(t *testing.T) (*lock.Client, *dropNext, *redis.Client) {
	t.Helper()
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	drop := &dropNext{}
	rdb.AddHook(drop)
	return newLocks(t, rdb, lock.Options{TTL: time.Minute}), drop, newRDB(t, p)
}

// TestOwnerLostReleaseLeavesNoOrphanHold: an owner's release that never
// reached Redis (its outcome unknown to the caller) leaves a hold that the
// owner's next acquire re-enters and extends, and whose release leaves it:
// the lock was never free while the owner kept coming back (the
// simulation's seed 8081: a waiter starved for the rest of the run under
// lost messages). The lock now takes that hold back in the background, so
// the owner's next visible release frees the lock.
func TestOwnerLostReleaseLeavesNoOrphanHold(t *testing.T) {
	c, drop, probe := droppingLocks(t)
	first := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	drop.armed.Store(true)
	if err := first.Release(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the release that never reached Redis: %v, want ErrUnknownOutcome", err)
	}
	next := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	if err := next.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock to be free after the owner's releases", func() bool {
		n, err := probe.Exists(context.Background(), lock.RedisKeys("k").Lock).Result()
		return err == nil && n == 0
	})
}

// TestOwnerReleaseRetryTakesNoOtherHold: Release called again after an
// unknown outcome, for one of an owner's two holds, takes back that hold
// only (its undo): after the lock's own background undo it finds nothing
// to do, where a plain release would take the owner's other hold; that
// hold stands, and its release frees the lock.
func TestOwnerReleaseRetryTakesNoOtherHold(t *testing.T) {
	c, drop, probe := droppingLocks(t)
	outer := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	inner := mustAcquire(t, c, "k", lock.WithOwner("w1"))
	drop.armed.Store(true)
	if err := inner.Release(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the release that never reached Redis: %v, want ErrUnknownOutcome", err)
	}
	// The lock's background undo of the hold comes first, then the
	// caller's retry, which must not take the owner's other hold.
	eventually(t, "the background undo", func() bool {
		n, err := probe.HGet(context.Background(), lock.RedisKeys("k").Lock, "n").Int()
		return err == nil && n == 1
	})
	if err := inner.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the retry after the undo: %v, want ErrNotHeld (the hold was taken back)", err)
	}
	if n, err := probe.HGet(ctxT(t), lock.RedisKeys("k").Lock, "n").Int(); err != nil || n != 1 {
		t.Fatalf("after the retried release of one of two holds: %d holds (%v), want the outer one", n, err)
	}
	if err := outer.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := probe.Exists(ctxT(t), lock.RedisKeys("k").Lock).Result(); err != nil || n != 0 {
		t.Fatalf("after the outer release the lock exists (%d, %v)", n, err)
	}
}

// TestLostReleaseOfAFreshTokenIsUndone: a release that never reached
// Redis, of a lease with a fresh token, is made sure in the background as
// an owner's is: the lock is free long before the lease's TTL (a minute),
// and the same client's next acquire does not wait behind its own stale
// hold (the simulation's seed 7739: a nested hold had stretched its TTL).
func TestLostReleaseOfAFreshTokenIsUndone(t *testing.T) {
	c, drop, probe := droppingLocks(t)
	l := mustAcquire(t, c, "k")
	in, err := l.Reenter(ctxT(t), lock.WithTTL(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	drop.armed.Store(true)
	if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the release that never reached Redis: %v, want ErrUnknownOutcome", err)
	}
	eventually(t, "the lock to be free after the lost release", func() bool {
		n, err := probe.Exists(context.Background(), lock.RedisKeys("k").Lock).Result()
		return err == nil && n == 0
	})
	if _, err := c.TryAcquire(ctxT(t), "k"); err != nil {
		t.Fatalf("the client's next acquire: %v", err)
	}
}
