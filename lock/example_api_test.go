package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/lock"
)

// exampleClient is a lock client on the example's redis-server.
func exampleClient(opts lock.Options) (*lock.Client, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LOCKPROOF_EXAMPLE_REDIS")})
	c, err := lock.New(rdb, opts)
	if err != nil {
		panic(err)
	}
	return c, func() { _ = c.Close(context.Background()); _ = rdb.Close() }
}

// Bounded attempts instead of a place in line: try three more times, 10ms
// apart, then give up.
func ExampleWithRetry() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	held, _ := locks.Acquire(ctx, "report")
	defer held.Release(ctx)

	_, err := locks.Acquire(ctx, "report", lock.WithRetry(lock.LimitRetry(lock.LinearBackoff(10*time.Millisecond), 3)))
	fmt.Println(errors.Is(err, lock.ErrNotAcquired))
	// Output: true
}

// Code that runs as a named owner asks whether it holds a lock, and how
// many times, without the Lease at hand.
func ExampleClient_HoldsOf() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	outer, _ := locks.Acquire(ctx, "ledger", lock.WithOwner("worker-7"))
	inner, _ := locks.Acquire(ctx, "ledger", lock.WithOwner("worker-7"))

	n, _ := locks.HoldsOf(ctx, "ledger", "worker-7")
	other, _ := locks.HoldsOf(ctx, "ledger", "worker-8")
	fmt.Println(n, other)
	_ = inner.Release(ctx)
	_ = outer.Release(ctx)
	n, _ = locks.HoldsOf(ctx, "ledger", "worker-7")
	fmt.Println(n)
	// Output:
	// 2 0
	// 0
}

// A busy lock says how long it stays busy: retry after that, not before.
func ExampleTakenError() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	held, _ := locks.Acquire(ctx, "invoice-42")
	defer held.Release(ctx)

	_, err := locks.TryAcquire(ctx, "invoice-42")
	var taken *lock.TakenError
	if errors.As(err, &taken) {
		fmt.Println(errors.Is(err, lock.ErrNotAcquired), taken.RetryAfter > 50*time.Second)
	}
	// Output: true true
}

// An operator's view of a lock, and freeing it when its holder is known to
// be gone (fences stay monotonic: the old holder's late writes are refused).
func ExampleClient_ForceUnlock() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	stuck, _ := locks.Acquire(ctx, "nightly-job")

	info, _ := locks.Inspect(ctx, "nightly-job")
	fmt.Println(info.Held, info.Holds, info.Fence == stuck.Fence(), info.Waiting)
	was, _ := locks.ForceUnlock(ctx, "nightly-job")
	info, _ = locks.Inspect(ctx, "nightly-job")
	fmt.Println(was, info.Held)
	// Output:
	// true 1 true 0
	// true false
}

// Work that turns out longer than planned asks for more time; Redis says
// how much is left.
func ExampleLease_RenewFor() {
	locks, done := exampleClient(lock.Options{TTL: 10 * time.Second})
	defer done()
	ctx := context.Background()
	lease, _ := locks.Acquire(ctx, "import")
	defer lease.Release(ctx)

	_ = lease.RenewFor(ctx, time.Hour)
	left, _ := lease.TTLLeft(ctx)
	fmt.Println(lease.TTL(), left > 59*time.Minute)
	// Output: 1h0m0s true
}

// Metrics: how long acquires wait, how long locks are held, and losses.
func ExampleHooks() {
	var waits, holds int
	locks, done := exampleClient(lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		OnAcquire: func(key string, took time.Duration, err error) { waits++ },
		OnRelease: func(key string, held time.Duration, err error) { holds++ },
		OnLost:    func(key string, fence uint64, cause error) { fmt.Println("lost", key) },
	}})
	defer done()
	ctx := context.Background()
	lease, _ := locks.Acquire(ctx, "metrics")
	_ = lease.Release(ctx)
	fmt.Println(waits, holds)
	// Output: 1 1
}

