package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestRetryStrategy: Acquire WithRetry makes one-shot attempts as the
// strategy spaces them, never joining the queue, and gives up with
// ErrNotAcquired when the strategy does; it gets the lock once it is free.
func TestRetryStrategy(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	l := mustAcquire(t, c, "k")
	_, err := c.Acquire(ctxT(t), "k", lock.WithRetry(lock.LimitRetry(lock.LinearBackoff(5*time.Millisecond), 3)))
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Acquire with 3 retries on a held lock: %v; want ErrNotAcquired", err)
	}
	if n := queueLen(t, rdb, "k"); n != 0 {
		t.Fatalf("a retrying Acquire joined the queue (%d waiting)", n)
	}
	got := make(chan error, 1)
	go func() {
		w, err := c.Acquire(ctxT(t), "k", lock.WithRetry(lock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)))
		if err == nil {
			err = w.Release(ctxT(t))
		}
		got <- err
	}()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("retrying Acquire on a lock released meanwhile: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l = mustAcquire(t, c, "k")
	defer l.Release(context.Background())
	if _, err := c.Acquire(ctx, "k", lock.WithRetry(lock.LinearBackoff(time.Millisecond))); !errors.Is(err, context.Canceled) {
		t.Fatalf("retrying Acquire with a canceled ctx: %v; want context.Canceled", err)
	}
}

// TestInspectTTLAndForceUnlock: Inspect sees holder, holds, fence, time
// left and the queue; TTLLeft is Redis's time left for the owner only;
// ForceUnlock frees a lock whoever holds it, hands it to the first waiter,
// and keeps fences monotonic.
func TestInspectTTLAndForceUnlock(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	if in, err := c.Inspect(ctxT(t), "k"); err != nil || in.Held || in.Waiting != 0 {
		t.Fatalf("Inspect of a free lock = %+v, %v", in, err)
	}
	l := mustAcquire(t, c, "k")
	nested, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner(l.Owner()))
	if err != nil {
		t.Fatal(err)
	}
	left, err := l.TTLLeft(ctxT(t))
	if err != nil || left < 30*time.Second || left > time.Minute {
		t.Fatalf("TTLLeft = %v, %v; want about a minute", left, err)
	}
	waiter := newLocks(t, newRDB(t, p), lock.Options{TTL: time.Minute, QueueTTL: time.Minute})
	var wl *lock.Lease
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if wl, err = waiter.Acquire(ctxT(t), "k"); err != nil {
			t.Error(err)
		}
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	in, err := c.Inspect(ctxT(t), "k")
	if err != nil || !in.Held || in.Owner != c.ID()+"/"+l.Owner() || in.Holds != 2 || in.Fence != l.Fence() || in.TTL < 30*time.Second || in.Waiting != 1 {
		t.Fatalf("Inspect = %+v, %v; want held by %s/%s, 2 holds, fence %d, about a minute, 1 waiting", in, err, c.ID(), l.Owner(), l.Fence())
	}
	held, err := c.ForceUnlock(ctxT(t), "k")
	if err != nil || !held {
		t.Fatalf("ForceUnlock = %v, %v; want true", held, err)
	}
	wg.Wait()
	if wl == nil {
		t.FailNow()
	}
	if wl.Fence() <= l.Fence() {
		t.Fatalf("fence %d after a force-unlock; want above %d", wl.Fence(), l.Fence())
	}
	if _, err := l.TTLLeft(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("TTLLeft of the forced-out lease: %v; want ErrNotHeld", err)
	}
	if err := nested.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of the forced-out hold: %v; want ErrNotHeld", err)
	}
	_ = wl.Release(ctxT(t))
}

// TestRenewFor: renewing with a new TTL makes it the lease's TTL and moves
// ValidUntil by it; a shorter one never shortens the lock in Redis.
func TestRenewFor(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Second})
	l := mustAcquire(t, c, "k")
	if err := l.RenewFor(ctxT(t), time.Hour); err != nil {
		t.Fatal(err)
	}
	if l.TTL() != time.Hour || time.Until(l.ValidUntil()) < 50*time.Minute {
		t.Fatalf("after RenewFor(1h): TTL %v, valid %v more", l.TTL(), time.Until(l.ValidUntil()))
	}
	if err := l.RenewFor(ctxT(t), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if left, err := l.TTLLeft(ctxT(t)); err != nil || left < 50*time.Minute {
		t.Fatalf("after RenewFor(50ms) the lock has %v left (%v); want the hour it had", left, err)
	}
	if err := l.RenewFor(ctxT(t), time.Millisecond); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("RenewFor(1ms): %v; want ErrInvalid", err)
	}
	_ = l.Release(ctxT(t))
}

