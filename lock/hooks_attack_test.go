package lock_test

// An attack on Hooks.Begin and Hooks.Event as first written (a0d2360):
// each test but TestHooksEveryBeginEndsOnce failed on that commit, and its
// comment says what it found there (the lines named are of that commit).

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestHooksLostEventNamesTheAcquiresOp: Event.Op is "the call the event
// belongs to (Call.Op's names)"; a loss belongs to the acquire that got the
// lease. lease.go's lose() hard-codes Op "acquire", so the loss of a
// TryAcquire's lease, a read hold's or a semaphore's permits is reported
// as a plain "acquire" (lockotel's lock.lost then counts it under
// lock.op=acquire, an op no Begin of those calls ever had).
func TestHooksLostEventNamesTheAcquiresOp(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	begun := map[*lock.Lease]string{} // the acquire's Call.Op, by lease
	lostOp := map[*lock.Lease]string{}
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			return ctx, func(r lock.Result) {
				if call.Lease == nil && r.Lease != nil {
					mu.Lock()
					begun[r.Lease] = call.Op
					mu.Unlock()
				}
			}
		},
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventLost {
				mu.Lock()
				lostOp[e.Lease] = e.Op
				mu.Unlock()
			}
		},
	}})
	short := []lock.AcquireOption{lock.WithTTL(20 * time.Millisecond), lock.WithWatchdog(false)}
	try, err := c.TryAcquire(ctxT(t), "try", short...)
	if err != nil {
		t.Fatal(err)
	}
	read, err := c.RWLock("rw").RLock(ctxT(t), short...)
	if err != nil {
		t.Fatal(err)
	}
	sem, err := c.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	permits, err := sem.Acquire(ctxT(t), 1, short...)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*lock.Lease{try, read, permits} {
		select {
		case <-l.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("a 20ms lease was not lost")
		}
	}
	eventually(t, "the three losses reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(lostOp) == 3 })
	mu.Lock()
	defer mu.Unlock()
	for _, l := range []*lock.Lease{try, read, permits} {
		if lostOp[l] != begun[l] {
			t.Errorf("the loss of a lease of %q was reported with Op %q", begun[l], lostOp[l])
		}
	}
}

// TestHooksEventHookMayReadTheLostLease: Event(EventLost) hands the hook
// the lease (Event.Lease), but lose() calls the hook with the lease's
// mutex held (lease.go, lose: `defer l.mu.Unlock()` around
// Hooks.event). A hook that reads the lease it is given with any accessor
// that takes the mutex (ValidUntil, TTL, Lost, Context; Release too)
// deadlocks the expiry timer's goroutine, and with it every later call on
// that lease. The doc forbids calling "back into the lock", but Fence,
// Key, Mode, Holds... are fine and ValidUntil is not: nothing says which.
// A span exporter behind the hook (a SimpleSpanProcessor) also runs under
// that mutex.
func TestHooksEventHookMayReadTheLostLease(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	returned := make(chan time.Time, 1)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventLost {
				returned <- e.Lease.ValidUntil() // when did the lost lease stop being valid?
			}
		},
	}})
	l := mustAcquire(t, c, "k", lock.WithTTL(20*time.Millisecond), lock.WithWatchdog(false))
	select {
	case <-returned:
	case <-time.After(3 * time.Second):
		t.Fatal("the Event hook of a loss, reading Event.Lease.ValidUntil(), never returned: lose() holds the lease's mutex while it calls the hook (deadlock)")
	}
	_ = l
}

// TestHooksBeginReenter: Begin is "called as each call starts (an
// acquire of any kind, ...)". Lease.Reenter takes a hold (a lease of its
// own, released by a Release that Begin does see), yet it never goes
// through Begin (lease.go Reenter runs the reenter script and a.finish
// without Hooks.begin; a.obs stays nil), so it has no span in lockotel,
// and the loss of its lease is reported under context.Background instead
// of the call's context.
func TestHooksBeginReenter(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	type tag struct{}
	var mu sync.Mutex
	var ops []string
	lostCtx := make(chan context.Context, 2)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			mu.Lock()
			ops = append(ops, call.Op)
			mu.Unlock()
			return context.WithValue(ctx, tag{}, call.Op), nil
		},
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventLost {
				lostCtx <- ctx
			}
		},
	}})
	outer := mustAcquire(t, c, "k")
	inner, err := outer.Reenter(ctxT(t), lock.WithTTL(20*time.Millisecond), lock.WithWatchdog(false))
	if err != nil {
		t.Fatal(err)
	}
	<-inner.Lost()
	ctx := <-lostCtx
	if err := outer.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ops) != 3 { // acquire, reenter, release
		t.Errorf("Begin saw %v: the Reenter call is missing", ops)
	}
	if ctx.Value(tag{}) == nil {
		t.Errorf("the loss of the reentered lease was reported under a context no Begin returned (context.Background)")
	}
}

