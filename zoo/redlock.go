package zoo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// Redlock is antirez's Redlock ("Distributed locks with Redis", redis.io)
// over N independent masters: take SET key token NX PX ttl on every
// instance (here in parallel, each reply bounded by RedlockOptions.Timeout);
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
	d       locker.Deps
	clients []redis.UniversalClient
	// replyTimeout is RedlockOptions.Timeout.
	replyTimeout time.Duration
}

// RedlockOptions configure the redlock specimen.
type RedlockOptions struct {
	// Timeout bounds each instance's reply; 0 means TTL/10 clamped to
	// [5ms, 50ms] (antirez: "5-50 milliseconds" for 10s).
	Timeout time.Duration

	_ struct{}
}

// RedlockEntry is the redlock specimen with o (Builtin has it with the defaults).
func RedlockEntry(o RedlockOptions) locker.Entry {
	return locker.Entry{Name: RedlockName, Profile: locker.ProfileLease, Needs: locker.Needs{Redlock: true},
		Doc:      "antirez's Redlock on independent masters; Kleppmann 2016: no fencing",
		Open:     func(d locker.Deps) (locker.Locker, error) { return newRedlock(d, o.Timeout) },
		Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource},
		// It does not use the Sentinel-managed master the faults below
		// strike: its own masters are independent.
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			switch t := traitsOf(fault); {
			case t.FailsOver:
				p = locker.AllHold()
				p.Why = "redlock's masters are independent of the failed-over one"
			case t.Restarts:
				// One master of three forgets the lock. A holder that got
				// all three keeps a majority on the other two; one that got
				// a bare majority (the third still held another client's
				// failed attempt, or timed out) keeps one vote, and the
				// restarted master's goes to the next client: the flaw
				// Kleppmann names. Both then hold, and redlock has no
				// fence: the one whose key passed on still writes, so
				// the resource breaks with the lease (docs/FINDINGS.md).
				p = locker.AllHold()
				mayBreak(&p, contract.PropLease, contract.PropClaims, contract.PropResource)
				p.Why = "one of redlock's three masters forgets the lock: a holder that got all three keeps its majority on the other two, but one that got a bare majority is left with one vote, and the next client takes the restarted master's (G1, the claimed validity and, with no fence, the resource may break: a restart without fsync)"
			case t.FreezesMaster:
				p = locker.AllHold()
			case t.PausesHolder:
				// Five clients contending for 50ms holds, each instance's
				// reply bounded by TTL/10 (50ms): on a loaded machine an
				// acquire can win a bare majority while its SET on the
				// third master lands after its timeout. Seen once under
				// load, before the pause, cause not found
				// (docs/FINDINGS.md). The decisive break (resource) stands.
				mayBreak(&p, contract.PropLease)
				p.Because("under contention on a loaded machine a holder may overlap the next before any pause (seen once, cause not found)")
			}
			return p
		}}
}

func newRedlock(d locker.Deps, timeout time.Duration) (locker.Locker, error) {
	if len(d.Redlock) < 3 {
		return nil, fmt.Errorf("locker.Deps.Redlock has %d clients: redlock needs at least 3: %w", len(d.Redlock), locker.ErrInvalid)
	}
	for i, c := range d.Redlock {
		if isNil(c) {
			return nil, fmt.Errorf("locker.Deps.Redlock[%d] is nil: %w", i, locker.ErrInvalid)
		}
	}
	if timeout < 0 {
		return nil, fmt.Errorf("RedlockOptions.Timeout = %v: must be >= 0: %w", timeout, locker.ErrInvalid)
	}
	return &Redlock{name: "redlock", d: d, clients: d.Redlock, replyTimeout: timeout}, nil
}

// Name returns "redlock".
func (r *Redlock) Name() string { return r.name }

// Close does nothing: Redlock holds nothing of its own.
func (r *Redlock) Close() error { return nil }

func (r *Redlock) quorum() int { return len(r.clients)/2 + 1 }

func (r *Redlock) timeout(ttl time.Duration) time.Duration {
	if r.replyTimeout > 0 {
		return r.replyTimeout
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
func (r *Redlock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
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
		l := r.lease(key, rk, token, ttl)
		l.set(start.Add(ttl - drift)) // Redlock's validity, as the algorithm tells its user
		return l, nil
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
		return nil, fmt.Errorf("acquire %q: %s, unlock unconfirmed on %d: %w", key, why, maybeHeld, locker.ErrUnknownOutcome)
	}
	return nil, fmt.Errorf("acquire %q: %s: %w", key, why, locker.ErrNotAcquired)
}

func (r *Redlock) lease(key, rk, token string, ttl time.Duration) *claimingLease {
	l := &claimingLease{}
	l.lease = lease{key: key, ttl: ttl,
		release: func(ctx context.Context) error {
			// From the first try on the lease claims nothing: a release of
			// unknown outcome may have freed the lock for the next holder.
			l.set(time.Time{})
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
				return fmt.Errorf("renew %q: extended on a majority too late (validity gone): %w", key, locker.ErrUnknownOutcome)
			}
			err := r.outcome("renew", key, votes)
			if err == nil {
				l.set(start.Add(ttl - drift))
			}
			return err
		},
	}
	return l
}

// outcome turns the votes of a release or extend into its error: done on a
// majority is ok; a majority possibly done is unknown; a release done on
// some masters but not a majority is unknown too (it changed them: two
// releases at once of one lease may each delete a minority and together
// free the key, so neither may say it surely had no effect); else not
// held.
func (r *Redlock) outcome(op, key string, votes []vote) error {
	yes, unk := count(votes, voteYes), count(votes, voteUnknown)
	switch {
	case yes >= r.quorum():
		return nil
	case yes+unk >= r.quorum(), op == "release" && yes > 0:
		return fmt.Errorf("%s %q: done on %d of %d, unknown on %d: %w", op, key, yes, len(votes), unk, locker.ErrUnknownOutcome)
	}
	return fmt.Errorf("%s %q: done on %d of %d (quorum %d): %w", op, key, yes, len(votes), r.quorum(), locker.ErrNotHeld)
}
