package lock_test

// A second attack on the hooks, against the fixes of 6c549a2 and the
// commit after it (a loss reported after the acquire's end and outside the
// lease's mutex, Reenter through Begin): each test failed there.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// slowLossLog is a slog handler whose write of the "lease lost" warning
// takes a while (a JSON handler on a busy stderr pipe, a remote sink).
type slowLossLog struct{ d time.Duration }

func (h slowLossLog) Enabled(context.Context, slog.Level) bool { return true }
func (h slowLossLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "lock: lease lost" {
		time.Sleep(h.d)
	}
	return nil
}
func (h slowLossLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h slowLossLog) WithGroup(string) slog.Handler      { return h }

// hookLog records the hooks' calls in order.
type hookLog struct {
	mu    sync.Mutex
	order []string
}

func (h *hookLog) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.order = append(h.order, s)
}

func (h *hookLog) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

func (h *hookLog) has(s string) bool {
	for _, o := range h.get() {
		if o == s {
			return true
		}
	}
	return false
}

func (h *hookLog) index(s string) int {
	for i, o := range h.get() {
		if o == s {
			return i
		}
	}
	return -1
}

// lostThenReleased acquires a lease without watchdog, waits for Lost,
// releases it at once (within the drift allowance: Redis still keeps the
// hold, so the release succeeds, unless it waited for the loss's hooks)
// and returns the release's error.
func lostThenReleased(t *testing.T, c *lock.Client, h *hookLog) error {
	t.Helper()
	l := mustAcquire(t, c, "k", lock.WithWatchdog(false))
	select {
	case <-l.Lost():
	case <-time.After(bound):
		t.Fatal("the lease was not lost")
	}
	err := l.Release(ctxT(t))
	h.add("Release returned")
	return err
}

// TestHooksAgainOnLostAfterTheRelease: lose() (lease.go) now closes Lost,
// unlocks l.mu, logs the warning and only then calls reportLoss. Until
// 6c549a2 OnLost ran under l.mu (ccce674's lose: `defer l.mu.Unlock()`
// around Logger.Warn and OnLost), so a Release, which takes l.mu first,
// ran after it: a lease's OnLost always came before the Release of the
// lost lease. Now a Release made as soon as Lost is closed runs in the
// window between the unlock and the hook: it succeeds, OnRelease reports
// the lease released (nil), Release returns, and OnLost reports the loss
// of a lease released before. A user with OnLost alone (no Begin, no
// Event) sees the old hook's order change. The window is widened here by
// a slow log write; the same happens when the timer's goroutine is
// descheduled after the unlock.
func TestHooksAgainOnLostAfterTheRelease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	h := &hookLog{}
	c := newLocks(t, rdb, lock.Options{
		TTL: 400 * time.Millisecond, Drift: 0.5, // valid 200ms, held 400ms in Redis
		Logger: slog.New(slowLossLog{300 * time.Millisecond}),
		Hooks: lock.Hooks{
			OnLost:    func(string, uint64, error) { h.add("OnLost") },
			OnRelease: func(_ string, _ time.Duration, err error) { h.add("OnRelease") },
		},
	})
	relErr := lostThenReleased(t, c, h)
	if relErr != nil && !errors.Is(relErr, lock.ErrNotHeld) {
		t.Fatalf("release of the lost lease: %v", relErr)
	}
	eventually(t, "OnLost", func() bool { return h.has("OnLost") })
	if h.index("OnLost") > h.index("OnRelease") {
		t.Errorf("hook order %v: OnLost came after the lease was released (Release returned %v)", h.get(), relErr)
	}
}

// TestHooksAgainEventLostAfterTheReleasesEnd: the same window with Begin
// and Event (lockotel's hooks): the release's end func is told the lease
// was released (nil: lockotel ends its hold span "ok" and records its
// hold duration), and EventLost comes after it, for a lease its consumer
// has closed already (lockotel: lock.lost +1 for a hold whose span says
// "ok"). Under l.mu, as before 6c549a2, the release waited for the loss's
// hooks and the span ended "lost".
func TestHooksAgainEventLostAfterTheReleasesEnd(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	h := &hookLog{}
	c := newLocks(t, rdb, lock.Options{
		TTL: 400 * time.Millisecond, Drift: 0.5,
		Logger: slog.New(slowLossLog{300 * time.Millisecond}),
		Hooks: lock.Hooks{
			Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
				return ctx, func(r lock.Result) {
					if call.Op == "release" {
						h.add("end release")
					}
				}
			},
			Event: func(ctx context.Context, e lock.Event) {
				if e.Kind == lock.EventLost {
					h.add("EventLost")
				}
			},
		},
	})
	relErr := lostThenReleased(t, c, h)
	if relErr != nil && !errors.Is(relErr, lock.ErrNotHeld) {
		t.Fatalf("release of the lost lease: %v", relErr)
	}
	eventually(t, "EventLost", func() bool { return h.has("EventLost") })
	if h.index("EventLost") > h.index("end release") {
		t.Errorf("hook order %v: EventLost came after the release's end func (Release returned %v)", h.get(), relErr)
	}
}

