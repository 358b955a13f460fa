package zoo_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestLocalRedisReleasesAHoldOnce: two Release calls at once on one
// local-redis lease (the workload's Mix.Concurrent) release it once: the
// other fails, not held, as Spring's unlock() by a thread that no longer
// owns the local lock throws. Both used to pass the GET and say ok, a
// not-owner break under no fault (seen under load, local-redis-none-1,
// 2026-12-07).
func TestLocalRedisReleasesAHoldOnce(t *testing.T) {
	p := redistest.Start(t)
	l := open(t, zoo.LocalRedisName, locker.Deps{Redis: newClient(t, p)})
	for round := range 100 {
		ls := acquire(t, l, "k", 10*time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = ls.Release(tctx(t))
			}()
		}
		wg.Wait()
		oks := 0
		for _, err := range errs {
			switch {
			case err == nil:
				oks++
			case !errors.Is(err, locker.ErrNotHeld):
				t.Fatalf("round %d: a second release: %v, want locker.ErrNotHeld", round, err)
			}
		}
		if oks != 1 {
			t.Fatalf("round %d: %d of 2 releases at once said ok (%v), want 1", round, oks, errs)
		}
	}
}