// Nested work takes a hold of its own on the lock the outer lease holds,
// and only while that lease's hold stands: on a lost lease, Reenter says
// ErrNotHeld instead of taking a fresh hold that nothing outer protects.
func ExampleLease_Reenter() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	outer, _ := locks.Acquire(ctx, "invoice-42")
	inner, err := outer.Reenter(ctx)
	fmt.Println(err, inner.Holds(), inner.Fence() == outer.Fence())
	_ = inner.Release(ctx)
	_ = outer.Release(ctx)

	_, err = outer.Reenter(ctx) // the outer lease has ended
	fmt.Println(errors.Is(err, lock.ErrNotHeld))
	// Output:
	// <nil> 2 true
	// true
}

// Who holds a lock, and why: metadata stored with the hold, for operators.
func ExampleWithMetadata() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	l, _ := locks.Acquire(ctx, "nightly-export", lock.WithMetadata("host=db-7 job=export"))
	defer l.Release(ctx)

	info, _ := locks.Inspect(ctx, "nightly-export")
	fmt.Println(info.Metadata)
	// Output: host=db-7 job=export
}

// Retries that see the error: keep trying through refused connections
// (a failover), spread out so that callers who failed together do not
// come back together, but stop at once when the lock is simply taken.
func ExampleRetryIf() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	held, _ := locks.Acquire(ctx, "rebuild")
	defer held.Release(ctx)

	notTaken := func(err error) bool { return !errors.Is(err, lock.ErrNotAcquired) }
	strategy := lock.Jitter(lock.RetryIf(lock.LimitRetry(lock.ExponentialBackoff(10*time.Millisecond, time.Second), 5), notTaken), 0.5)
	_, err := locks.Acquire(ctx, "rebuild", lock.WithRetry(strategy))
	var taken *lock.TakenError
	fmt.Println(errors.As(err, &taken))
	// Output: true
}

// A downstream call bounded by the lease: its ctx ends at the lease's
// validity deadline as it stands, or when the lease ends.
func ExampleLease_WithValidity() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	l, _ := locks.Acquire(ctx, "payout")

	call, cancel := l.WithValidity(ctx)
	deadline, _ := call.Deadline()
	fmt.Println(deadline.Equal(l.ValidUntil()))
	_ = l.Release(ctx)
	<-call.Done()
	fmt.Println(errors.Is(context.Cause(call), lock.ErrReleased))
	cancel()
	// Output:
	// true
	// true
}

// Close stops the client's watchdogs and subscription, then waits, within
// its ctx, for the client's background cleanups.
func ExampleClient_Close() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LOCKPROOF_EXAMPLE_REDIS")})
	defer rdb.Close()
	locks, _ := lock.New(rdb, lock.Options{TTL: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println(locks.Close(ctx))
	_, err := locks.TryAcquire(ctx, "anything")
	fmt.Println(errors.Is(err, lock.ErrClosed))
	// Output:
	// <nil>
	// true
}

// A read-write lock: readers share, a writer waits for them and excludes
// everyone; every hold carries a fence, and a write's is above every fence
// handed out before it.
func ExampleRWLock() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	prices := locks.RWLock("prices")

	r1, _ := prices.RLock(ctx)
	r2, _ := prices.RLock(ctx) // readers share
	_, err := prices.TryLock(ctx)
	fmt.Println("write beside readers:", errors.Is(err, lock.ErrNotAcquired))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	w, _ := prices.Lock(ctx)
	fmt.Println(w.Mode(), w.Fence() > r2.Fence())
	_ = w.Release(ctx)
	// Output:
	// write beside readers: true
	// write true
}

// A semaphore of 3 permits: each acquire takes some as a hold of its own,
// with its own TTL, so a crashed holder's permits come back.
func ExampleSemaphore() {
	locks, done := exampleClient(lock.Options{TTL: time.Minute})
	defer done()
	ctx := context.Background()
	slots, _ := locks.Semaphore("exports", 3)

	a, _ := slots.Acquire(ctx, 2)
	b, _ := slots.Acquire(ctx, 1)
	_, err := slots.TryAcquire(ctx, 1)
	fmt.Println("a fourth permit:", errors.Is(err, lock.ErrNotAcquired))
	info, _ := slots.Inspect(ctx)
	fmt.Println("out:", info.Permits())
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	// Output:
	// a fourth permit: true
	// out: 3
}
