package specimen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redlock is antirez's Redlock ("Distributed locks with Redis", redis.io)
// over N independent masters: take SET key token NX PX ttl on every
// instance (here in parallel, each reply bounded by Deps.RedlockTimeout);
// the lock is held when a majority (N/2+1) said yes and the validity
// ttl − elapsed − drift (drift = ttl×1% + 2ms) is still positive; otherwise
// unlock every instance. Release and extend run the Lua scripts of Lua on
// every instance; an extend succeeds on a majority within validity.
//
// What is wrong (Kleppmann, "How to do distributed locking", 2016): it issues
// no fencing token, so a holder paused past its validity wakes and writes
// after the next holder (G2 breaks under pause-client for unfenced data);
// and its safety rests on timing: a server clock jump or a restarted
// instance without fsync lets a second client take a majority (G1). Kept
// instances do not replicate, so failover of one instance is just a loss
// of one vote.
type Redlock struct {
	name    string
	d       Deps
	clients []redis.UniversalClient
}

func newRedlock(d Deps) (Locker, error) {
	if len(d.Redlock) < 3 {
		return nil, fmt.Errorf("Deps.Redlock has %d clients: redlock needs at least 3: %w", len(d.Redlock), ErrInvalid)
	}
	for i, c := range d.Redlock {
		if isNil(c) {
			return nil, fmt.Errorf("Deps.Redlock[%d] is nil: %w", i, ErrInvalid)
		}
	}
	if d.RedlockTimeout < 0 {
		return nil, fmt.Errorf("Deps.RedlockTimeout = %v: must be >= 0: %w", d.RedlockTimeout, ErrInvalid)
	}
	return &Redlock{name: "redlock", d: d, clients: d.Redlock}, nil
}

// Name returns "redlock".
func (r *Redlock) Name() string { return r.name }

// Close does nothing: Redlock holds nothing of its own.
func (r *Redlock) Close() error { return nil }

func (r *Redlock) quorum() int { return len(r.clients)/2 + 1 }

func (r *Redlock) timeout(ttl time.Duration) time.Duration {
	if r.d.RedlockTimeout > 0 {
		return r.d.RedlockTimeout
	}
	return min(max(ttl/10, 5*time.Millisecond), 50*time.Millisecond)
}

// vote is one instance's answer.
type vote int

const (
	voteNo      vote = iota // surely not done
	voteYes                 // done
	voteUnknown             // may or may not be done
)

// each runs f on every instance in parallel, each bounded by timeout, and
// returns their votes.
func (r *Redlock) each(ctx context.Context, timeout time.Duration, f func(ctx context.Context, c redis.UniversalClient) vote) []vote {
	votes := make([]vote, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			votes[i] = f(ictx, c)
		})
	}
	wg.Wait()
	return votes
}

func count(votes []vote, v vote) int {
	n := 0
	for _, x := range votes {
		if x == v {
			n++
		}
	}
	return n
}

func voteOf(err error) vote {
	switch {
	case err == nil:
		return voteYes
	case unknown(err):
		return voteUnknown
	}
	return voteNo
}

// TryAcquire runs one round of Redlock.
func (r *Redlock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, context.Cause(ctx))
	}
	rk := r.d.Prefix + key
	token := newToken()
	start := time.Now()
	per := r.timeout(ttl)
	votes := r.each(ctx, per, func(ctx context.Context, c redis.UniversalClient) vote {
		_, err := do(ctx, c, "set", rk, token, "nx", "px", ms(ttl))
		if errors.Is(err, redis.Nil) {
			return voteNo
		}
		return voteOf(err)
	})
	drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
	validity := ttl - time.Since(start) - drift
	yes := count(votes, voteYes)
	if yes >= r.quorum() && validity > 0 {
		return r.lease(key, rk, token, ttl), nil
	}
	// Failed: unlock every instance, even those that said no (their reply may be lost).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), per)
	defer cancel()
	unlocked := r.each(cctx, per, func(ctx context.Context, c redis.UniversalClient) vote {
		_, err := runScript(ctx, c, unlockScript, []string{rk}, token)
		return voteOf(err) // yes: the instance surely no longer holds our token
	})
	maybeHeld := 0
	for i, v := range votes {
		if v != voteNo && unlocked[i] != voteYes {
			maybeHeld++
		}
	}
	why := fmt.Sprintf("%d of %d instances (quorum %d), validity %v", yes, len(votes), r.quorum(), validity)
	if maybeHeld >= r.quorum() {
		return nil, fmt.Errorf("acquire %q: %s, unlock unconfirmed on %d: %w", key, why, maybeHeld, ErrUnknownOutcome)
	}
	return nil, fmt.Errorf("acquire %q: %s: %w", key, why, ErrNotAcquired)
}

func (r *Redlock) lease(key, rk, token string, ttl time.Duration) *lease {
	return &lease{key: key, ttl: ttl,
		release: func(ctx context.Context) error {
			votes := r.each(ctx, r.timeout(ttl), func(ctx context.Context, c redis.UniversalClient) vote {
				cmd, err := runScript(ctx, c, unlockScript, []string{rk}, token)
				if err != nil {
					return voteOf(err)
				}
				if n, _ := cmd.Int64(); n != 1 {
					return voteNo
				}
				return voteYes
			})
			return r.outcome("release", key, votes)
		},
		renew: func(ctx context.Context, ttl time.Duration) error {
			start := time.Now()
			votes := r.each(ctx, r.timeout(ttl), func(ctx context.Context, c redis.UniversalClient) vote {
				cmd, err := runScript(ctx, c, extendScript, []string{rk}, token, ms(ttl))
				if err != nil {
					return voteOf(err)
				}
				if n, _ := cmd.Int64(); n != 1 {
					return voteNo
				}
				return voteYes
			})
			drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
			if count(votes, voteYes) >= r.quorum() && ttl-time.Since(start)-drift <= 0 {
				// Redlock calls this a failure, yet the keys were extended: the lock may be held.
				return fmt.Errorf("renew %q: extended on a majority too late (validity gone): %w", key, ErrUnknownOutcome)
			}
			return r.outcome("renew", key, votes)
		},
	}
}

// outcome turns the votes of a release or extend into its error: done on a
// majority is ok; a majority possibly done is unknown; else not held.
func (r *Redlock) outcome(op, key string, votes []vote) error {
	yes, unk := count(votes, voteYes), count(votes, voteUnknown)
	switch {
	case yes >= r.quorum():
		return nil
	case yes+unk >= r.quorum():
		return fmt.Errorf("%s %q: done on %d of %d, unknown on %d: %w", op, key, yes, len(votes), unk, ErrUnknownOutcome)
	}
	return fmt.Errorf("%s %q: done on %d of %d (quorum %d): %w", op, key, yes, len(votes), r.quorum(), ErrNotHeld)
}
