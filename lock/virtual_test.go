package lock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockproof/lockproof/internal/vnode"
	"github.com/lockproof/lockproof/lock"
)

// TestLockInVirtualTime: the lock's real code runs in virtual time
// (testing/synctest) against an in-process Redis, so that minutes of
// leases, watchdog renewals, hand-offs and expiries take milliseconds and
// come out the same on every run: a watchdog keeps a 10s lease for a
// minute, a waiter is handed the lock the instant it is released, and a
// lease without watchdog is free right after its TTL.
func TestLockInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rdb := vnode.Client(t)
		ctx := context.Background()
		opts := lock.Options{TTL: 10 * time.Second, Watchdog: true}
		a, err := lock.New(rdb, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := lock.New(rdb, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, c := range []*lock.Client{a, b} {
				if err := c.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}
		}()

		l, err := a.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // the watchdog renews every TTL/3
		select {
		case <-l.Lost():
			t.Fatal("the watchdog lost the lease in a quiet minute")
		default:
		}
		if _, err := b.TryAcquire(ctx, "k"); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("a lease kept a minute by its watchdog was taken: %v", err)
		}

		got := make(chan *lock.Lease, 1)
		go func() {
			w, err := b.Acquire(ctx, "k")
			if err != nil {
				t.Errorf("the waiter: %v", err)
			}
			got <- w
		}()
		time.Sleep(time.Second)
		synctest.Wait() // the waiter is in line
		released := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		w := <-got
		if d := time.Since(released); d != 0 {
			t.Errorf("the hand-off took %v of virtual time, want none (no timer in between)", d)
		}
		if w.Fence() <= l.Fence() {
			t.Errorf("fence %d after %d", w.Fence(), l.Fence())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}

		short, err := a.TryAcquire(ctx, "e", lock.WithWatchdog(false))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second - time.Millisecond)
		if _, err := b.TryAcquire(ctx, "e"); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("taken before its TTL ran out: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
		e2, err := b.TryAcquire(ctx, "e")
		if err != nil {
			t.Fatalf("not free right after its TTL: %v", err)
		}
		if err := short.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("release of the expired lease: %v, want ErrNotHeld", err)
		}
		if err := e2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
