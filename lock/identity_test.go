package lock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestOneOwnerIDInTwoClientsStillExcludes: two Clients (two processes, as
// far as Redis can tell) that pick the same WithOwner id still exclude
// each other; before, the second "re-entered" the first one's lock and
// both worked under it. SharedOwners asks for the old meaning.
func TestOneOwnerIDInTwoClientsStillExcludes(t *testing.T) {
	p := redistest.Start(t)
	opts := lock.Options{TTL: time.Minute}
	a, b := newLocks(t, newRDB(t, p), opts), newLocks(t, newRDB(t, p), opts)
	held := mustAcquire(t, a, "k", lock.WithOwner("job"))
	if l, err := b.TryAcquire(ctxT(t), "k", lock.WithOwner("job")); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a second Client with the same owner id: %v, %v; want ErrNotAcquired (no exclusion otherwise)", l, err)
	}
	if err := held.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	shared := lock.Options{TTL: time.Minute, SharedOwners: true}
	sa, sb := newLocks(t, newRDB(t, p), shared), newLocks(t, newRDB(t, p), shared)
	outer := mustAcquire(t, sa, "s", lock.WithOwner("job"))
	inner, err := sb.TryAcquire(ctxT(t), "s", lock.WithOwner("job"))
	if err != nil || inner.Holds() != 2 {
		t.Fatalf("SharedOwners: the same id in another Client = %v, %v; want a second hold", inner, err)
	}
	if in, _ := sa.Inspect(ctxT(t), "s"); in.Owner != "job" {
		t.Fatalf("SharedOwners: Redis stores %q, want the id as given", in.Owner)
	}
	_ = inner.Release(ctxT(t))
	_ = outer.Release(ctxT(t))
}

// TestReenterNeedsTheOuterHold: Reenter nests a hold under a live lease,
// and refuses once that lease's hold is gone, where an acquire WithOwner
// of the same token silently takes a fresh hold (the review's "a
// reentrant acquire on a lost outer lease silently becomes a fresh hold").
func TestReenterNeedsTheOuterHold(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute})
	keys := lock.RedisKeys("k")

	outer := mustAcquire(t, c, "k")
	inner, err := outer.Reenter(ctxT(t), lock.WithTTL(30*time.Second))
	if err != nil || inner.Holds() != 2 || inner.Fence() != outer.Fence() || inner.Owner() != outer.Owner() {
		t.Fatalf("Reenter a live lease = %+v, %v; want a second hold of the same owner and fence", inner, err)
	}
	if err := inner.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HGet(ctxT(t), keys.Lock, "n").Val(); n != "1" {
		t.Fatalf("after the inner release: %s holds, want 1", n)
	}
	if _, err := outer.Reenter(ctxT(t), lock.WithOwner("x")); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Reenter WithOwner: %v, want ErrInvalid", err)
	}

	// Redis forgets the lock: the outer lease does not know yet.
	if err := rdb.Del(ctxT(t), keys.Lock).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := outer.Reenter(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Reenter a lease whose hold is gone: %v, want ErrNotHeld", err)
	}
	if n := rdb.Exists(ctxT(t), keys.Lock).Val(); n != 0 {
		t.Fatal("the refused Reenter left a hold behind")
	}
	// The old way: the same token WithOwner takes a fresh hold.
	fresh, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner(outer.Owner()))
	if err != nil || fresh.Holds() != 1 {
		t.Fatalf("WithOwner on the lost lease's token = %v, %v; want the fresh hold Reenter refuses", fresh, err)
	}
	// Another owner's hold under the same owner token's lost lease.
	if _, err := outer.Reenter(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Reenter under a newer hold of the owner (another fence): %v, want ErrNotHeld", err)
	}
	_ = fresh.Release(ctxT(t))
}

// TestMetadataFollowsTheHolder: metadata is the current holder's, through
// a hand-off (never the previous holder's), kept by a nested hold without
// its own, and bounded.
func TestMetadataFollowsTheHolder(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute}
	a, b := newLocks(t, rdb, opts), newLocks(t, newRDB(t, p), opts)
	la := mustAcquire(t, a, "k", lock.WithMetadata("holder=a"))
	if in, err := a.Inspect(ctxT(t), "k"); err != nil || in.Metadata != "holder=a" || la.Metadata() != "holder=a" {
		t.Fatalf("Inspect = %+v, %v; want holder=a", in, err)
	}
	nested, err := la.Reenter(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := a.Inspect(ctxT(t), "k"); in.Metadata != "holder=a" {
		t.Fatalf("a nested hold without metadata changed it to %q", in.Metadata)
	}
	_ = nested.Release(ctxT(t))
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := b.Acquire(ctxT(t), "k", lock.WithMetadata("holder=b"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "b to queue", func() bool { return queueLen(t, rdb, "k") == 1 })
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if in, _ := a.Inspect(ctxT(t), "k"); lb == nil || in.Metadata != "holder=b" {
		t.Fatalf("after the hand-off: metadata %q, want holder=b", in.Metadata)
	}
	_ = lb.Release(ctxT(t))
	if _, err := a.TryAcquire(ctxT(t), "k", lock.WithMetadata(strings.Repeat("x", lock.MaxMetadataLen+1))); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "WithMetadata") {
		t.Fatalf("metadata too long: %v, want ErrInvalid naming WithMetadata", err)
	}
}

