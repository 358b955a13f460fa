package lock_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// subscribeEater is a connection that swallows every SUBSCRIBE it is asked
// to send, as a network partition swallows what crosses it: the command
// looks sent, Redis never sees it, no confirmation ever comes.
type subscribeEater struct {
	net.Conn
	eaten *atomic.Int64
}

func (c subscribeEater) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) && !bytes.Contains(bytes.ToLower(b), []byte("unsubscribe")) {
		c.eaten.Add(1)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// TestWaiterWithoutPubSubGetsItsHandoff: a waiter whose SUBSCRIBE was lost
// (the chaos nightly found it: fenced × partition, waiters on the clients
// the partition cut never got the hand-off after it healed) still picks up
// the lock a release hands it, within its wait bound: it polls while its
// subscription is unconfirmed. With minute-long TTL and queue refresh, only
// that polling can serve it in time.
func TestWaiterWithoutPubSubGetsItsHandoff(t *testing.T) {
	p := redistest.Start(t)
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute}
	holder := newLocks(t, newRDB(t, p), opts)
	var eaten atomic.Int64
	lossy := redis.NewClient(&redis.Options{Addr: p.Addr,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return subscribeEater{Conn: c, eaten: &eaten}, nil
		}})
	t.Cleanup(func() { _ = lossy.Close() })
	waiter := newLocks(t, lossy, opts)

	l := mustAcquire(t, holder, "k")
	type result struct {
		l   *lock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		wl, err := waiter.Acquire(ctx, "k")
		got <- result{wl, err}
	}()
	eventually(t, "the waiter to queue", func() bool { return queueLen(t, newRDB(t, p), "k") == 1 })
	eventually(t, "its SUBSCRIBE to be lost", func() bool { return eaten.Load() > 0 })
	released := time.Now()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	// The promise is WaitBound (350ms at the defaults) after the release;
	// the assertion is the lock being ours at all within seconds, against
	// a minute of TTL and queue refresh: no timing is asserted.
	t.Logf("picked up %v after the release", time.Since(released))
	if r.l.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d", r.l.Fence(), l.Fence())
	}
	if err := r.l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
