package zoo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// The scripts of Redisson's RedissonLock (tryLockInnerAsync, unlockInnerAsync,
// renewExpirationAsync), with the lease time as ARGV; the unlock's pub/sub
// notification is left out (nothing here waits on it).
const (
	reentrantLockScript = `
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`
	reentrantUnlockScript = `
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
return 1`
	reentrantRenewScript = `
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0`
)

// Reentrant is Redisson's RLock: the key is a hash from owner id
// ("<client uuid>:<thread id>"; here one id per locker.Locker) to a hold count, with
// a PX TTL. The same owner may acquire again (the count goes up and the TTL
// is reset); each release takes one hold off and the last deletes the key.
// Source: Redisson's RedissonLock, used with an explicit lease time (so
// without its watchdog).
//
// What is wrong: like Lua, the lease is sound on one master but carries no
// fencing token: a holder paused past its TTL wakes and writes after the
// next holder (G2 breaks under pause-client for unfenced data), and a
// failover loses the lock (G1 breaks under failover). Reentrancy adds a
// trap: an owner re-acquiring after its lease silently expired gets a fresh
// lock it believes is its second hold.
type Reentrant struct {
	basic
	owner string
}

// reentrantEntry is "reentrant".
func reentrantEntry() locker.Entry {
	return locker.Entry{Name: ReentrantName, Profile: locker.ProfileLease, Open: newReentrant, Doc: "Redisson's RLock: a hash with a hold count; no fencing",
		Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource},
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if contract.Like(fault) == contract.FaultReset {
				// Its release takes one off the owner's count, whichever
				// hold it was called for. A reset loses the reply of an
				// acquire that took effect (one more on the count, a hold
				// nobody knows of); of two releases of one hold (the
				// workload's Concurrent share), the second then ends that
				// hold and says ok, where it must say not held. The lease
				// model reads hold numbers and refuses it (8 of 10
				// simulated seeds).
				mayBreak(&p, contract.PropLease)
				before(&p, whyOwnerCount)
			}
			return p
		}}
}

// whyOwnerCount: a release ends a hold of the owner's count, not its own
// (Reentrant).
const whyOwnerCount = "a release takes one hold off its owner's count, not its own hold: after an acquire whose reply was lost took effect, a second release of one hold ends that hold and says ok (lease: not-owner)"

func newReentrant(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &Reentrant{basic: basic{ReentrantName, d}, owner: newToken() + ":1"}, nil
}

// TryAcquire runs Redisson's lock script once.
func (r *Reentrant) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	rk := []string{r.rkey(key)}
	_, err := runScript(ctx, r.d.Redis, reentrantLockScript, rk, ms(ttl), r.owner)
	switch {
	case errors.Is(err, redis.Nil):
		// nil reply: acquired
	case err != nil:
		return nil, fail("acquire", key, err)
	default: // the holder's PTTL
		return nil, fmt.Errorf("acquire %q: held by another owner: %w", key, locker.ErrNotAcquired)
	}
	return &lease{key: key, ttl: ttl,
		release: func(ctx context.Context) error {
			_, err := runScript(ctx, r.d.Redis, reentrantUnlockScript, rk, ms(ttl), r.owner) // Redisson re-arms the remaining holds with the lease time
			if errors.Is(err, redis.Nil) {
				return fmt.Errorf("release %q: not held by this owner: %w", key, locker.ErrNotHeld)
			}
			if err != nil {
				return fail("release", key, err)
			}
			return nil
		},
		renew: func(ctx context.Context, ttl time.Duration) error {
			cmd, err := runScript(ctx, r.d.Redis, reentrantRenewScript, rk, ms(ttl), r.owner)
			if err != nil {
				return fail("renew", key, err)
			}
			if n, _ := cmd.Int64(); n != 1 {
				return fmt.Errorf("renew %q: not held by this owner: %w", key, locker.ErrNotHeld)
			}
			return nil
		},
	}, nil
}