// TestHooksLossAfterTheAcquireEnds: the loss is reported "under
// the acquire's [context] after that call returned" (TestHooksCarryTheCallsContext).
// A lease whose validity ran out while its acquire's reply was in transit
// (the server froze for longer than the TTL) is born lost: newLease arms
// the expiry timer with a deadline already passed (lease.go newLease,
// time.AfterFunc(time.Until(l.validUntil), ...)), whose goroutine
// reports EventLost at once, racing the acquire's own end func
// (client.go acquireKind: end(r) after acquireAny returned). A consumer
// that opens state at the acquire's end and closes it on the loss
// (lockotel's hold span) then sees the loss first and never closes it.
// Here the acquire's end is merely slowed by an OnAcquire hook that logs;
// any scheduling delay does the same.
func TestHooksLossAfterTheAcquireEnds(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	var order []string
	c := newLocks(t, rdb, lock.Options{TTL: 50 * time.Millisecond, Hooks: lock.Hooks{
		OnAcquire: func(key string, took time.Duration, err error) {
			time.Sleep(5 * time.Millisecond) // a slow log write
		},
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			return ctx, func(r lock.Result) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, "end "+call.Op)
			}
		},
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventLost {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, "lost")
			}
		},
	}})
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var l *lock.Lease
	go func() {
		var err error
		l, err = c.Acquire(ctxT(t), "k", lock.WithWatchdog(false))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // longer than the TTL, well within go-redis's 3s read timeout
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	eventually(t, "the loss reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if order[0] != "end acquire" {
		t.Errorf("hook order %v: the lease's loss was reported before its acquire ended", order)
	}
}

// TestHooksPermitOpName: Call.Op is documented as "acquire" or
// "try-acquire" with "-permit" for a semaphore (observe.go); acquireKind
// builds it from Lease.Mode(), "permits".
func TestHooksPermitOpName(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	var ops []string
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			mu.Lock()
			ops = append(ops, call.Op)
			mu.Unlock()
			return ctx, nil
		},
	}})
	sem, err := c.Semaphore("s", 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sem.Acquire(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctxT(t))
	mu.Lock()
	defer mu.Unlock()
	if ops[0] != "acquire-permits" {
		t.Errorf("a semaphore's acquire is Call.Op %q; Call's doc says \"acquire-permits\"", ops[0])
	}
}

// hookTag is the tag Begin puts on a call's context in the review's
// accounting tests.
type hookTag struct{}

// ctxCounter is a go-redis hook that counts the commands sent under each
// tagged context.
type ctxCounter struct {
	mu   sync.Mutex
	sent map[int]int
}

