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

// Broken read-write locks and semaphores from the public bug record of
// Redisson's RReadWriteLock and RSemaphore (issue "Beyond the mutex"),
// each kept to prove the harness catches its flaw: a named property under
// a named fault (Entry.Decisive; TestZooBreaks runs it against real Redis).
const (
	// RWUnlockDeletesName: a read unlock deletes the whole lock.
	RWUnlockDeletesName = "rw-unlock-deletes"
	// RWShortReentryName: every acquire sets the lock's TTL, so a nested
	// hold taken for a shorter time ends the whole lock when it expires.
	RWShortReentryName = "rw-short-reentry"
	// SemNoExpiryName: a semaphore whose permits never expire.
	SemNoExpiryName = "sem-no-expiry"
	// SemGetSetName: a semaphore whose count is raced by GET then SET.
	SemGetSetName = "sem-getset"
)

// naiveRWScript: KEYS lock (a hash: "w" the writer's token, "wn" its
// holds, "r.<token>" a reader's holds). ARGV op ("r", "w":
// acquire; "R", "W": release; "x": renew), token, ttl ms, flags ("d": a
// read release deletes the lock; "s": every acquire and renewal sets the
// TTL instead of extending it). An acquire returns 1, 0 when refused; a
// release or renewal 1 when the token held the lock, else 0.
const naiveRWScript = `
local op, tok, ttl, flags = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local function expire()
  if string.find(flags, 's', 1, true) or redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
local w = redis.call('HGET', KEYS[1], 'w')
if op == 'r' then
  if w and w ~= tok then return 0 end
  redis.call('HINCRBY', KEYS[1], 'r.' .. tok, 1)
  expire()
  return 1
elseif op == 'w' then
  if w == tok then
    redis.call('HINCRBY', KEYS[1], 'wn', 1)
  elseif redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
  else
    redis.call('HSET', KEYS[1], 'w', tok, 'wn', 1)
  end
  expire()
  return 1
elseif op == 'R' then
  if not redis.call('HGET', KEYS[1], 'r.' .. tok) then return 0 end
  if string.find(flags, 'd', 1, true) then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if redis.call('HINCRBY', KEYS[1], 'r.' .. tok, -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'r.' .. tok)
  end
  return 1
elseif op == 'W' then
  if w ~= tok then return 0 end
  if redis.call('HINCRBY', KEYS[1], 'wn', -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'w', 'wn')
  end
  return 1
else
  if w == tok or redis.call('HEXISTS', KEYS[1], 'r.' .. tok) == 1 then
    expire()
    return 1
  end
  return 0
end
`

// NaiveRW is a read-write lock with one hash per key and one TTL for the
// whole lock, as Redisson's RReadWriteLock had it: readers count their
// holds per token, a writer excludes all. Its variants break it as the bug
// record says: rw-unlock-deletes (a read unlock deletes the whole lock, so
// a writer enters beside the other readers: rw-exclusion breaks with no
// fault at all) and rw-short-reentry (every acquire sets the lock's TTL,
// so a nested hold taken for a shorter time ends every hold when it
// expires, and a writer enters beside holds still valid: rw-exclusion).
// Holds carry no fence (as Redisson's); acquires never wait.
type NaiveRW struct {
	basic
	flags string
}

// naiveRWEntry is a NaiveRW specimen; sure: its flaw shows in (nearly)
// every run without a fault (its decisive scenario), else in most.
func naiveRWEntry(name, flags, doc string, sure bool) locker.Entry {
	var decisive *locker.Decisive
	pred := flawed(contract.PropLease)
	if sure {
		decisive = &locker.Decisive{Fault: contract.FaultNone, Property: contract.PropLease}
	} else {
		inner := pred
		pred = func(fault string, p locker.Prediction) locker.Prediction {
			p = inner(fault, p)
			if fault == contract.FaultNone {
				p.Set(contract.WantMay, contract.PropLease)
			}
			return p
		}
	}
	return locker.Entry{Name: name, Profile: locker.ProfileLease, Doc: doc,
		Decisive: decisive,
		Predict:  pred,
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			return &NaiveRW{basic: basic{name, d}, flags: flags}, nil
		}}
}

