package lock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestAcquireAfterClose: a closed Client acquires nothing: Acquire and
// TryAcquire return ErrClosed (and ErrNotAcquired) and leave the key free,
// and a wait in progress when Close ran that is then handed the lock gives
// it back, since the watchdog asked for cannot run (review defect 10: the
// acquire succeeded without a watchdog, and the lease was lost one TTL
// later).
func TestAcquireAfterClose(t *testing.T) {
	p := redistest.Start(t)
	opts := lock.Options{TTL: 10 * time.Second, Watchdog: true}
	holder, other := newLocks(t, newRDB(t, p), opts), newLocks(t, newRDB(t, p), opts)
	closed := newLocks(t, newRDB(t, p), opts)
	if err := closed.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, acquire := range map[string]func() (*lock.Lease, error){
		"Acquire":    func() (*lock.Lease, error) { return closed.Acquire(ctxT(t), "k") },
		"TryAcquire": func() (*lock.Lease, error) { return closed.TryAcquire(ctxT(t), "k") },
	} {
		if l, err := acquire(); !errors.Is(err, lock.ErrClosed) || !errors.Is(err, lock.ErrNotAcquired) || l != nil {
			t.Errorf("%s after Close: %v, %v; want ErrClosed and ErrNotAcquired", name, l, err)
		}
	}
	if n, err := newRDB(t, p).Exists(ctxT(t), lock.RedisKeys("k").Lock).Result(); err != nil || n != 0 {
		t.Fatalf("the key after refused acquires: exists %d (%v)", n, err)
	}

	// A wait in progress when its Client closes.
	waiter := newLocks(t, newRDB(t, p), opts)
	l := mustAcquire(t, holder, "k")
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Acquire(ctxT(t), "k")
		if wl != nil {
			t.Error("a closed Client's wait returned a lease")
		}
		got <- err
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, newRDB(t, p), "k") == 1 })
	if err := waiter.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, lock.ErrClosed) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the closed Client's wait: %v; want ErrClosed and ErrNotAcquired", err)
	}
	ol, err := other.TryAcquire(ctxT(t), "k")
	if err != nil {
		t.Fatalf("the lock handed to the closed Client's wait was not given back: %v", err)
	}
	_ = ol.Release(ctxT(t))
}

// TestCloseDoesNotWaitForADial: Close returns at once while the Client's
// pub/sub connection is still being dialed to a Redis that accepts no
// more connections (review defect 7: Close waited out the dial, 15 s).
func TestCloseDoesNotWaitForADial(t *testing.T) {
	p := redistest.Start(t)
	holder := newLocks(t, newRDB(t, p), lock.Options{})
	// The waiter's first connection (its commands) goes through; every
	// later one, its subscription's, hangs as a dial to a frozen host does.
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, DialTimeout: 10 * time.Second, PoolSize: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) > 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	waiter, err := lock.New(rdb, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, holder, "k")
	defer func() { _ = l.Release(ctxT(t)) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = waiter.Acquire(ctx, "k") }()
	eventually(t, "the subscription's dial", func() bool { return dials.Load() > 1 })
	closed := make(chan error, 1)
	cctx, ccancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer ccancel()
	go func() { closed <- waiter.Close(cctx) }()
	// Close returns within its ctx, where the old Close waited for the
	// dial (here, for good); the connection's close goes on without it.
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v; want its ctx's deadline (the connection's close still waits for the dial)", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close still blocked after 3s while a subscription was dialing")
	}
}
