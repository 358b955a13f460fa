package zoo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// LocalRedis is Spring Integration's RedisLockRegistry (5.x/6.x): a
// process-local reentrant lock per key, and behind it the Redis key, whose
// value is the registry's client id (one per process, shared by its
// threads). lock() takes the local lock, then runs the obtain script: when
// the key holds the client id it extends it (PEXPIRE), when it is free it
// sets it (SET PX), else it fails. unlock() of the last hold checks with GET
// that the key still holds the client id (else "lock was released in the
// store due to expiration"), then deletes it (UNLINK), then frees the
// local lock. One Locker is one process (one workload client).
//
// What is wrong with it: no fencing token, so a holder paused past the
// expiry wakes up and its late write is accepted (G2 breaks under
// pause-client); GET-then-UNLINK is not atomic, so a holder paused or slowed
// between the two deletes the next holder's key (G1 can break under
// pause-client and latency, as get-del's does); and the local lock only
// orders threads of one process, so it adds nothing across processes. A
// failover loses the key (G1).
//
// Spring's registry has one expireAfter for every lock: Reenter takes the
// lease's TTL again (PEXPIRE by the obtain script) and refuses another ttl
// with ErrUnsupported. Renew is the obtain script (Spring 6's renewLock).
type LocalRedis struct {
	basic
	clientID string

	mu    sync.Mutex
	local map[string]*localHold // held local locks by key
}

// localRedisEntry is "local-redis". Its release checks the owner (GET) and
// deletes (UNLINK) in two commands: a delayed delete can remove the next
// holder's lock.
func localRedisEntry() locker.Entry {
	return locker.Entry{Name: LocalRedisName, Profile: locker.ProfileLease, Open: newLocalRedis,
		Doc:      "Spring's RedisLockRegistry: a process-local lock, then the Redis key; no fencing",
		Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource},
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if delayedDelete(fault, &p) {
				return p
			}
			if traitsOf(fault).PausesHolder {
				// A holder woken near its lease's expiry can read its own
				// id (GET) and lose the key before its UNLINK lands; the
				// delete then takes the next holder's lock. Whether the
				// expiry falls between the two depends on the pause's
				// length and on how busy the machine is (CI saw it once).
				mayBreak(&p, contract.PropLease, contract.PropClaims)
				p.Because("a holder woken near its expiry may lose the key between its GET and its UNLINK, and delete the next holder's lock")
			}
			return p
		}}
}

// localHold is the local ReentrantLock of one key while held.
type localHold struct{ holds int }

func newLocalRedis(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &LocalRedis{basic: basic{LocalRedisName, d}, clientID: newToken(), local: map[string]*localHold{}}, nil
}

// obtainScript is RedisLockRegistry's OBTAIN_LOCK_SCRIPT.
const obtainScript = `
local lockClientId = redis.call('GET', KEYS[1])
if lockClientId == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
elseif not lockClientId then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`

// TryAcquire is tryLock(): the local lock (without waiting), then one run
// of the obtain script; when that fails the local lock is freed again.
func (s *LocalRedis) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.local[key] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("acquire %q: the local lock is held in this process: %w", key, locker.ErrNotAcquired)
	}
	h := &localHold{holds: 1}
	s.local[key] = h
	s.mu.Unlock()
	if err := s.obtain(ctx, key, ttl); err != nil {
		s.unlockLocal(key, h)
		return nil, err
	}
	return s.lease(key, ttl, h), nil
}

func (s *LocalRedis) obtain(ctx context.Context, key string, ttl time.Duration) error {
	cmd, err := runScript(ctx, s.d.Redis, obtainScript, []string{s.rkey(key)}, s.clientID, ms(ttl))
	if err != nil {
		return fail("obtain", key, err)
	}
	if n, _ := cmd.Int64(); n != 1 {
		return fmt.Errorf("acquire %q: held by another process: %w", key, locker.ErrNotAcquired)
	}
	return nil
}

func (s *LocalRedis) unlockLocal(key string, h *localHold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.holds--
	if h.holds <= 0 && s.local[key] == h {
		delete(s.local, key)
	}
}

func (s *LocalRedis) lease(key string, ttl time.Duration, h *localHold) *localRedisLease {
	l := &localRedisLease{s: s, h: h}
	l.lease = lease{key: key, ttl: ttl,
		release: func(ctx context.Context) error {
			// A hold is unlocked once: a second Release of it (two calls at
			// once, from two goroutines) fails before anything is sent, as
			// Spring's unlock() by a thread that no longer holds the local
			// lock throws ("You do not own lock"). Without it both calls
			// could pass the GET and each say it released the key.
			if !l.released.CompareAndSwap(false, true) {
				return fmt.Errorf("release %q: you do not own the local lock: %w", key, locker.ErrNotHeld)
			}
			return s.unlock(ctx, key, h)
		},
		renew: func(ctx context.Context, ttl time.Duration) error {
			err := s.obtain(ctx, key, ttl)
			if errors.Is(err, locker.ErrNotAcquired) {
				return fmt.Errorf("renew %q: %w", key, locker.ErrNotHeld)
			}
			return err
		}}
	return l
}

// unlock is unlock(): an inner hold only frees its local hold; the last
// one checks the key (GET), deletes it (UNLINK), and frees the local lock
// whatever happened.
func (s *LocalRedis) unlock(ctx context.Context, key string, h *localHold) error {
	s.mu.Lock()
	inner := h.holds > 1
	s.mu.Unlock()
	defer s.unlockLocal(key, h)
	if inner {
		return nil
	}
	cmd, err := do(ctx, s.d.Redis, "get", s.rkey(key))
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("release %q: lock was released in the store due to expiration: %w", key, locker.ErrNotHeld)
	}
	if err != nil { // GET changes nothing: surely no effect
		return fmt.Errorf("release %q: GET: %w", key, err)
	}
	if v, _ := cmd.Text(); v != s.clientID {
		return fmt.Errorf("release %q: lock was released in the store due to expiration: %w", key, locker.ErrNotHeld)
	}
	if _, err := do(ctx, s.d.Redis, "unlink", s.rkey(key)); err != nil {
		return fail("release", key, err)
	}
	return nil
}

// localRedisLease is a hold of LocalRedis.
type localRedisLease struct {
	lease
	s        *LocalRedis
	h        *localHold
	released atomic.Bool // Release was called
}

// Reenter is lock() by the holding thread: one more local hold, and the
// obtain script again (which extends the key by the registry's expireAfter).
func (l *localRedisLease) Reenter(ctx context.Context, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, l.key, ttl, true); err != nil {
		return nil, err
	}
	if ttl != l.ttl {
		return nil, fmt.Errorf("reenter %q: ttl %v: the registry's expireAfter is %v: %w", l.key, ttl, l.ttl, locker.ErrUnsupported)
	}
	l.s.mu.Lock()
	if l.s.local[l.key] != l.h {
		l.s.mu.Unlock()
		return nil, fmt.Errorf("reenter %q: the local lock is not held: %w", l.key, locker.ErrNotAcquired)
	}
	l.h.holds++
	l.s.mu.Unlock()
	if err := l.s.obtain(ctx, l.key, ttl); err != nil {
		l.s.unlockLocal(l.key, l.h)
		return nil, err
	}
	return l.s.lease(l.key, ttl, l.h), nil
}
