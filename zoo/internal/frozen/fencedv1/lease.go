package fencedv1

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is one hold of a lock. Its methods are safe for concurrent use.
//
// A lease ends when it is released (Release) or lost: its validity deadline
// passed without a successful renewal, or a renewal found the lock taken.
// Loss closes Lost() and cancels Context() with cause ErrLost.
type Lease struct {
	c     *Client
	key   string
	keys  Keys
	owner string
	fence uint64
	holds int64
	ttl   time.Duration
	drift float64

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}

	mu         sync.Mutex
	validUntil time.Time // local monotonic clock
	done       bool      // released or lost
	released   bool      // ended by Release
	expiry     *time.Timer
	wd         *time.Timer        // next watchdog renewal; nil without watchdog
	wdCtx      context.Context    // canceled when the lease ends
	stopWD     context.CancelFunc // cancels wdCtx
}

func newLease(c *Client, key string, keys Keys, owner string, fence uint64, holds int64, cfg callConfig, start time.Time) *Lease {
	l := &Lease{
		c: c, key: key, keys: keys, owner: owner, fence: fence, holds: holds,
		ttl: cfg.ttl, drift: c.opts.Drift, lost: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.validUntil = l.deadline(start)
	l.expiry = time.AfterFunc(time.Until(l.validUntil), l.checkExpiry)
	if cfg.watchdog {
		l.wdCtx, l.stopWD = context.WithCancel(context.Background())
		l.wd = time.AfterFunc(l.ttl/3, l.watchdogTick)
	}
	return l
}

func (l *Lease) deadline(start time.Time) time.Time {
	return start.Add(time.Duration(float64(l.ttl) * (1 - l.drift)))
}

// Key returns the lock key the lease holds.
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Owner returns the owner token (128 random bits, hex, unless given WithOwner).
// Pass it to WithOwner to re-enter the lock.
func (l *Lease) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// Fence returns the fencing token. Fences of successive holders of a key
// strictly increase; a reentrant hold has its owner's fence. Resources must
// reject writes carrying a fence below the highest they have seen.
func (l *Lease) Fence() uint64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Holds returns the owner's hold count right after this acquire (1 unless reentrant).
func (l *Lease) Holds() int64 {
	if l == nil {
		return 0
	}
	return l.holds
}

// TTL returns the lease length asked for.
func (l *Lease) TTL() time.Duration {
	if l == nil {
		return 0
	}
	return l.ttl
}

// ValidUntil returns the time until which the lease is surely valid: the start
// of the last successful acquire or renew + TTL×(1−drift). It carries a
// monotonic clock reading; compare it with time.Now() or time.Until.
func (l *Lease) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Lost returns a channel closed when the lease is lost (not when released).
func (l *Lease) Lost() <-chan struct{} {
	if l == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return l.lost
}

// Context returns a context to run the guarded work under. It is canceled
// when the lease is lost (context.Cause wraps ErrLost) or released (cause
// ErrReleased). It carries no deadline: loss is signaled by cancellation.
func (l *Lease) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("nil lease: %w", ErrInvalid))
		return ctx
	}
	return l.ctx
}

// Release frees this hold. The lock is freed when its owner's hold count
// reaches zero; then the next waiter is woken. Errors: ErrNotHeld when the
// lock expired or was taken (or the lease was already released or lost) and
// ErrUnknownOutcome when the reply was lost (the lock is freed or expires
// within its TTL). Release ends the lease whatever the outcome: it stops the
// watchdog and cancels Context; a second Release returns ErrNotHeld.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("release: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("release %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("release %q: already released: %w", l.key, ErrNotHeld)
	}
	l.released = true
	l.finishLocked(ErrReleased)
	l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("release %q: %w", l.key, context.Cause(ctx))
	}
	reply, err := l.c.run(ctx, releaseScript, []string{l.keys.Lock, l.keys.Fence, l.keys.Queue, l.keys.QueueDeadlines}, l.owner, l.keys.Channel)
	if err != nil {
		if outcomeUnknown(err) {
			return unknown(ctx, "release", l.key, err)
		}
		return fmt.Errorf("release %q: %w", l.key, err)
	}
	vals, _ := reply.([]any)
	if len(vals) == 0 {
		return fmt.Errorf("release %q: unexpected reply %v", l.key, reply)
	}
	if n, _ := vals[0].(int64); n < 0 {
		return fmt.Errorf("release %q: expired or taken by another owner: %w", l.key, ErrNotHeld)
	}
	if len(vals) > 1 {
		// Tell the next waiter at once if it waits in this process; the
		// publish reaches waiters elsewhere (and this one again, harmlessly).
		if msg, _ := vals[1].(string); msg != "" {
			l.c.notes.deliverLocal(l.keys.Channel, msg)
		}
	}
	return nil
}