// flawed is the prediction of a broken specimen of a shared kind: its flaw
// breaks prop under no fault at all (violated there, its decisive
// scenario), and anywhere in a run under any fault (no prediction); the properties its
// algorithm says nothing of (claims, loss notice, liveness) have no
// prediction, and whatever the fault breaks for the shipped lock may
// break here too.
func flawed(prop string) func(string, locker.Prediction) locker.Prediction {
	return func(fault string, p locker.Prediction) locker.Prediction {
		for _, id := range contract.PropertyIDs() {
			if p.Want(id) == contract.WantViolated {
				p.Set(contract.WantMay, id)
			}
		}
		// What the flaw lets through breaks what depends on exclusion
		// too (a writer beside a reader: a lost update, a stale read).
		p.Set(contract.WantAny, contract.PropClaims, contract.PropNotice, contract.PropLiveness, contract.PropResource)
		p.Rejected = false
		if fault == contract.FaultNone {
			p.Set(contract.WantViolated, prop)
		} else {
			// It shows anywhere in the run, not only in the fault's
			// window (which "may" asks of a witness).
			p.Set(contract.WantAny, prop)
		}
		p.Because("a specimen of the bug record: its flaw shows without a fault; nothing is predicted of the properties its algorithm says nothing of")
		return p
	}
}

// Modes implements locker.Moded.
func (l *NaiveRW) Modes() []locker.Mode { return []locker.Mode{locker.ModeRead, locker.ModeWrite} }

// Capacity implements locker.Moded (a read-write lock: 0).
func (l *NaiveRW) Capacity() int { return 0 }

// TryAcquire is a write hold.
func (l *NaiveRW) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, locker.ModeWrite, newToken())
}

// AcquireMode implements locker.Moded; it never waits (wait: one attempt).
func (l *NaiveRW) AcquireMode(ctx context.Context, key string, ttl time.Duration, mode locker.Mode, _ int, _ bool, _ func()) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, mode, newToken())
}

