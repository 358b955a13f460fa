package zoo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedAcquireRetryGivesUpEveryOtherCall: of the shipped lock's
// AcquireRetry calls, alternately, one retries through a taken lock until
// its ctx ends, the next gives up at once as package lock's own example
// does (givingUpRetry), so that the harness drives both a retry that
// outlasts trouble and one that gives up after a lost attempt.
func TestFencedAcquireRetryGivesUpEveryOtherCall(t *testing.T) {
	p := redistest.Start(t)
	holder := open(t, zoo.FencedName, locker.Deps{Redis: newClient(t, p), Prefix: "retry:"})
	l := open(t, zoo.FencedName, locker.Deps{Redis: newClient(t, p), Prefix: "retry:"})
	r, ok := l.(locker.Retrier)
	if !ok {
		t.Fatalf("%s is no locker.Retrier", l.Name())
	}
	held := acquire(t, holder, "k", 10*time.Second)
	defer func() { _ = held.Release(tctx(t)) }()
	const wait = 300 * time.Millisecond
	var took [4]time.Duration
	for i := range took {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		lease, err := r.AcquireRetry(ctx, "k", 10*time.Second)
		took[i] = time.Since(start)
		cancel()
		if err == nil {
			_ = lease.Release(tctx(t))
			t.Fatalf("call %d took a held lock", i+1)
		}
		if !errors.Is(err, locker.ErrNotAcquired) || errors.Is(err, locker.ErrUnknownOutcome) {
			t.Fatalf("call %d on a held lock: %v, want ErrNotAcquired alone", i+1, err)
		}
	}
	for i, d := range took {
		givesUp := i%2 == 1
		if givesUp && d >= wait/2 {
			t.Errorf("call %d took %v on a taken lock: want it to give up at once, as package lock's example does", i+1, d)
		}
		// A retrying call ends when its ctx does, or a little before
		// (CI, 2026-12-07, a busy runner: 299.5 ms of 300, the start
		// then read after the ctx was made). A call that gave up at once
		// takes under half of it (above): three quarters tell them apart.
		if !givesUp && d < wait*3/4 {
			t.Errorf("call %d gave up after %v: want it to retry until its ctx ended (%v)", i+1, d, wait)
		}
	}
}
