package zoo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
)

// The registry names of package lock's read-write lock and semaphore, as
// the harness runs them (FencedRWEntry, FencedSemEntry).
const (
	FencedRWName  = "fenced-rw"
	FencedSemName = "fenced-sem"
)

// FencedSemPermits is the N of the semaphore the harness runs
// (FencedSemEntry): with two permits per hold at most, three leaves room
// for two holders at once, and for a third's permit to be one too many.
const FencedSemPermits = 3

// FencedRWEntry is package lock's read-write lock (lock.RWLock), as the
// harness runs it: "fenced-rw". Its holds are read and write holds
// (locker.Moded), fenced, without watchdog (the workload renews on its
// own); the lease property judges them by rw-exclusion (docs/DESIGN.md).
func FencedRWEntry(opts lock.Options) locker.Entry {
	e := sharedEntry(FencedRWName, 0, opts,
		"package lock's read-write lock: read holds share, a write hold excludes all; fenced, FIFO across modes")
	e.Predict = rwPredict
	return e
}

// rwPredict amends the fenced profile's prediction for a read-write lock:
// a paused holder is a reader as often as a writer, and a reader's claim
// meets a conflicting grant only when a writer comes next (claims may
// break where the mutex's surely do), and its late read is refused only
// when a writer wrote meanwhile (nothing need be refused).
func rwPredict(_ string, p locker.Prediction) locker.Prediction {
	if p.Want(contract.PropClaims) == contract.WantViolated {
		p.Set(contract.WantMay, contract.PropClaims)
		p.Because("a paused reader's claim meets a conflicting grant only when a writer comes next")
	}
	p.Rejected = false
	return p
}

// FencedSemEntry is package lock's semaphore (lock.Semaphore) of
// FencedSemPermits permits, as the harness runs it: "fenced-sem". The
// lease property judges it by permits (docs/DESIGN.md).
func FencedSemEntry(opts lock.Options) locker.Entry {
	e := sharedEntry(FencedSemName, FencedSemPermits, opts,
		fmt.Sprintf("package lock's semaphore of %d permits: each hold 1 or 2 with its own TTL and fence; FIFO", FencedSemPermits))
	e.Predict = semPredict
	return e
}

// semPredict amends the fenced profile's prediction for a semaphore: its
// holders share, so a paused holder's claim meets no conflicting grant
// (claims hold wherever the profile expects them to break), and they work
// on no resource (nothing is refused).
func semPredict(_ string, p locker.Prediction) locker.Prediction {
	if w := p.Want(contract.PropClaims); w == contract.WantViolated || w == contract.WantMay {
		p.Set(contract.WantOK, contract.PropClaims)
		p.Because("a semaphore's holders share: a paused holder's claim overlaps other holds within the capacity, which the permits rule judges")
	}
	p.Rejected = false
	return p
}

// sharedEntry is the entry of a shared kind: a semaphore of n permits, or
// (n = 0) a read-write lock.
func sharedEntry(name string, n int, opts lock.Options, doc string) locker.Entry {
	return locker.Entry{Name: name, Profile: locker.ProfileFenced, Calls: fencedCalls(), Doc: doc,
		// One FIFO line across modes: a grant never passes a waiter it
		// keeps out (lock/shared_scripts.go).
		Fair: &locker.FairQueue{},
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			opts := opts
			opts.Watchdog = false
			if opts.Logger == nil {
				opts.Logger = d.Logger
			}
			if opts.Rand == nil {
				opts.Rand = d.Rand
			}
			c, err := lock.New(d.Redis, opts)
			if err != nil {
				return nil, mapLockErr(err)
			}
			return &Shared{name: name, d: d, c: c, n: n}, nil
		}}
}

// Shared is the adapter of package lock's read-write lock or semaphore
// (locker.Moded, locker.Waiter, locker.InLine): TryAcquire and Acquire
// are exclusive holds (a write hold, or every permit).
type Shared struct {
	name string
	d    locker.Deps
	c    *lock.Client
	n    int // the semaphore's permits; 0: a read-write lock
}

// Name returns "fenced-rw" or "fenced-sem".
func (s *Shared) Name() string { return s.name }

// Modes implements locker.Moded.
func (s *Shared) Modes() []locker.Mode {
	if s.n > 0 {
		return []locker.Mode{locker.ModePermits}
	}
	return []locker.Mode{locker.ModeRead, locker.ModeWrite}
}