// TestJitterSpreads: Jitter draws each wait within [d×(1−f), d], never 0
// for a wait (0 means give up), and keeps a give-up.
func TestJitterSpreads(t *testing.T) {
	s := lock.Jitter(lock.LinearBackoff(100*time.Millisecond), 0.5)
	seen := map[time.Duration]bool{}
	for i := 0; i < 1000; i++ {
		d := s.NextBackoff()
		if d < 50*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("wait %v outside [50ms, 100ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct waits in 1000: not spread", len(seen))
	}
	full := lock.Jitter(lock.LinearBackoff(time.Nanosecond), 1)
	for i := 0; i < 100; i++ {
		if d := full.NextBackoff(); d <= 0 {
			t.Fatalf("full jitter turned a wait into %v, a give-up", d)
		}
	}
	if d := lock.Jitter(lock.LimitRetry(lock.LinearBackoff(time.Second), 0), 1).NextBackoff(); d != 0 {
		t.Fatalf("a give-up became %v", d)
	}
	if d := lock.Jitter(lock.LinearBackoff(time.Second), -3).NextBackoff(); d != time.Second {
		t.Fatalf("a negative fraction changed the wait to %v", d)
	}
}

// TestRetryIfSeesTheError: an Acquire WithRetry whose strategy sees errors
// retries through refused connections and gets the lock; one that does not
// gives up at the first.
func TestRetryIfSeesTheError(t *testing.T) {
	p := redistest.Start(t)
	flaky := func(fails int64) *redis.Client {
		var dials atomic.Int64
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if dials.Add(1) <= fails {
					return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (test)")}
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	sees := lock.RetryIf(lock.LimitRetry(lock.LinearBackoff(5*time.Millisecond), 20), func(err error) bool {
		return !errors.Is(err, lock.ErrNotAcquired)
	})
	c := newLocks(t, flaky(6), lock.Options{TTL: time.Minute})
	l, err := c.Acquire(ctxT(t), "k", lock.WithRetry(sees))
	if err != nil {
		t.Fatalf("retrying through refused connections: %v", err)
	}
	_ = l.Release(ctxT(t))

	blind := newLocks(t, flaky(6), lock.Options{TTL: time.Minute})
	if _, err := blind.Acquire(ctxT(t), "k", lock.WithRetry(lock.LimitRetry(lock.LinearBackoff(5*time.Millisecond), 20))); err == nil || errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a strategy blind to errors: %v; want the refused connection", err)
	}

	// Taken: this strategy gives up at once, with the holder's TTL.
	held := mustAcquire(t, c, "t")
	defer held.Release(ctxT(t))
	var taken *lock.TakenError
	if _, err := c.Acquire(ctxT(t), "t", lock.WithRetry(sees)); !errors.As(err, &taken) || taken.RetryAfter <= 0 {
		t.Fatalf("a taken lock: %v; want a TakenError with the holder's TTL", err)
	}
}

// TestWithValidityEndsWithTheLease: a call bounded by the lease ends at
// the validity deadline it had, or when the lease is lost, with a cause
// that says so.
func TestWithValidityEndsWithTheLease(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 300 * time.Millisecond})
	l := mustAcquire(t, c, "k")
	call, cancel := l.WithValidity(context.Background())
	defer cancel()
	if dl, ok := call.Deadline(); !ok || !dl.Equal(l.ValidUntil()) {
		t.Fatalf("deadline %v, %v; want the lease's %v", dl, ok, l.ValidUntil())
	}
	select {
	case <-call.Done():
	case <-time.After(bound):
		t.Fatal("the call outlived the lease's validity")
	}
	if cause := context.Cause(call); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("cause %v, want one wrapping ErrLost", cause)
	}
	if _, err := l.Reenter(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Reenter after the lease was lost: %v, want ErrNotHeld", err)
	}
}

// TestCloseWaitsForCleanups: Close waits, within its ctx, for the
// background cleanup of an acquire whose reply was lost; it reports a ctx
// that ends first.
func TestCloseWaitsForCleanups(t *testing.T) {
	p := redistest.Start(t)
	probe := newRDB(t, p)
	c, err := lock.New(newRDB(t, p), lock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
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
	_, err = c.TryAcquire(ctx, "k")
	cancel()
	if !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("acquire against a paused Redis: %v, want ErrUnknownOutcome", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = c.Close(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while the cleanup waits for Redis: %v, want its ctx's deadline", err)
	}
	resumed = true
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctxT(t)); err != nil {
		t.Fatalf("Close once Redis is back: %v", err)
	}
	// The cleanup is done: the lost reply's hold is gone.
	if n := probe.Exists(ctxT(t), lock.RedisKeys("k").Lock).Val(); n != 0 {
		t.Fatal("Close returned before the cleanup released the lost reply's lock")
	}
}
