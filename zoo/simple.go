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

// basic holds what the simple specimens share.
type basic struct {
	name string
	d    locker.Deps
}

func (b *basic) Name() string { return b.name }

// Close does nothing: the simple specimens hold nothing of their own.
func (b *basic) Close() error { return nil }

func (b *basic) rkey(key string) string { return b.d.Prefix + key }

// setNX sends SETNX key token and reports whether it took the key.
func (b *basic) setNX(ctx context.Context, key, token string) error {
	cmd, err := do(ctx, b.d.Redis, "setnx", b.rkey(key), token)
	if err != nil {
		return fail("acquire", key, err)
	}
	if n, _ := cmd.Int64(); n != 1 {
		return fmt.Errorf("acquire %q: SETNX found the key set: %w", key, locker.ErrNotAcquired)
	}
	return nil
}

// setNXPX sends SET key token NX PX ttl.
func (b *basic) setNXPX(ctx context.Context, key, token string, ttl time.Duration) error {
	_, err := do(ctx, b.d.Redis, "set", b.rkey(key), token, "nx", "px", ms(ttl))
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("acquire %q: SET NX found the key set: %w", key, locker.ErrNotAcquired)
	}
	if err != nil {
		return fail("acquire", key, err)
	}
	return nil
}

// del sends DEL key, without looking at whose key it is. It reports
// locker.ErrNotHeld when there was nothing to delete (the release had no effect).
func (b *basic) del(ctx context.Context, key string) error {
	cmd, err := do(ctx, b.d.Redis, "del", b.rkey(key))
	if err != nil {
		return fail("release", key, err)
	}
	if n, _ := cmd.Int64(); n == 0 {
		return fmt.Errorf("release %q: DEL found no key: %w", key, locker.ErrNotHeld)
	}
	return nil
}

// SetNX is the oldest Redis lock: SETNX to take the key, DEL to free it, no
// expiry. Source: the locking recipe of the redis.io SETNX page before 2.6.12
// ("SETNX lock.foo ... DEL lock.foo") and many tutorials since.
//
// What is wrong: nothing ever frees the lock but its holder. A holder that
// crashes (or whose acquire reply is lost) keeps the key forever: G3
// liveness breaks under crash-client. DEL does not check the owner either,
// so a confused client frees another's lock. TTL is ignored (locker.Lease.TTL is 0)
// and Renew is unsupported.
type SetNX struct{ basic }

// setNXEntry is "setnx". It claims a lease (the history asks for a TTL)
// and keeps none of it: its break is a crashed holder's key nobody frees.
func setNXEntry() locker.Entry {
	return locker.Entry{Name: SetNXName, Profile: locker.ProfileLease, NotReentrant: true, Open: newSetNX, Doc: "SETNX without a TTL, DEL to release",
		Decisive: &locker.Decisive{Fault: contract.FaultCrashClient, Property: contract.PropLiveness},
		Predict: blindRelease(func(fault string, p *locker.Prediction) {
			switch t := traitsOf(fault); {
			case t.PausesHolder:
				// Nobody takes a key without TTL over; the woken
				// holder's write and DEL come after the TTL it asked.
				p.Set(contract.WantViolated, contract.PropLease)
				p.Why = "setnx ignores the TTL asked for: nobody takes the paused holder's lock over, but its release after the asked TTL is, against the contract, a release of an expired lease (rule not-owner)"
			case t.KillsClients:
				p.Set(contract.WantViolated, contract.PropLiveness)
				p.Why = "the crashed holder's key has no TTL: nobody frees it"
			case t.FailsOver:
				p.Set(contract.WantMay, contract.PropLiveness)
				p.Why = "leases in the replication gap are lost; a key without TTL may be stranded on the new master"
			case t.LosesReplies:
				strandedKey(fault, p)
			default:
				delayedDelete(fault, p)
			}
		})}
}

func newSetNX(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &SetNX{basic{SetNXName, d}}, nil
}

