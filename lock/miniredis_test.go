package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/lock"
)

// TestExpiryFastForward checks the scripts' expiry logic deterministically
// with miniredis's virtual clock, in addition to the real-server tests: a
// lease is exclusive until its TTL passes in Redis, and free right after.
func TestExpiryFastForward(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := lock.New(rdb, lock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("try-acquire: %v", err)
	}
	m.FastForward(59 * time.Second)
	if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("acquired 1s before the TTL ran out: %v", err)
	}
	m.FastForward(2 * time.Second)
	l2, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("not free after the TTL: %v", err)
	}
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("expired lease released the new one: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
