package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// failures collects what goroutines of a test saw go wrong.
type failures struct {
	mu   sync.Mutex
	list []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
}

func (f *failures) report(t *testing.T) {
	t.Helper()
	for _, s := range f.list {
		t.Error(s)
	}
}

// raise makes a at least n.
func raise(a *atomic.Int32, n int32) {
	for m := a.Load(); n > m && !a.CompareAndSwap(m, n); m = a.Load() {
	}
}

// await waits for ch to close, within bound.
func await(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(bound):
		t.Fatalf("timed out after %v waiting for %s", bound, what)
	}
}

// TestRWExclusion: goroutines on three clients take read and write holds
// of one key. No write hold overlaps any other hold, readers do share (more
// than one at once is seen), and every write hold's fence is above every
// fence granted before it.
func TestRWExclusion(t *testing.T) {
	p := redistest.Start(t)
	var (
		readers, writers atomic.Int32
		maxReaders       atomic.Int32
		mu               sync.Mutex
		highest          uint64
		bad              failures
		wg               sync.WaitGroup
	)
	fail := bad.add
	for i := 0; i < 3; i++ {
		rw := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second}).RWLock("rw")
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				for it := 0; it < 15; it++ {
					write := (it+g)%4 == 0
					var l *lock.Lease
					var err error
					if write {
						l, err = rw.Lock(ctx)
					} else {
						l, err = rw.RLock(ctx)
					}
					if err != nil {
						fail("acquire: %v", err)
						return
					}
					mu.Lock()
					if write && l.Fence() <= highest {
						fail("write fence %d not above %d", l.Fence(), highest)
					}
					highest = max(highest, l.Fence())
					mu.Unlock()
					if write {
						if n := writers.Add(1); n != 1 || readers.Load() != 0 {
							fail("a writer beside %d writers and %d readers", n-1, readers.Load())
						}
						time.Sleep(time.Millisecond)
						writers.Add(-1)
					} else {
						raise(&maxReaders, readers.Add(1))
						if writers.Load() != 0 {
							fail("a reader beside a writer")
						}
						time.Sleep(2 * time.Millisecond)
						readers.Add(-1)
					}
					if got := l.Mode(); (write && got != lock.ModeWrite) || (!write && got != lock.ModeRead) {
						fail("mode %q", got)
					}
					if err := l.Release(ctx); err != nil {
						fail("release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	bad.report(t)
	if maxReaders.Load() < 2 {
		t.Errorf("at most %d reader at once: readers do not share", maxReaders.Load())
	}
}

// TestRWWriterNotStarved: a reader holds; a writer waits; a reader that
// comes after the writer waits behind it (TryRLock refused) and is served
// after the writer.
func TestRWWriterNotStarved(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	rw := c.RWLock("k")
	ctx := ctxT(t)
	r1, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	queued := make(chan struct{})
	go func() {
		l, err := rw.Lock(ctx, lock.WithQueued(func() { close(queued) }))
		if err != nil {
			order <- "writer: " + err.Error()
			return
		}
		order <- "writer"
		time.Sleep(50 * time.Millisecond)
		_ = l.Release(ctx)
	}()
	await(t, "the writer in line", queued)
	if _, err := rw.TryRLock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryRLock with a writer in line: %v, want ErrNotAcquired", err)
	}
	rqueued := make(chan struct{})
	go func() {
		l, err := rw.RLock(ctx, lock.WithQueued(func() { close(rqueued) }))
		if err != nil {
			order <- "reader: " + err.Error()
			return
		}
		order <- "reader"
		_ = l.Release(ctx)
	}()
	await(t, "the reader in line", rqueued)
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var served []string
	for len(served) < 2 {
		select {
		case who := <-order:
			served = append(served, who)
		case <-time.After(bound):
			t.Fatalf("served %q within %v", served, bound)
		}
	}
	if first, second := served[0], served[1]; first != "writer" || second != "reader" {
		t.Fatalf("served %q then %q, want the writer first", first, second)
	}
}

// TestRWReentry: write then write and write then read enter at once and
// share the write hold's fence; releasing the write hold after a downgrade
// leaves the read hold (another reader joins, a writer does not); read then
// read enters; read then write is ErrUpgrade, leaving nothing in line.
func TestRWReentry(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	c := newLocks(t, rdb, lock.Options{TTL: 10 * time.Second})
	other := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	rw, orw := c.RWLock("k"), other.RWLock("k")
	ctx := ctxT(t)
	w, err := rw.Lock(ctx, lock.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	w2, err := rw.Lock(ctx, lock.WithOwner("o"))
	if err != nil || w2.Fence() != w.Fence() || w2.Holds() != 2 {
		t.Fatalf("write then write: %v (fence %d, holds %d), want fence %d and 2 holds", err, w2.Fence(), w2.Holds(), w.Fence())
	}
	r, err := rw.RLock(ctx, lock.WithOwner("o"))
	if err != nil || r.Fence() != w.Fence() {
		t.Fatalf("write then read: %v", err)
	}
	if _, err := orw.TryRLock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another reader beside a write hold: %v", err)
	}
	for _, l := range []*lock.Lease{w2, w} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Redisson's bug ran the other way (a read unlock deleted the lock
	// under a write hold); here the write holds are gone and the read
	// hold stays.
	if _, err := r.TTLLeft(ctx); err != nil {
		t.Fatalf("the read hold after the write holds' release: %v", err)
	}
	o2, err := orw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("another reader after the downgrade: %v", err)
	}
	if _, err := orw.TryLock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a writer beside two readers: %v", err)
	}
	r2, err := r.Reenter(ctx)
	if err != nil || r2.Mode() != lock.ModeRead {
		t.Fatalf("read then read: %v", err)
	}
	if _, err := rw.Lock(ctx, lock.WithOwner("o")); !errors.Is(err, lock.ErrUpgrade) {
		t.Fatalf("read then write: %v, want ErrUpgrade", err)
	}
	if n, err := rdb.ZCard(ctx, rw.Keys().Queue).Result(); err != nil || n != 0 {
		t.Fatalf("line after a refused upgrade: %d, %v", n, err)
	}
	for _, l := range []*lock.Lease{r2, r, o2} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := orw.TryLock(ctx); err != nil {
		t.Fatalf("a writer once all holds are released: %v", err)
	}
}