// TryAcquire sends SETNX key token; ttl is ignored.
func (s *SetNX) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, false); err != nil {
		return nil, err
	}
	if err := s.setNX(ctx, key, newToken()); err != nil {
		return nil, err
	}
	return &lease{key: key, release: func(ctx context.Context) error { return s.del(ctx, key) }}, nil
}

// SetNXExpire is SETNX followed by EXPIRE as a second command (PEXPIRE here,
// for millisecond TTLs). Source: the idiom the SET NX PX options (Redis
// 2.6.12) were added to replace; still common in tutorials and answers.
//
// What is wrong: the two commands are not atomic. A holder that crashes after
// SETNX and before EXPIRE, or whose EXPIRE fails, leaves a key with no TTL
// that nobody frees: G3 liveness breaks under crash-client (and under
// latency or partition when the EXPIRE is lost). As in the idiom, a failed
// EXPIRE does not fail the acquire (it is logged). DEL does not check the
// owner: a holder that wakes after its lease expired deletes the next
// holder's lock (G1). Renew is unsupported.
type SetNXExpire struct{ basic }

// setNXExpireEntry is "setnx-expire". The matrix crashes it right before
// its PEXPIRE, which it sends only after a SETNX that succeeded: the crash
// between SETNX and EXPIRE that leaves a key without TTL (crashing after
// the SETNX's reply would also strike after SETNXs that failed).
func setNXExpireEntry() locker.Entry {
	return locker.Entry{Name: SetNXExpireName, Profile: locker.ProfileLease, NotReentrant: true, Open: newSetNXExpire, Doc: "SETNX, then EXPIRE as a second command",
		Decisive:   &locker.Decisive{Fault: contract.FaultCrashClient, Property: contract.PropLiveness},
		FaultPoint: pointUnder(contract.FaultCrashClient, contract.Point{Before: "pexpire"}),
		Predict: blindRelease(func(fault string, p *locker.Prediction) {
			switch t := traitsOf(fault); {
			case t.PausesHolder:
				wokenDeletes(p)
			case t.KillsClients:
				p.Set(contract.WantViolated, contract.PropLiveness)
				p.Why = "the crashed holder's key has no TTL: nobody frees it"
			case t.LosesReplies,
				// A failover resets every connection: a SETNX whose
				// PEXPIRE was cut off strands its key (the simulation's
				// seed 369, failover with key-loss and clock-skew).
				t.FailsOver:
				strandedKey(fault, p)
			default:
				delayedDelete(fault, p)
			}
		})}
}

// strandedKey is the prediction, under the faults that lose replies, reset
// connections or hold requests past their caller's timeout, for a lock whose SETNX sets a
// key without TTL: a SETNX that ran after its caller gave up sets a key
// nobody knows it holds, and nobody frees it (liveness may break; found
// by the simulation's lost replies and paused node). Its delayed deletes
// stand too.
func strandedKey(fault string, p *locker.Prediction) {
	delayedDelete(fault, p)
	p.Set(contract.WantMay, contract.PropLiveness)
	p.Because("a SETNX that ran after its caller gave up (its reply lost, or the server paused past the caller's timeout) sets a key without TTL that nobody knows it holds: nobody frees it")
}

// wokenDeletes is pause-client's prediction for a lock whose DEL has no
// owner check: the woken holder writes stale data (resource) and deletes
// the next holder's lock (lease).
func wokenDeletes(p *locker.Prediction) {
	p.Set(contract.WantViolated, contract.PropLease, contract.PropResource, contract.PropClaims)
	p.Why = "the woken holder writes stale data and its DEL deletes the next holder's lock"
}

func newSetNXExpire(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &SetNXExpire{basic{SetNXExpireName, d}}, nil
}

