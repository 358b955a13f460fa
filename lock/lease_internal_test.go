package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// startRedis starts a real redis-server for the test and a client of it
// that sends each command once.
func startRedis(t *testing.T) (*redisproc.Process, *redis.Client) {
	t.Helper()
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return p, rdb
}

// newClient is New, closed when the test ends.
func newClient(t *testing.T, rdb *redis.Client, opts Options) *Client {
	t.Helper()
	c, err := New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestReleaseWinsOverALossFoundMeanwhile: a loss found while a Release is
// in flight (a watchdog renewal whose script ran after the release's, the
// validity deadline) does not close Lost on the lease the release then
// reports released (review defect 6: 106 of 3,000 released leases).
func TestReleaseWinsOverALossFoundMeanwhile(t *testing.T) {
	p, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Resume() })
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	for {
		l.mu.Lock()
		inFlight := l.releasing > 0
		l.mu.Unlock()
		if inFlight {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l.lose("renewal found the lock expired or taken") // what the racing watchdog does
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while the release was in flight")
	default:
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed on a released lease")
	default:
	}
	if !errors.Is(context.Cause(l.Context()), ErrReleased) {
		t.Fatalf("Context cause %v; want ErrReleased", context.Cause(l.Context()))
	}
}

// TestRenewAppliedAfterTheLeaseEnded: a renewal that Redis applies while
// the lease ends here (its validity deadline passes, a Release ends it)
// took effect: it is reported unknown, not refused (ErrNotHeld says it had
// no effect, and the history then shows the owner's later release as one
// after its lease surely expired: found by the reset fault).
func TestRenewAppliedAfterTheLeaseEnded(t *testing.T) {
	p, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // half the TTL gone: a renewal shows in the key's TTL
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Resume() })
	done := make(chan error, 1)
	go func() { done <- l.Renew(ctx) }()
	time.Sleep(50 * time.Millisecond) // the renewal is sent and waits for the frozen server
	l.lose("validity deadline passed without a renewal")
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, ErrUnknownOutcome) || errors.Is(err, ErrNotHeld) {
		t.Fatalf("renew applied after the lease ended: %v; want ErrUnknownOutcome, not ErrNotHeld", err)
	}
	if ttl := rdb.PTTL(ctx, RedisKeys("k").Lock).Val(); ttl < 1500*time.Millisecond {
		t.Fatalf("the key's TTL is %v: the renewal did not take effect, the test proves nothing", ttl)
	}
}

// TestWaiterKeepsItsPlaceUnderChurn: hand-offs to other waiters, one after
// another faster than a hand-off lease, do not keep a waiter from the
// attempt that refreshes its place in line (review defect 1: each one put
// the attempt off again, the place expired after QueueTTL, and the waiter
// dropped out of line behind everyone who came later).
func TestWaiterKeepsItsPlaceUnderChurn(t *testing.T) {
	_, rdb := startRedis(t)
	opts := Options{TTL: time.Minute, QueueTTL: 300 * time.Millisecond, HandoffTTL: 100 * time.Millisecond}
	holder, waiter := newClient(t, rdb, opts), newClient(t, rdb, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := holder.TryAcquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	keys := RedisKeys("k")
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _, _ = waiter.Acquire(wctx, "k") }()
	for rdb.ZCard(ctx, keys.Queue).Val() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// A second of hand-offs to somebody else, every 30 ms.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(30 * time.Millisecond) {
		waiter.notes.deliverLocal(keys.Channel, "someone-else:1")
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	deadlines, err := rdb.ZRangeWithScores(ctx, keys.QueueDeadlines, 0, -1).Result()
	if err != nil || len(deadlines) != 1 {
		t.Fatalf("queue deadlines %v, %v; want the waiter's", deadlines, err)
	}
	if left := time.Duration(int64(deadlines[0].Score)-now.UnixMilli()) * time.Millisecond; left <= 0 {
		t.Fatalf("the waiter's place expired %v ago under churn: it never refreshed it", -left)
	}
}