// Renew extends the lease by its TTL from now. Errors: ErrNotHeld when the
// lock expired or was taken (the lease is then lost) or the lease already
// ended; ErrUnknownOutcome when the reply was lost (the lease is unchanged).
func (l *Lease) Renew(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("renew: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("renew %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	return l.renew(ctx)
}

func (l *Lease) renew(ctx context.Context) error {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done {
		return fmt.Errorf("renew %q: lease ended (%v): %w", l.key, context.Cause(l.ctx), ErrNotHeld)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew %q: %w", l.key, context.Cause(ctx))
	}
	start := time.Now()
	reply, err := l.c.run(ctx, renewScript, []string{l.keys.Lock}, l.owner, l.ttl.Milliseconds())
	if err != nil {
		if outcomeUnknown(err) {
			return unknown(ctx, "renew", l.key, err)
		}
		return fmt.Errorf("renew %q: %w", l.key, err)
	}
	if n, _ := reply.(int64); n != 1 {
		l.lose("renewal found the lock expired or taken")
		return fmt.Errorf("renew %q: expired or taken by another owner: %w", l.key, ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return fmt.Errorf("renew %q: lease ended (%v): %w", l.key, context.Cause(l.ctx), ErrNotHeld)
	}
	if v := l.deadline(start); v.After(l.validUntil) {
		l.validUntil = v
		l.expiry.Reset(time.Until(v))
	}
	return nil
}

// checkExpiry runs when the validity deadline may have passed.
func (l *Lease) checkExpiry() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	if d := time.Until(l.validUntil); d > 0 {
		l.expiry.Reset(d)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose("validity deadline passed without a renewal")
}

// lose ends the lease as lost (no-op when it already ended).
func (l *Lease) lose(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.finishLocked(fmt.Errorf("lease %q fence %d: %s: %w", l.key, l.fence, why, ErrLost))
	close(l.lost)
	l.c.opts.Logger.Warn("fencedv1: lease lost", "key", l.key, "fence", l.fence, "reason", why)
}

// finishLocked ends the lease with cause (first cause wins).
func (l *Lease) finishLocked(cause error) {
	if l.done {
		return
	}
	l.done = true
	l.expiry.Stop()
	if l.wd != nil {
		l.wd.Stop()
		l.stopWD()
	}
	l.cancel(cause)
}

// watchdogTick renews the lease; it runs every TTL/3 (a timer, so a lease
// costs no goroutine between renewals) until the lease ends. A renewal that
// finds the lock taken loses the lease at once; failed renewals are retried
// sooner, and when none succeeds before the validity deadline the expiry
// timer loses the lease.
func (l *Lease) watchdogTick() {
	l.mu.Lock()
	ctx, done, valid := l.wdCtx, l.done, l.validUntil
	l.mu.Unlock()
	if done {
		return
	}
	interval := l.ttl / 3
	rctx, cancel := context.WithDeadline(ctx, valid)
	err := l.renew(rctx)
	cancel()
	var next time.Duration
	switch {
	case err == nil:
		next = interval
	case errors.Is(err, ErrNotHeld) || ctx.Err() != nil:
		return
	default:
		l.c.opts.Logger.Warn("fencedv1: watchdog renewal failed; retrying", "key", l.key, "err", err)
		next = max(min(interval/4, time.Until(l.ValidUntil())), time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.wd.Reset(next)
	}
}

// unknown wraps a lost reply: ErrUnknownOutcome, the error, and the caller's
// ctx cause when its deadline passed mid-command.
func unknown(ctx context.Context, op, key string, err error) error {
	if cerr := context.Cause(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s %q: %w: %w (%w)", op, key, ErrUnknownOutcome, err, cerr)
	}
	return fmt.Errorf("%s %q: %w: %w", op, key, ErrUnknownOutcome, err)
}