// TestRWNestedShorterHoldExpiresAlone: a nested write hold with a shorter
// TTL expires by itself; the outer hold stands (Redisson's shorter
// reentrant write hold released the whole lock when it expired).
func TestRWNestedShorterHoldExpiresAlone(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	other := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	ctx := ctxT(t)
	w, err := c.RWLock("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := w.Reenter(ctx, lock.WithTTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the nested hold's expiry", func() bool {
		_, err := inner.TTLLeft(ctx)
		return errors.Is(err, lock.ErrNotHeld)
	})
	if _, err := w.TTLLeft(ctx); err != nil {
		t.Fatalf("the outer hold after the nested one expired: %v", err)
	}
	if _, err := other.RWLock("k").TryRLock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a reader beside the outer write hold: %v", err)
	}
	if err := inner.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of the expired nested hold: %v, want ErrNotHeld", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphorePermits: goroutines on three clients take 1 or 2 of 3
// permits; never more than 3 are out, and more than one holder shares.
func TestSemaphorePermits(t *testing.T) {
	p := redistest.Start(t)
	var (
		out, most atomic.Int32
		wg        sync.WaitGroup
		bad       failures
	)
	for i := 0; i < 3; i++ {
		s, err := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second}).Semaphore("s", 3)
		if err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				for it := 0; it < 12; it++ {
					k := 1 + (it+g)%2
					l, err := s.Acquire(ctx, k)
					if err != nil {
						bad.add("acquire: %v", err)
						return
					}
					n := out.Add(int32(k))
					raise(&most, n)
					if n > 3 || l.Permits() != k {
						bad.add("%d permits out, lease says %d of %d", n, l.Permits(), k)
					}
					time.Sleep(time.Millisecond)
					out.Add(-int32(k))
					if err := l.Release(ctx); err != nil {
						bad.add("release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	bad.report(t)
	if most.Load() < 2 {
		t.Errorf("at most %d permit out at once", most.Load())
	}
}

// TestSemaphoreCrashedHolderExpires: a holder that stops renewing gives
// its permits back within its own TTL, while a live holder keeps the
// semaphore's key alive, and a waiter gets them.
func TestSemaphoreCrashedHolderExpires(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	s, _ := c.Semaphore("s", 2)
	ctx := ctxT(t)
	live, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.Acquire(ctx, 1, lock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// dead crashed: it is never released nor renewed.
	start := time.Now()
	l, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v for a crashed holder's permit (TTL 300ms)", waited)
	}
	if l.Fence() <= dead.Fence() {
		t.Fatalf("fence %d not above the crashed holder's %d", l.Fence(), dead.Fence())
	}
	if err := dead.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of the expired permit: %v, want ErrNotHeld", err)
	}
	for _, h := range []*lock.Lease{l, live} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSemaphoreFIFO: a waiter asking for 2 is not overtaken by a later one
// asking for 1; changing N while permits are out admits by the call's N.
func TestSemaphoreFIFO(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	s, _ := c.Semaphore("s", 2)
	ctx := ctxT(t)
	a, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 1)
	queued := make(chan struct{})
	go func() {
		l, err := s.Acquire(ctx, 2, lock.WithQueued(func() { close(queued) }))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	await(t, "the waiter for 2 in line", queued)
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a later call for 1 permit overtook the waiter for 2: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var b *lock.Lease
	select {
	case b = <-got:
	case <-time.After(bound):
		t.Fatalf("the waiter for 2 not served within %v", bound)
	}
	if b == nil || b.Permits() != 2 {
		t.Fatal("the waiter for 2 was not served")
	}
	bigger, _ := c.Semaphore("s", 3)
	if l, err := bigger.TryAcquire(ctx, 1); err != nil {
		t.Fatalf("N raised to 3 with 2 out: %v", err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	smaller, _ := c.Semaphore("s", 1)
	if _, err := smaller.TryAcquire(ctx, 1); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("N lowered to 1 with 2 out admitted: %v", err)
	}
	info, err := s.Inspect(ctx)
	if err != nil || info.Permits() != 2 || len(info.Holds) != 1 || info.Holds[0].Mode != lock.ModePermits {
		t.Fatalf("inspect: %+v, %v", info, err)
	}
	if _, err := b.Reenter(ctx); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("reenter of permits: %v, want ErrInvalid", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphore("s", 0); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("N = 0: %v", err)
	}
	if _, err := s.Acquire(ctx, 3); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("3 of 2 permits: %v", err)
	}
}

// TestSharedWatchdog: a permit's watchdog keeps it past its TTL (the
// semaphore's one permit stays out), and a read hold's renewal (Renew)
// extends that hold.
func TestSharedWatchdog(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	ctx := ctxT(t)
	s, _ := c.Semaphore("s", 1)
	l, err := s.Acquire(ctx, 1, lock.WithTTL(150*time.Millisecond), lock.WithWatchdog(true))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.RWLock("k").RLock(ctx, lock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := r.RenewFor(ctx, 5*time.Second); err != nil {
		t.Fatalf("renew the read hold: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a second permit of 1 while the watchdog renews the first: %v", err)
	}
	if left, err := r.TTLLeft(ctx); err != nil || left < time.Second {
		t.Fatalf("the renewed read hold: %v left, %v", left, err)
	}
	for _, h := range []*lock.Lease{l, r} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