func (l *NaiveRW) run(ctx context.Context, op, key, tok string, ttl time.Duration) (int64, error) {
	rk := l.rkey(key)
	cmd, err := runScript(ctx, l.d.Redis, naiveRWScript, []string{rk}, op, tok, ms(ttl), l.flags)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

func (l *NaiveRW) acquire(ctx context.Context, key string, ttl time.Duration, mode locker.Mode, tok string) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	op, rel := "w", "W"
	switch mode {
	case locker.ModeRead:
		op, rel = "r", "R"
	case locker.ModeWrite:
	default:
		return nil, fmt.Errorf("%s: acquire %q: mode %q: %w", l.name, key, mode, locker.ErrInvalid)
	}
	n, err := l.run(ctx, op, key, tok, ttl)
	if err != nil {
		return nil, fail("acquire", key, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("acquire %q: held: %w", key, locker.ErrNotAcquired)
	}
	x := &naiveRWLease{lease: lease{key: key, ttl: ttl}, l: l, mode: mode, tok: tok}
	x.release = func(ctx context.Context) error {
		n, err := l.run(ctx, rel, key, tok, ttl)
		if err != nil {
			return fail("release", key, err)
		}
		if n == 0 {
			return fmt.Errorf("release %q: %w", key, locker.ErrNotHeld)
		}
		return nil
	}
	x.renew = func(ctx context.Context, ttl time.Duration) error {
		n, err := l.run(ctx, "x", key, tok, ttl)
		if err != nil {
			return fail("renew", key, err)
		}
		if n == 0 {
			return fmt.Errorf("renew %q: %w", key, locker.ErrNotHeld)
		}
		return nil
	}
	return x, nil
}

// naiveRWLease is a hold of NaiveRW; Reenter takes one more of the same
// mode under the same token (locker.Reentrant).
type naiveRWLease struct {
	lease
	l    *NaiveRW
	mode locker.Mode
	tok  string
}

// Reenter implements locker.Reentrant.
func (x *naiveRWLease) Reenter(ctx context.Context, ttl time.Duration) (locker.Lease, error) {
	return x.l.acquire(ctx, x.key, ttl, x.mode, x.tok)
}

// naiveSemScript: KEYS holds (a hash: one field per hold, its token, and
// its permits). ARGV op ("a" acquire, "r" release, "x" renew), the hold's
// token, permits, capacity. An acquire returns 1, 0 when the permits do
// not fit; a release or renewal 1 when the
// hold stood, else 0. Nothing ever expires.
const naiveSemScript = `
local op, tok, k, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if op == 'a' then
  local used = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[1])) do used = used + tonumber(v) end
  if used + k > n then return 0 end
  redis.call('HSET', KEYS[1], tok, k)
  return 1
end
return redis.call('HDEL', KEYS[1], tok)
`

// NaiveSem is a semaphore kept as one count of the permits out. Its
// variants break it as the bug record says: sem-no-expiry (the count never
// expires: a crashed holder's permits never come back, and once they are
// all gone nobody gets one: liveness breaks under crash-client) and
// sem-getset (the count is read by GET and written by SET, two commands:
// two callers that read the same count both take permits, more than N
// at once: permits breaks, widest under latency). Holds carry no fence;
// acquires never wait.
type NaiveSem struct {
	basic
	getSet bool
}

// naiveSemEntry is a NaiveSem specimen; fault and prop its decisive
// scenario.
func naiveSemEntry(name string, getSet bool, fault, prop, doc string) locker.Entry {
	pred := flawed(prop)
	return locker.Entry{Name: name, Profile: locker.ProfileLease, Doc: doc,
		Decisive: &locker.Decisive{Fault: fault, Property: prop},
		Predict: func(f string, p locker.Prediction) locker.Prediction {
			p = pred(f, p)
			if f == fault {
				p.Set(contract.WantViolated, prop)
			} else if fault != contract.FaultNone && f == contract.FaultNone {
				p.Set(contract.WantOK, prop)
			}
			if traitsOf(f).PausesHolder {
				// Permit holders share: a paused one's claim
				// meets no conflicting grant (as fenced-sem).
				p.Set(contract.WantOK, contract.PropClaims)
			}
			if !getSet && f != contract.FaultNone {
				// Its permits never expire: a holder a fault delays past
				// its TTL (paused, cut off, slowed) still releases ok,
				// after the hold it asked for surely expired (seen in the
				// Sentinel matrix under load: docs/FINDINGS.md).
				mayBreak(&p, contract.PropLease)
				before(&p, "its permits never expire: a holder delayed past its TTL still releases ok, after its hold surely expired (lease may break)")
			}
			return p
		},
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			return &NaiveSem{basic: basic{name, d}, getSet: getSet}, nil
		}}
}

// Modes implements locker.Moded.
func (s *NaiveSem) Modes() []locker.Mode { return []locker.Mode{locker.ModePermits} }

// Capacity implements locker.Moded: FencedSemPermits, as fenced-sem's.
func (s *NaiveSem) Capacity() int { return FencedSemPermits }

// TryAcquire takes every permit.
func (s *NaiveSem) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return s.AcquireMode(ctx, key, ttl, locker.ModePermits, FencedSemPermits, false, nil)
}