// TryAcquire sends SETNX key token, then PEXPIRE key ttl.
func (s *SetNXExpire) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if err := s.setNX(ctx, key, newToken()); err != nil {
		return nil, err
	}
	if _, err := do(ctx, s.d.Redis, "pexpire", s.rkey(key), ms(ttl)); err != nil {
		s.d.Logger.Warn("setnx-expire: EXPIRE failed; the lock has no TTL", "key", key, "err", err)
	}
	return &lease{key: key, ttl: ttl, release: func(ctx context.Context) error { return s.del(ctx, key) }}, nil
}

// SetDel takes the lock atomically with SET NX PX and frees it with a plain
// DEL. Source: the first half of antirez's "Distributed locks with Redis"
// (redis.io) done without its second half, a common shortcut.
//
// What is wrong: DEL does not check the owner. A holder paused past its TTL
// wakes and deletes the lock of the client that took it over, so a third
// client gets it while the second still holds it: G1 lease exclusivity
// breaks under pause-client (and latency). Renew is unsupported.
type SetDel struct{ basic }

// setDelEntry is "set-del".
func setDelEntry() locker.Entry {
	return locker.Entry{Name: SetDelName, Profile: locker.ProfileLease, NotReentrant: true, Open: newSetDel, Doc: "SET NX PX, DEL without an owner check",
		Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropLease},
		Predict: blindRelease(func(fault string, p *locker.Prediction) {
			if traitsOf(fault).PausesHolder {
				wokenDeletes(p)
				return
			}
			delayedDelete(fault, p)
		})}
}

func newSetDel(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &SetDel{basic{SetDelName, d}}, nil
}

// TryAcquire sends SET key token NX PX ttl.
func (s *SetDel) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if err := s.setNXPX(ctx, key, newToken(), ttl); err != nil {
		return nil, err
	}
	return &lease{key: key, ttl: ttl, release: func(ctx context.Context) error { return s.del(ctx, key) }}, nil
}

// GetDel stores a random owner token with SET NX PX and frees the lock by
// reading it (GET), comparing in the client, then DEL: two commands where
// antirez's article says to use one script. Source: the check-then-delete
// mistake the article's unlock script exists to prevent.
//
// What is wrong: between GET and DEL the lease can expire and another client
// take the lock; DEL then deletes the other's lock: G1 breaks under
// pause-client and latency (a holder paused or slowed between the two).
// Renew is unsupported.
type GetDel struct{ basic }

// getDelEntry is "get-del". The matrix pauses it right after the GET of
// its release: between GET and DEL, where the literature's bug lies.
func getDelEntry() locker.Entry {
	return locker.Entry{Name: GetDelName, Profile: locker.ProfileLease, NotReentrant: true, Open: newGetDel, Doc: "owner token, GET then DEL (not atomic)",
		Decisive:   &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropLease},
		FaultPoint: pointUnder(contract.FaultPauseClient, contract.Point{After: "get"}),
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if traitsOf(fault).PausesHolder {
				p.Set(contract.WantViolated, contract.PropLease)
				p.Set(contract.WantMay, contract.PropResource, contract.PropClaims)
				p.Why = "paused between the GET and the DEL of its release, the holder wakes and deletes the next holder's lock; a third client then takes it while the second still works: their writes may conflict"
				return p
			}
			delayedDelete(fault, &p)
			return p
		}}
}

func newGetDel(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &GetDel{basic{GetDelName, d}}, nil
}

// TryAcquire sends SET key token NX PX ttl.
func (s *GetDel) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	token := newToken()
	if err := s.setNXPX(ctx, key, token, ttl); err != nil {
		return nil, err
	}
	return &lease{key: key, ttl: ttl, release: func(ctx context.Context) error {
		cmd, err := do(ctx, s.d.Redis, "get", s.rkey(key))
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("release %q: key gone: %w", key, locker.ErrNotHeld)
		}
		if err != nil { // GET changes nothing: surely no effect
			return fmt.Errorf("release %q: GET: %w", key, err)
		}
		if v, _ := cmd.Text(); v != token {
			return fmt.Errorf("release %q: held by another owner: %w", key, locker.ErrNotHeld)
		}
		return s.del(ctx, key)
	}}, nil
}
