package zoo

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo/internal/frozen/fencedv1"
	"github.com/lockproof/lockproof/zoo/internal/frozen/fencedv2"
)

// What the fenced adapter (Fenced) offers beyond a plain lock, as users of
// package lock have it: the server's word on how long a lease is still
// valid (Lease.TTLLeft, locker.ServerClaimer), and acquires without the
// watchdog (WithWatchdog(false), locker.Unwatched).

// ttlLefter is a hold that asks Redis how long it is still valid:
// *lock.Lease and the second frozen copy's lease have it (Lease.TTLLeft).
type ttlLefter interface {
	TTLLeft(ctx context.Context) (time.Duration, error)
}

// TTLLeft is lock.Lease.TTLLeft (locker.ServerClaimer): the lock's PTTL
// while this lease's own hold stands, ErrNotHeld otherwise;
// ErrUnsupported on fenced-v1, which has no TTLLeft.
func (x *fencedLease) TTLLeft(ctx context.Context) (time.Duration, error) {
	t, ok := x.h.(ttlLefter)
	if !ok {
		return 0, fmt.Errorf("%s has no TTLLeft: %w", x.f.name, locker.ErrUnsupported)
	}
	if ctx == nil {
		return 0, fmt.Errorf("ttl %q: ctx is nil: %w", x.key, locker.ErrInvalid)
	}
	d, err := t.TTLLeft(ctx)
	return d, mapLockErr(err)
}

// unwatchedClient is a lock client that acquires without its watchdog
// (WithWatchdog(false)): package lock's and both frozen copies'.
type unwatchedClient interface {
	acquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (fencedHold, error)
}

// AcquireUnwatched is TryAcquire (wait false) or Acquire (wait true,
// telling inLine when it is in line, lock.WithQueued; fenced-v1 cannot
// say) with lock.WithWatchdog(false) (locker.Unwatched): the lease lasts
// its TTL unless renewed, as a user who asks for a lease time has it.
func (f *Fenced) AcquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	uc, ok := f.c.(unwatchedClient)
	if !ok {
		return nil, fmt.Errorf("%s cannot acquire without its watchdog: %w", f.name, locker.ErrUnsupported)
	}
	h, err := uc.acquireUnwatched(ctx, f.d.Prefix+key, ttl, wait, inLine)
	if err != nil {
		return nil, mapLockErr(err)
	}
	return &fencedLease{f: f, key: key, h: h}, nil
}

func (l currentLock) acquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (fencedHold, error) {
	extra := []lock.AcquireOption{lock.WithWatchdog(false)}
	if inLine != nil {
		extra = append(extra, lock.WithQueued(inLine))
	}
	if l.md != "" {
		extra = append(extra, lock.WithMetadata(l.md))
	}
	return acquireOn(ctx, key, ttl, wait, "", l.c.TryAcquire, l.c.Acquire, lock.WithTTL, lock.WithOwner, extra...)
}

func (l v2Lock) acquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (fencedHold, error) {
	extra := []fencedv2.AcquireOption{fencedv2.WithWatchdog(false)}
	if inLine != nil {
		extra = append(extra, fencedv2.WithQueued(inLine))
	}
	return acquireOn(ctx, key, ttl, wait, "", l.c.TryAcquire, l.c.Acquire, fencedv2.WithTTL, fencedv2.WithOwner, extra...)
}

// acquireUnwatched of fenced-v1 cannot tell inLine: its Acquire cannot say.
func (l v1Lock) acquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, _ func()) (fencedHold, error) {
	return acquireOn(ctx, key, ttl, wait, "", l.c.TryAcquire, l.c.Acquire, fencedv1.WithTTL, fencedv1.WithOwner, fencedv1.WithWatchdog(false))
}
