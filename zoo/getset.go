package zoo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// GetSet is the "handling deadlocks" recipe of the old redis.io SETNX page
// (antirez, before Redis 2.6.12 added SET NX PX): the key holds the time the
// lock expires, written by the client from its own clock, and has no TTL in
// Redis. To acquire: SETNX key <now+ttl+1>. When that fails, GET key; if the
// stored time has passed, GETSET key <now+ttl+1>, and the lock is taken when
// the old value GETSET returns had passed too (another client that got there
// first wrote a future time). To release: DEL, but only if the holder's own
// expiry has not passed. Times are Unix milliseconds (the recipe used
// seconds) from locker.Deps.Clock.
//
// What is wrong: expiry is decided by comparing times written by different
// clients' clocks. A client whose clock runs ahead sees an unexpired lock as
// expired and takes it over: two holders, G1 breaks under clock-skew. DEL
// has no owner check beyond the holder's own clock, so a holder paused past
// its expiry whose clock is behind deletes the next holder's lock. A crashed
// holder's lock is taken over once it expires (liveness holds). Renew is
// unsupported.
type GetSet struct{ basic }

// getSetEntry is "getset".
func getSetEntry() locker.Entry {
	return locker.Entry{Name: GetSetName, Profile: locker.ProfileLease, Open: newGetSet, Doc: "the GETSET timestamp recipe; trusts client clocks",
		Decisive: &locker.Decisive{Fault: contract.FaultClockSkew, Property: contract.PropLease},
		Predict: blindRelease(func(fault string, p *locker.Prediction) {
			switch t := traitsOf(fault); {
			case t.PausesHolder:
				p.Set(contract.WantViolated, contract.PropResource, contract.PropClaims)
				p.Why = "the woken holder's unfenced write is stale; its release checks its own clock, so the pause alone does not break G1"
			case t.SkewsClients:
				p.Set(contract.WantViolated, contract.PropLease)
				// The skewed client's lock holds a timestamp in the
				// future: when it never releases it (a call of unknown
				// outcome, a crash), the others take it over only when
				// their clocks reach it, up to the skew late (the
				// simulation's seeds 83 and 267, with a failover).
				p.Set(contract.WantMay, contract.PropLiveness)
				p.Why = "the skewed client sees an unexpired lock as expired and takes it over; the two holders' writes may conflict; a lock the skewed client never released holds a timestamp in the future, which the others wait out (liveness may break)"
			default:
				delayedDelete(fault, p)
			}
		})}
}

func newGetSet(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &GetSet{basic{GetSetName, d}}, nil
}

func (g *GetSet) now() int64 { return g.d.Clock().UnixMilli() }

// TryAcquire runs the recipe once: SETNX; else GET and, if expired, GETSET.
func (g *GetSet) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	rk := g.rkey(key)
	expiry := g.now() + ms(ttl) + 1
	err := g.setNX(ctx, key, strconv.FormatInt(expiry, 10))
	if err != nil && !errors.Is(err, locker.ErrNotAcquired) {
		return nil, err
	}
	if err != nil { // held: is it expired?
		cmd, err := do(ctx, g.d.Redis, "get", rk)
		if errors.Is(err, redis.Nil) {
			// Freed between SETNX and GET: the recipe retries; one attempt ends here.
			return nil, fmt.Errorf("acquire %q: freed while looking: %w", key, locker.ErrNotAcquired)
		}
		if err != nil { // GET changes nothing
			return nil, fmt.Errorf("acquire %q: GET: %w", key, err)
		}
		if !expired(cmd, g.now()) {
			return nil, fmt.Errorf("acquire %q: held and not expired: %w", key, locker.ErrNotAcquired)
		}
		expiry = g.now() + ms(ttl) + 1
		cmd, err = do(ctx, g.d.Redis, "getset", rk, strconv.FormatInt(expiry, 10))
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fail("acquire", key, err)
		}
		// A nil old value means the key vanished before GETSET: we set it and hold it.
		if err == nil && !expired(cmd, g.now()) {
			return nil, fmt.Errorf("acquire %q: another client took it over first: %w", key, locker.ErrNotAcquired)
		}
	}
	return &lease{key: key, ttl: ttl, release: func(ctx context.Context) error {
		if g.now() >= expiry {
			return fmt.Errorf("release %q: own expiry passed, not deleting: %w", key, locker.ErrNotHeld)
		}
		return g.del(ctx, key)
	}}, nil
}

// expired reports whether the expiry time in cmd's reply is before now. A
// value that is not a time is never expired (the recipe stores only times).
func expired(cmd *redis.Cmd, now int64) bool {
	s, _ := cmd.Text()
	t, err := strconv.ParseInt(s, 10, 64)
	return err == nil && t < now
}