// Capacity implements locker.Moded: the semaphore's N, 0 for a read-write lock.
func (s *Shared) Capacity() int { return s.n }

// Close closes the lock client, waiting a second at most for its
// background cleanups (as Fenced.Close).
func (s *Shared) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.c.Close(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// CloseContext is Close within ctx (locker.ContextCloser).
func (s *Shared) CloseContext(ctx context.Context) error { return s.c.Close(ctx) }

// TryAcquire makes one attempt at an exclusive hold: a write hold, or
// every permit.
func (s *Shared) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	mode, k := s.exclusive()
	return s.AcquireMode(ctx, key, ttl, mode, k, false, nil)
}

// Acquire waits in line for an exclusive hold.
func (s *Shared) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	mode, k := s.exclusive()
	return s.AcquireMode(ctx, key, ttl, mode, k, true, nil)
}

// AcquireInLine is Acquire telling inLine when it is in line.
func (s *Shared) AcquireInLine(ctx context.Context, key string, ttl time.Duration, inLine func()) (locker.Lease, error) {
	mode, k := s.exclusive()
	return s.AcquireMode(ctx, key, ttl, mode, k, true, inLine)
}

// exclusive is the hold of TryAcquire and Acquire, which locker.Locker
// asks to exclude every other: a write hold, or all N permits.
func (s *Shared) exclusive() (locker.Mode, int) {
	if s.n > 0 {
		return locker.ModePermits, s.n
	}
	return locker.ModeWrite, 1
}

// AcquireMode implements locker.Moded.
func (s *Shared) AcquireMode(ctx context.Context, key string, ttl time.Duration, mode locker.Mode, permits int, wait bool, inLine func()) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	opts := []lock.AcquireOption{lock.WithTTL(ttl)}
	if inLine != nil {
		opts = append(opts, lock.WithQueued(inLine))
	}
	if s.d.Client != "" {
		opts = append(opts, lock.WithMetadata(s.d.Client))
	}
	k := s.d.Prefix + key
	var l *lock.Lease
	var err error
	switch {
	case s.n > 0 && mode == locker.ModePermits:
		sem, serr := s.c.Semaphore(k, s.n)
		if serr != nil {
			return nil, mapLockErr(serr)
		}
		if wait {
			l, err = sem.Acquire(ctx, permits, opts...)
		} else {
			l, err = sem.TryAcquire(ctx, permits, opts...)
		}
	case s.n == 0 && (mode == locker.ModeRead || mode == locker.ModeWrite):
		rw := s.c.RWLock(k)
		switch {
		case mode == locker.ModeRead && wait:
			l, err = rw.RLock(ctx, opts...)
		case mode == locker.ModeRead:
			l, err = rw.TryRLock(ctx, opts...)
		case wait:
			l, err = rw.Lock(ctx, opts...)
		default:
			l, err = rw.TryLock(ctx, opts...)
		}
	default:
		return nil, fmt.Errorf("%s: acquire %q: mode %q is not one of %v: %w", s.name, key, mode, s.Modes(), locker.ErrInvalid)
	}
	if err != nil {
		return nil, mapLockErr(err)
	}
	x := &fencedLease{f: &Fenced{name: s.name, d: s.d}, key: key, h: l}
	if s.n > 0 {
		return permitLease{x}, nil
	}
	return x, nil
}

// permitLease is a semaphore's hold: a fencedLease without Reenter
// (permits are not reentrant).
type permitLease struct{ x *fencedLease }

func (p permitLease) Key() string                       { return p.x.Key() }
func (p permitLease) TTL() time.Duration                { return p.x.TTL() }
func (p permitLease) Fence() (uint64, bool)             { return p.x.Fence() }
func (p permitLease) Lost() <-chan struct{}             { return p.x.Lost() }
func (p permitLease) Release(ctx context.Context) error { return p.x.Release(ctx) }
func (p permitLease) Context() context.Context          { return p.x.Context() }
func (p permitLease) ValidUntil() time.Time             { return p.x.ValidUntil() }

// Renew implements locker.Lease (fencedLease.Renew).
func (p permitLease) Renew(ctx context.Context, ttl time.Duration) error { return p.x.Renew(ctx, ttl) }

// TTLLeft implements locker.ServerClaimer (fencedLease.TTLLeft).
func (p permitLease) TTLLeft(ctx context.Context) (time.Duration, error) { return p.x.TTLLeft(ctx) }
