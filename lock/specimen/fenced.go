package specimen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/lock"
)

// Fenced adapts the production lock (package lock) to Locker: an owner
// token, a fencing counter and a TTL in one Lua script per operation. It is
// the lock the harness is meant to confirm.
//
// What it guarantees and where it breaks: G1 holds on one master under
// pauses, latency and partitions; a failover with asynchronous replication
// loses the lock (G1 breaks under failover). Fences strictly increase, so
// with a fenced resource G2 holds under every fault, failover included.
// Renew extends by the TTL the lease was acquired with: a different ttl is
// refused with ErrInvalid.
//
// With Deps.Fenced.Watchdog on, the adapter runs the watchdog itself,
// following package lock's algorithm (renew with Lease.Renew every TTL/3;
// after an error other than ErrNotHeld retry after TTL/12, bounded by the
// validity deadline; stop on ErrNotHeld or when the lease ends), because
// package lock has no hook to report its own renewals: this way every
// renewal is announced to Deps.Observer, and Close stops the watchdogs (a
// crash), as Locker requires.
type Fenced struct {
	d Deps
	c *lock.Client

	watchdog bool
	runs     watchdogs
}

func newFenced(d Deps) (Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	opts := d.Fenced
	if opts.Logger == nil {
		opts.Logger = d.Logger
	}
	c, err := lock.New(d.Redis, opts)
	if err != nil {
		return nil, mapLockErr(err)
	}
	return &Fenced{d: d, c: c, watchdog: opts.Watchdog}, nil
}

// Name returns "fenced".
func (f *Fenced) Name() string { return "fenced" }

// Close stops the watchdogs and closes the lock client (its pub/sub
// subscription); leases stay, and expire after their TTL.
func (f *Fenced) Close() error {
	f.runs.stopAll()
	return f.c.Close()
}

// TryAcquire makes one lock.Client.TryAcquire with ttl.
func (f *Fenced) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if f.watchdog && f.runs.isClosed() {
		return nil, fmt.Errorf("acquire %q: locker closed: %w", key, ErrInvalid)
	}
	l, err := f.c.TryAcquire(ctx, f.d.Prefix+key, lock.WithTTL(ttl), lock.WithWatchdog(false))
	if err != nil {
		return nil, mapLockErr(err)
	}
	if f.watchdog {
		// Ends with the lease, or on Close; after Close (the client
		// "crashed" meanwhile) it does not start: the lease is left to expire.
		f.runs.start(l.Context(), func(ctx context.Context) { f.renewLoop(ctx, key, l) })
	}
	return &lease{key: key, ttl: ttl, token: l.Fence(), fenced: true, lost: l.Lost(),
		release: func(ctx context.Context) error { return mapLockErr(l.Release(ctx)) },
		renew: func(ctx context.Context, ttl time.Duration) error {
			if ttl != l.TTL() {
				return fmt.Errorf("renew %q: ttl = %v: the fenced lock renews by its TTL %v: %w", key, ttl, l.TTL(), ErrInvalid)
			}
			return mapLockErr(l.Renew(ctx))
		},
	}, nil
}

// renewLoop is package lock's watchdog, each renewal announced to Deps.Observer.
func (f *Fenced) renewLoop(ctx context.Context, key string, l *lock.Lease) {
	interval := max(l.TTL()/3, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, l.ValidUntil())
		done := f.d.observe(key, l.TTL(), l.Fence(), true)
		err := mapLockErr(l.Renew(rctx))
		done(err)
		cancel()
		next := interval
		switch {
		case err == nil:
		case errors.Is(err, ErrNotHeld) || ctx.Err() != nil:
			return
		default:
			f.d.Logger.Warn("fenced: watchdog renewal failed; retrying", "key", key, "err", err)
			next = max(min(interval/4, time.Until(l.ValidUntil())), time.Millisecond)
		}
		t.Reset(next)
	}
}

// mapLockErr adds this package's sentinel to an error of package lock; the
// lock's own sentinels stay matchable too.
func mapLockErr(err error) error {
	var s error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lock.ErrUnknownOutcome), errors.Is(err, lock.ErrReplicaAcks):
		s = ErrUnknownOutcome
	case errors.Is(err, lock.ErrNotAcquired):
		s = ErrNotAcquired
	case errors.Is(err, lock.ErrNotHeld):
		s = ErrNotHeld
	case errors.Is(err, lock.ErrInvalid):
		s = ErrInvalid
	default:
		return err
	}
	return fmt.Errorf("%w: %w", s, err)
}