// AcquireMode implements locker.Moded; it never waits.
func (s *NaiveSem) AcquireMode(ctx context.Context, key string, ttl time.Duration, mode locker.Mode, k int, _ bool, _ func()) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if mode != locker.ModePermits || k < 1 || k > FencedSemPermits {
		return nil, fmt.Errorf("%s: acquire %q: %d %s of %d: %w", s.name, key, k, mode, FencedSemPermits, locker.ErrInvalid)
	}
	rk := s.rkey(key)
	if s.getSet {
		return s.acquireGetSet(ctx, key, rk, ttl, k)
	}
	keys := []string{rk}
	tok := newToken()
	cmd, err := runScript(ctx, s.d.Redis, naiveSemScript, keys, "a", tok, k, FencedSemPermits)
	if err != nil {
		return nil, fail("acquire", key, err)
	}
	if f, _ := cmd.Int64(); f == 0 {
		return nil, fmt.Errorf("acquire %q: the permits do not fit: %w", key, locker.ErrNotAcquired)
	}
	// No expiry: the lease's TTL is 0 (locker.Lease: it never expires).
	x := &lease{key: key}
	end := func(op string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			cmd, err := runScript(ctx, s.d.Redis, naiveSemScript, keys, op, tok, k, FencedSemPermits)
			if err != nil {
				return fail("release", key, err)
			}
			if n, _ := cmd.Int64(); n == 0 {
				return fmt.Errorf("%q: the hold is gone: %w", key, locker.ErrNotHeld)
			}
			return nil
		}
	}
	x.release = end("r") // renew: nil (unsupported: nothing expires)
	return x, nil
}

// acquireGetSet is sem-getset's acquire: GET the count, then SET it
// (with the lease's TTL); its release is GET then SET too.
func (s *NaiveSem) acquireGetSet(ctx context.Context, key, rk string, ttl time.Duration, k int) (locker.Lease, error) {
	get := func(ctx context.Context) (int64, error) {
		cmd, err := do(ctx, s.d.Redis, "get", rk)
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return cmd.Int64()
	}
	used, err := get(ctx)
	if err != nil {
		return nil, fail("acquire", key, err)
	}
	if used+int64(k) > FencedSemPermits {
		return nil, fmt.Errorf("acquire %q: %d of %d permits out: %w", key, used, FencedSemPermits, locker.ErrNotAcquired)
	}
	// Another caller's GET between the two reads the same count.
	if _, err := do(ctx, s.d.Redis, "set", rk, used+int64(k), "px", ms(ttl)); err != nil {
		return nil, fail("acquire", key, err)
	}
	x := &lease{key: key, ttl: ttl}
	x.release = func(ctx context.Context) error {
		used, err := get(ctx)
		if err != nil {
			return fail("release", key, err)
		}
		if _, err := do(ctx, s.d.Redis, "set", rk, max(used-int64(k), 0), "px", ms(ttl)); err != nil {
			return fail("release", key, err)
		}
		return nil
	}
	x.renew = func(ctx context.Context, ttl time.Duration) error {
		if _, err := do(ctx, s.d.Redis, "pexpire", rk, ms(ttl)); err != nil {
			return fail("renew", key, err)
		}
		return nil
	}
	return x, nil
}

// The specimens' entries.
func rwUnlockDeletesEntry() locker.Entry {
	return naiveRWEntry(RWUnlockDeletesName, "d", "a read-write lock whose read unlock deletes the whole lock (Redisson's RReadWriteLock bug)", true)
}

// rwShortReentryEntry: its flaw needs a write hold, a nested hold with a
// shorter TTL inside it, the outer hold working on past that TTL and
// another client trying meanwhile: 5 runs in 6 without a fault (3s runs,
// real Redis, and 24 of 30 simulated seeds), fewer on a loaded machine
// (TestZooBreaks missed it on three seeds in a row with a core busy). It
// has no decisive scenario: TestSharedSpecimensCaught (package sim) holds
// the harness to catching it over seeds.
func rwShortReentryEntry() locker.Entry {
	return naiveRWEntry(RWShortReentryName, "s", "a read-write lock with one TTL that every acquire sets: a shorter nested hold ends the whole lock (Redisson's bug)", false)
}

func semNoExpiryEntry() locker.Entry {
	return naiveSemEntry(SemNoExpiryName, false, contract.FaultCrashClient, contract.PropLiveness,
		"a semaphore whose permits never expire: a crashed holder's permits never come back")
}

func semGetSetEntry() locker.Entry {
	return naiveSemEntry(SemGetSetName, true, contract.FaultNone, contract.PropLease,
		"a semaphore whose count is read by GET and written by SET: more than N permits out at once")
}
