// Package holdtest drives a consensus store's lock through every path it
// has, on a real store, for the locks' own tests: the contract the
// harness holds them to (package locker), checked once for both stores.
package holdtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locker"
)

// Lock is what Paths needs of a lock under test.
type Lock struct {
	// Open opens a fenced Locker of the lock, announcing its renewals to
	// obs (nil: none); the test closes it.
	Open func(t *testing.T, obs locker.Observer) locker.Locker
	// TTL is the leases' TTL.
	TTL time.Duration
	// Steal takes the hold of key away behind its holder's back, as an
	// operator or an expiry would (a revoked lease, a deleted node).
	Steal func(t *testing.T, ctx context.Context, key string)
}

// renewals counts the renewals a Locker announces (locker.Observer).
type renewals struct {
	mu sync.Mutex
	n  int
}

func (r *renewals) Renewing(string, time.Duration, uint64, bool) func(error) {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return nil
}

func (r *renewals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Paths drives l: one-shot acquire, refused while held; blocking acquire,
// which returns within its deadline while held and gets the key once it
// is free; the renewals announced while held (a lease held two TTLs stays
// held) and none after the release, which is not a loss; the fence rising
// from hold to hold; the validity claim, within the TTL while held and
// none once released or lost; the loss notice and a refused release once
// the hold is stolen.
func Paths(t *testing.T, l Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := &renewals{}
	a, b := l.Open(t, obs), l.Open(t, nil)
	la, err := a.TryAcquire(ctx, "k", l.TTL)
	if err != nil {
		t.Fatal(err)
	}
	f1, ok := la.Fence()
	if !ok {
		t.Fatal("a fenced lease has no fence")
	}
	if v := la.(locker.Claimer).ValidUntil(); time.Until(v) <= 0 || time.Until(v) > l.TTL {
		t.Errorf("ValidUntil %v from now; want within the TTL", time.Until(v))
	}
	if _, err := b.TryAcquire(ctx, "k", l.TTL); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("TryAcquire while held: %v; want ErrNotAcquired", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	_, err = b.(locker.Waiter).Acquire(wctx, "k", l.TTL)
	wcancel()
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("Acquire while held, 300ms deadline: %v after %v; want an error within its deadline", err, time.Since(start))
	}
	time.Sleep(2 * l.TTL) // longer than the TTL: the renewals hold it
	if n := obs.count(); n < 3 {
		t.Errorf("%d renewals announced in 2 TTLs; want one every TTL/3", n)
	}
	if _, err := b.TryAcquire(ctx, "k", l.TTL); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("TryAcquire after 2 TTLs of renewals: %v; want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() {
		lb, err := b.(locker.Waiter).Acquire(ctx, "k", l.TTL)
		if err == nil {
			if f2, _ := lb.Fence(); f2 <= f1 {
				err = errors.New("the next holder's fence is not above the last one's")
			}
			_ = lb.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	n := obs.count()
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	time.Sleep(l.TTL)
	if obs.count() != n {
		t.Errorf("%d renewals announced after the release", obs.count()-n)
	}
	select {
	case <-la.Lost():
		t.Error("a released lease reported lost")
	default:
	}
	if !la.(locker.Claimer).ValidUntil().IsZero() {
		t.Error("a released lease still claims validity")
	}

	lc, err := a.TryAcquire(ctx, "k2", l.TTL)
	if err != nil {
		t.Fatal(err)
	}
	l.Steal(t, ctx, "k2")
	select {
	case <-lc.Lost():
	case <-time.After(2 * l.TTL):
		t.Fatal("Lost did not close after the hold was stolen")
	}
	if !lc.(locker.Claimer).ValidUntil().IsZero() {
		t.Error("a lost lease still claims validity")
	}
	if err := lc.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Release of a stolen hold: %v; want ErrNotHeld", err)
	}
}