// TestHooksAgainReenterSendsNothingYetUnknown: Reenter now goes through
// Begin, so its error is a Result.Err, whose doc says ErrUnknownOutcome
// means "the reply was lost: the call may have taken effect". A Reenter
// of a lease whose Release had an unknown outcome sends nothing (reenter:
// `if done, cause := l.ended(); done { return nil, fmt.Errorf("reenter
// %q: the lease ended (%w): %w", l.key, cause, ErrNotHeld) }`), but wraps
// the release's cause with %w, so its error is ErrUnknownOutcome (and
// context.DeadlineExceeded) as well as ErrNotHeld: the end func (lockotel:
// lock.outcome "unknown", lock.unknown_outcomes +1) and the caller are
// told a hold may have been taken. Renew of the same lease formats the
// cause with %v and says ErrNotHeld alone.
func TestHooksAgainReenterSendsNothingYetUnknown(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	var reenterErr error
	ended := false
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			return ctx, func(r lock.Result) {
				if call.Op == "reenter" {
					mu.Lock()
					reenterErr, ended = r.Err, true
					mu.Unlock()
				}
			}
		},
	}})
	l := mustAcquire(t, c, "k")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := l.Release(ctx)
	cancel()
	if rerr := p.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("release while the server is frozen: %v, want ErrUnknownOutcome", err)
	}
	_, err = l.Reenter(ctxT(t))
	if !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("reenter of an ended lease: %v, want ErrNotHeld", err)
	}
	if errors.Is(err, lock.ErrUnknownOutcome) {
		t.Errorf("Reenter sent nothing, yet its error says ErrUnknownOutcome (a hold may have been taken): %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !ended {
		t.Fatal("the reenter's end func did not run")
	}
	if errors.Is(reenterErr, lock.ErrUnknownOutcome) {
		t.Errorf("the reenter's end func was told ErrUnknownOutcome for a call that sent nothing: %v", reenterErr)
	}
	if rerr := l.Renew(ctxT(t)); errors.Is(rerr, lock.ErrUnknownOutcome) {
		t.Logf("Renew says unknown too: %v", rerr)
	}
}

// TestHooksAgainOnLostOnTheTimersGoroutine: Hooks' doc says hooks run "on
// the caller's goroutine (OnLost: the watchdog's or expiry timer's)". A
// lease born lost (its validity ran out while the acquire's reply was in
// transit: the server froze longer than the TTL) now has its loss parked
// in lossUnannounced, and announce (client.go acquired: `l.announce()`)
// calls OnLost on the acquire's caller's goroutine, before Acquire
// returns. A caller that holds a mutex of its own around Acquire, which
// its OnLost also takes (the doc's goroutine allows it: before 6c549a2
// OnLost waited on the timer's goroutine until the caller let go),
// deadlocks in Acquire. (The OnAcquire hook that logs slowly, as in
// TestHooksLossAfterTheAcquireEnds, lets the born-lost lease's expiry
// timer fire before announce; without it this happens when the timer's
// goroutine wins the race.)
func TestHooksAgainOnLostOnTheTimersGoroutine(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var app sync.Mutex // the application's own state
	lostCalls := 0
	c := newLocks(t, rdb, lock.Options{TTL: 50 * time.Millisecond, Hooks: lock.Hooks{
		OnAcquire: func(string, time.Duration, error) {
			time.Sleep(5 * time.Millisecond) // a slow log write: the expiry timer fires meanwhile
		},
		OnLost: func(string, uint64, error) {
			app.Lock()
			lostCalls++
			app.Unlock()
		},
	}})
	warm := mustAcquire(t, c, "warm") // scripts cached, connection open
	if err := warm.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		app.Lock()
		defer app.Unlock()
		_, err := c.Acquire(ctxT(t), "k", lock.WithWatchdog(false))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // four TTLs, well within go-redis's 3s read timeout
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return: OnLost ran on the caller's goroutine, which holds the mutex OnLost takes")
	}
	eventually(t, "OnLost", func() bool { app.Lock(); defer app.Unlock(); return lostCalls == 1 })
}
