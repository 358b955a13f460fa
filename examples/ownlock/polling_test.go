package ownlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/locker"
)

// myWaiter is your lock with a blocking acquire that polls, as most Redis
// locks wait (redsync, redis-py): it tries again after a random delay
// until it holds or ctx ends (locker.Waiter).
type myWaiter struct{ *myLock }

func (l myWaiter) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	for {
		le, err := l.TryAcquire(ctx, key, ttl)
		if !errors.Is(err, locker.ErrNotAcquired) {
			return le, err // held, or an error the caller must see as it is
		}
		// redsync's default retry delay, 50–250 ms: sized for an 8 s
		// expiry, it makes this waiter slow to get its turn.
		t := time.NewTimer(50*time.Millisecond + rand.N(200*time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			// Nothing in flight: the waiter surely holds nothing.
			return nil, fmt.Errorf("acquire %q: %w: %w", key, locker.ErrNotAcquired, ctx.Err())
		}
	}
}

// TestMyPollingLockUnderChaos: every row of a polling lock is conclusive
// (each fault struck) and as its profile predicts, on 2 seeds of the
// matrix's 3 s runs: pause-client and crash-client strike whichever client
// holds, so the waiters' starvation leaves no fault without its moment.
func TestMyPollingLockUnderChaos(t *testing.T) {
	e := locker.Entry{Name: "mylock-polling", Profile: locker.ProfileLease, Doc: "mylock, waiting by polling",
		Open: func(d locker.Deps) (locker.Locker, error) {
			return myWaiter{&myLock{rdb: d.Redis, prefix: d.Prefix}}, nil
		}}
	res, err := lockproof.Run(context.Background(), lockproof.Options{Locks: []locker.Entry{e},
		Faults: []string{"none", "pause-client", "crash-client"}, Seeds: []uint64{1, 2}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Summary.Scenarios {
		t.Logf("%s: %v; fault: %s", s.ID(), s.Verdicts, s.FaultEvidence)
		if s.Fault != "none" && s.FaultError != "" {
			t.Errorf("%s: inconclusive, the fault did not strike: %s", s.ID(), s.FaultError)
		}
	}
	if res.Status != 0 {
		t.Errorf("verdicts not as the lock's profile predicts (status %d): see %s/report.md", res.Status, res.Dir)
	}
}
