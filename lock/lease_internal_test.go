package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
)

// TestReleaseWinsOverALossFoundMeanwhile: a loss found while a Release is
// in flight (a watchdog renewal whose script ran after the release's, the
// validity deadline) does not close Lost on the lease the release then
// reports released (review defect 6: 106 of 3,000 released leases).
func TestReleaseWinsOverALossFoundMeanwhile(t *testing.T) {
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
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