// TestHooks: OnAcquire sees every acquire with its error, OnRelease the
// hold time of every release, OnLost every loss.
func TestHooks(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	var acquired, refused, released, lost int
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		OnAcquire: func(key string, took time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				acquired++
			} else if errors.Is(err, lock.ErrNotAcquired) {
				refused++
			}
		},
		OnRelease: func(key string, held time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil && held > 0 {
				released++
			}
		},
		OnLost: func(key string, fence uint64, cause error) {
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(cause, lock.ErrLost) {
				lost++
			}
		},
	}})
	l := mustAcquire(t, c, "k")
	if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, c, "k")
	if err := rdb.Del(ctxT(t), lock.RedisKeys("k").Lock).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if acquired != 2 || refused != 1 || released != 1 || lost != 1 {
		t.Fatalf("hooks saw %d acquired, %d refused, %d released, %d lost; want 2, 1, 1, 1", acquired, refused, released, lost)
	}
}

// TestHooksCarryTheCallsContext: Begin sees each call (acquire, release,
// renew: the watchdog's too) and the call runs under the context it
// returns; Event reports the join (with the line's length), the hand-off
// and a loss under the context of the call they belong to, the loss under
// the acquire's after that call returned; each end func runs once.
func TestHooksCarryTheCallsContext(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	type tag struct{}
	var mu sync.Mutex
	var begun, ended []string
	events := map[lock.EventKind][]string{}
	var queue int64
	n := 0
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			mu.Lock()
			defer mu.Unlock()
			n++
			name := fmt.Sprintf("%s#%d", call.Op, n)
			begun = append(begun, name)
			return context.WithValue(ctx, tag{}, name), func(r lock.Result) {
				mu.Lock()
				defer mu.Unlock()
				ended = append(ended, name)
			}
		},
		Event: func(ctx context.Context, e lock.Event) {
			mu.Lock()
			defer mu.Unlock()
			name, _ := ctx.Value(tag{}).(string)
			events[e.Kind] = append(events[e.Kind], name)
			if e.Kind == lock.EventJoin {
				queue = e.Queue
			}
		},
	}})
	l1 := mustAcquire(t, c, "k") // acquire#1
	got := make(chan *lock.Lease, 1)
	go func() { got <- mustAcquire(t, c, "k") }() // acquire#2
	for {
		info, err := c.Inspect(ctxT(t), "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiting == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l1.Release(ctxT(t)); err != nil { // release#3
		t.Fatal(err)
	}
	l2 := <-got
	short := mustAcquire(t, c, "short", lock.WithTTL(20*time.Millisecond), lock.WithWatchdog(false)) // acquire#4
	<-short.Lost()
	if err := l2.Release(ctxT(t)); err != nil { // release#5
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"acquire#1", "acquire#2", "release#3", "acquire#4", "release#5"}
	if !slices.Equal(begun, want) {
		t.Errorf("Begin saw %v, want %v", begun, want)
	}
	slices.Sort(ended)
	if sorted := slices.Sorted(slices.Values(want)); !slices.Equal(ended, sorted) {
		t.Errorf("the end funcs ran for %v, want each of %v once", ended, want)
	}
	if j, h, lost := events[lock.EventJoin], events[lock.EventHandoff], events[lock.EventLost]; !slices.Equal(j, []string{"acquire#2"}) ||
		!slices.Equal(h, []string{"acquire#2"}) || !slices.Equal(lost, []string{"acquire#4"}) || queue != 1 {
		t.Errorf("events: join %v (line %d), hand-off %v, lost %v; want each under its acquire's context (acquire#2, a line of 1; acquire#4)", j, queue, h, lost)
	}
}

// TestTakenError: a refused TryAcquire says how long the holder has left
// (a retry-after hint, within the TTL), and an Acquire WithRetry whose
// strategy gives up says it too; both still match ErrNotAcquired.
func TestTakenError(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	l := mustAcquire(t, c, "k")
	defer func() { _ = l.Release(ctxT(t)) }()
	for name, try := range map[string]func() error{
		"TryAcquire": func() error { _, err := c.TryAcquire(ctxT(t), "k"); return err },
		"WithRetry": func() error {
			_, err := c.Acquire(ctxT(t), "k", lock.WithRetry(lock.LimitRetry(lock.LinearBackoff(time.Millisecond), 2)))
			return err
		},
	} {
		err := try()
		var taken *lock.TakenError
		if !errors.As(err, &taken) || !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("%s: %v; want a *TakenError wrapping ErrNotAcquired", name, err)
		}
		if taken.Key != "k" || taken.RetryAfter <= 5*time.Second || taken.RetryAfter > 10*time.Second {
			t.Errorf("%s: %+v; want key k and the holder's remaining TTL (5s..10s)", name, taken)
		}
	}
}