func (h *ctxCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *ctxCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *ctxCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n, ok := ctx.Value(hookTag{}).(int); ok {
			h.mu.Lock()
			h.sent[n]++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestHooksEveryBeginEndsOnce: every Begin's end func runs
// exactly once, whatever the path (an error before sending, a canceled
// ctx, a try refused, a wait canceled, WithRetry giving up and losing a
// reply, an upgrade refused, Close during a wait, concurrent Releases and
// one after the release, RenewFor, Renew of a released lease, watchdog
// renewals that fail while the server is frozen, a release whose reply
// is lost), and the commands of a call that sends carry the context Begin
// returned.
func TestHooksEveryBeginEndsOnce(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	cc := &ctxCounter{sent: map[int]int{}}
	rdb.AddHook(cc)
	var mu sync.Mutex
	n := 0
	ops := map[int]string{}
	ends := map[int]int{}
	errs := map[int]error{}
	hooks := lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			mu.Lock()
			defer mu.Unlock()
			n++
			id := n
			ops[id] = call.Op
			return context.WithValue(ctx, hookTag{}, id), func(r lock.Result) {
				mu.Lock()
				defer mu.Unlock()
				ends[id]++
				errs[id] = r.Err
			}
		},
		Event: func(ctx context.Context, e lock.Event) {},
	}
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: hooks})
	ctx := ctxT(t)

	_, _ = c.Acquire(ctx, "k", lock.WithTTL(time.Microsecond)) // invalid
	dead, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = c.Acquire(dead, "k") // ctx done before sending
	holder := mustAcquire(t, c, "k")
	_, _ = c.TryAcquire(ctx, "k") // refused
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = c.Acquire(wctx, "k") // canceled mid-wait
	wcancel()
	_, _ = c.Acquire(ctx, "k", lock.WithRetry(lock.LimitRetry(lock.LinearBackoff(5*time.Millisecond), 2))) // gives up
	rw := c.RWLock("rw")
	r, err := rw.RLock(ctx, lock.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rw.Lock(ctx, lock.WithOwner("o"))    // upgrade refused
	_, _ = rw.TryLock(ctx, lock.WithOwner("o")) // upgrade refused
	_ = r.Release(ctx)

	// Close during a wait: the wait gets the lock after Close and gives it back.
	c2, err := lock.New(rdb, lock.Options{TTL: time.Minute, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { _, err := c2.Acquire(ctx, "k"); waited <- err }()
	eventually(t, "the waiter in line", func() bool { return queueLen(t, rdb, "k") == 1 })
	_ = c2.Close(ctx)
	_ = holder.Release(ctx)
	<-waited

	l := mustAcquire(t, c, "k")
	_ = l.RenewFor(ctx, 2*time.Minute)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Release(ctx) }()
	}
	wg.Wait()
	_ = l.Release(ctx) // after the release
	_ = l.Renew(ctx)   // of a released lease

	// Frozen server: watchdog renewals fail, a release's and a retry's replies are lost.
	wd := mustAcquire(t, c, "wd", lock.WithTTL(300*time.Millisecond), lock.WithWatchdog(true))
	un := mustAcquire(t, c, "un")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = un.Release(rctx)
	rcancel()
	rctx, rcancel = context.WithTimeout(ctx, 100*time.Millisecond)
	_, _ = c.Acquire(rctx, "r", lock.WithRetry(lock.LinearBackoff(5*time.Millisecond)))
	rcancel()
	<-wd.Lost()
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if err := c.Close(cctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for id := 1; id <= n; id++ {
		if ends[id] != 1 {
			t.Errorf("call #%d (%s): its end func ran %d times (err %v)", id, ops[id], ends[id], errs[id])
		}
		t.Logf("#%d %-22s sent %d under its ctx; %v", id, ops[id], cc.sent[id], errs[id])
	}
}

// TestHooksNoLossOfALeaseCloseTookBack: an acquire WithWatchdog that Close
// overtakes between finish's isClosed check and the watchdog's start
// (client.go finish: `if a.cfg.watchdog && !l.watched() {
// l.StopWatchdog(); return nil, a.closedMeanwhile(ctx) }`) gives its hold
// back and returns an error, but the Lease it made keeps its expiry timer
// (armed by newLease because Hooks.Event is set): a TTL later Event
// reports EventLost (lockotel: lock.lost +1, a "lease lost" warning) for
// a lease no call ever returned, under the context of an acquire whose
// end func was told it failed. The same path fires OnLost.
func TestHooksNoLossOfALeaseCloseTookBack(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	var mu sync.Mutex
	lost := map[*lock.Lease]bool{}
	returned := map[*lock.Lease]bool{}
	hooks := lock.Hooks{
		Begin: func(ctx context.Context, call lock.Call) (context.Context, func(lock.Result)) {
			return ctx, func(r lock.Result) {
				if r.Lease != nil {
					mu.Lock()
					returned[r.Lease] = true
					mu.Unlock()
				}
			}
		},
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventLost {
				mu.Lock()
				lost[e.Lease] = true
				mu.Unlock()
			}
		},
	}
	closed := 0
	for i := range 2000 {
		c, err := lock.New(rdb, lock.Options{TTL: 20 * time.Millisecond, Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			l, err := c.Acquire(context.Background(), "k", lock.WithWatchdog(true))
			if err == nil {
				_ = l.Release(context.Background())
			} else if errors.Is(err, lock.ErrClosed) {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(i%300) * time.Microsecond)
		_ = c.Close(context.Background())
		<-done
	}
	time.Sleep(200 * time.Millisecond) // the leases' TTL, ten times over
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for l := range lost {
		if !returned[l] {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d losses reported of leases no acquire returned (%d acquires refused with ErrClosed)", bad, closed)
	}
}

// TestHooksHandoffAgeWithTheFenceAhead: EventHandoff's Took is computed
// as the pickup's server time minus the hand-off's fence (scripts.go, the
// pickup: `return {1, tonumber(fs), n, us - tonumber(fs)}`), taking the
// fence for the server's clock at the hand-off. The fence is max(counter+1,
// clock): with the counter ahead of the clock (TestFenceAboveClock's case,
// a counter left by a master with a faster clock, which the package
// supports) every hand-off's age comes out negative and is clamped to 0
// (client.go try: max(..., 0)): lock.handoff.duration then records 0s
// for every hand-off of the key, however long the pickup took.
func TestHooksHandoffAgeWithTheFenceAhead(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	if err := rdb.Set(ctxT(t), lock.RedisKeys("k").Fence, uint64(1)<<52, 0).Err(); err != nil {
		t.Fatal(err)
	}
	took := make(chan time.Duration, 1)
	c := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventHandoff {
				took <- e.Took
			}
		},
	}})
	// The waiter is in another Client (no local delivery of the hand-off).
	c2 := newLocks(t, rdb, lock.Options{TTL: time.Minute, Hooks: lock.Hooks{
		Event: func(ctx context.Context, e lock.Event) {
			if e.Kind == lock.EventHandoff {
				took <- e.Took
			}
		},
	}})
	holder := mustAcquire(t, c, "k")
	got := make(chan *lock.Lease, 1)
	go func() { got <- mustAcquire(t, c2, "k") }()
	eventually(t, "the waiter in line", func() bool { return queueLen(t, rdb, "k") == 1 })
	released := time.Now()
	if err := holder.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w := <-got
	local := time.Since(released)
	d := <-took
	_ = w.Release(ctxT(t))
	// The fence counter is ahead of the clock: the server cannot tell the
	// age, and says 0 (EventHandoff's doc), not a wrong figure.
	if d != 0 {
		t.Errorf("the hand-off's age with the fence 2^52 µs ahead: %v (the pickup came within %v of the release); want 0, unknown", d, local)
	}
}
