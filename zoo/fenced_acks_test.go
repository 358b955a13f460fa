package zoo_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedAcks: fenced-acks on a real master with one replica. With the
// replica up, an acquire is acknowledged and granted, and the lock works as
// fenced does. With the replica frozen (SIGSTOP, as the replica-pause fault
// freezes it) an acquire hears 0 acknowledgements: it says the outcome is
// unknown, and its give-back frees the key at once for another client, not
// at the end of the hold's TTL. A lone master (no replica) fails every
// acquire alike: the entry says it needs one (Needs.Replicas).
func TestFencedAcks(t *testing.T) {
	e, ok := zoo.Builtin().Lookup(zoo.FencedAcksName)
	if !ok || e.Needs.Replicas != 1 {
		t.Fatalf("entry %s: Needs %+v, want Replicas 1", zoo.FencedAcksName, e.Needs)
	}
	master := redistest.Start(t)
	replica := redistest.Start(t, "replicaof 127.0.0.1 "+strconv.Itoa(master.Port))
	rdb := newClient(t, master)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := rdb.Wait(context.Background(), 1, 100*time.Millisecond).Result()
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never acknowledged (WAIT: %d, %v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a := open(t, zoo.FencedAcksName, locker.Deps{Redis: newClient(t, master)})
	b := open(t, zoo.FencedAcksName, locker.Deps{Redis: newClient(t, master)})
	ttl := 10 * time.Second
	la := acquire(t, a, "k", ttl)
	refused(t, b, "k", ttl)
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := replica.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	start := time.Now()
	l, err := a.TryAcquire(tctx(t), "k", ttl)
	if !errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("acquire with the replica frozen: lease %v, err %v; want locker.ErrUnknownOutcome", l, err)
	}
	t.Logf("acquire with the replica frozen: %v after %v", err, time.Since(start))
	// The give-back ended the hold: b's acquire (which WAITs too, and
	// hears nothing) is not refused as taken but gets an unknown outcome
	// of its own, and once the replica is back b is granted at once.
	if _, err := b.TryAcquire(tctx(t), "k", ttl); !errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("b's acquire after a's give-back, the replica frozen: %v; want locker.ErrUnknownOutcome (the key was given back, not kept)", err)
	}
	resume()
	lb := acquire(t, b, "k", ttl)
	if took := time.Since(start); took > ttl/2 {
		t.Errorf("b was granted %v after a's unacknowledged acquire: the give-back did not free the key (TTL %v)", took, ttl)
	}
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
}
