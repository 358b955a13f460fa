// Package redsync adapts github.com/go-redsync/redsync/v4 (a Go Redlock) to
// locker.Locker, so that the lockproof harness can run it like any other
// lock. It is a module of its own so that lockproof does not depend on
// redsync; it is also an example of running your own lock under lockproof.
package redsync

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	rs "github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locker"
)

// Name is the Locker's name.
const Name = "redsync"

// Entry registers redsync with the harness: on the environment's
// independent masters (Needs.Redlock), claiming an owner-checked lease
// without fencing tokens (locker.ProfileLease: G1 on one master, and a
// paused holder's late write gets in).
func Entry() locker.Entry {
	return locker.Entry{Name: Name, Profile: locker.ProfileLease, Needs: locker.Needs{Redlock: true},
		Doc:  "go-redsync/redsync v4 (Redlock over independent masters)",
		Open: func(d locker.Deps) (locker.Locker, error) { return New(d) }}
}

// Locker runs redsync's Mutex over the instances of Deps.Redlock (or the one
// of Deps.Redis when Redlock is empty). Give the clients MaxRetries: -1:
// redsync sends commands through them, and a resent SET NX whose reply was
// lost would report a lock it took as taken by someone else.
//
// Like the redlock specimen it issues no fencing token (G2 breaks for
// unfenced data under pause-client).
type Locker struct {
	rs     *rs.Redsync
	prefix string
}

// New returns a Locker over the clients of d (Redlock, else Redis).
func New(d locker.Deps) (*Locker, error) {
	clients := d.Redlock
	if len(clients) == 0 && d.Redis != nil {
		clients = []redis.UniversalClient{d.Redis}
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("redsync: Deps.Redlock and Deps.Redis are empty: %w", locker.ErrInvalid)
	}
	pools := make([]rsredis.Pool, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redsync: client %d is nil: %w", i, locker.ErrInvalid)
		}
		pools[i] = goredis.NewPool(c)
	}
	return &Locker{rs: rs.New(pools...), prefix: d.Prefix}, nil
}

// Name returns "redsync".
func (l *Locker) Name() string { return Name }

// Close does nothing: the clients belong to the caller.
func (l *Locker) Close() error { return nil }

// TryAcquire makes one redsync attempt (WithTries(1)).
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if key == "" {
		return nil, fmt.Errorf("acquire: key is empty: %w", locker.ErrInvalid)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("acquire %q: ttl = %v: must be at least 1ms: %w", key, ttl, locker.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	m := l.rs.NewMutex(l.prefix+key, rs.WithExpiry(ttl), rs.WithTries(1))
	if err := m.TryLockContext(ctx); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, classify(err, locker.ErrNotAcquired))
	}
	return &lease{m: m, key: key, ttl: ttl}, nil
}

// classify maps a redsync error: a node that failed to answer (RedisError)
// may have applied the command, so the outcome is unknown unless a quorum
// surely refused (ErrTaken); otherwise it is the definite refusal given.
func classify(err error, refusal error) error {
	var taken *rs.ErrTaken
	var rerr *rs.RedisError
	switch {
	case errors.As(err, &taken):
		return fmt.Errorf("%w: %w", refusal, err)
	case errors.As(err, &rerr), errors.Is(err, rs.ErrExtendFailed):
		return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("%w: %w", refusal, err)
}

type lease struct {
	m     *rs.Mutex
	key   string
	ttl   time.Duration
	ended atomic.Bool // a release was tried: the lease claims nothing more
}

// ValidUntil implements locker.Claimer with redsync's own word, Until():
// the validity its last lock or extend computed (now + expiry − elapsed −
// drift), until a release is tried: one whose outcome is unknown may have
// freed the lock, and the next holder may hold it already.
func (l *lease) ValidUntil() time.Time {
	if l.ended.Load() {
		return time.Time{}
	}
	return l.m.Until()
}

func (l *lease) Key() string           { return l.key }
func (l *lease) TTL() time.Duration    { return l.ttl }
func (l *lease) Fence() (uint64, bool) { return 0, false }
func (l *lease) Lost() <-chan struct{} { return nil }
func (l *lease) Release(ctx context.Context) error {
	l.ended.Store(true)
	ok, err := l.m.UnlockContext(ctx)
	if ok {
		return nil
	}
	if err == nil {
		err = errors.New("redsync: unlock refused")
	}
	return fmt.Errorf("release %q: %w", l.key, classify(err, locker.ErrNotHeld))
}

// Renew extends by the TTL the lease was taken with (redsync's expiry is
// fixed per mutex); another ttl is refused with ErrInvalid.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if ttl != l.ttl {
		return fmt.Errorf("renew %q: ttl = %v: redsync extends by its expiry %v: %w", l.key, ttl, l.ttl, locker.ErrUnsupported)
	}
	ok, err := l.m.ExtendContext(ctx)
	if ok {
		return nil
	}
	if err == nil {
		err = errors.New("redsync: extend refused")
	}
	return fmt.Errorf("renew %q: %w", l.key, classify(err, locker.ErrNotHeld))
}

var (
	_ locker.Locker  = (*Locker)(nil)
	_ locker.Claimer = (*lease)(nil)
)
