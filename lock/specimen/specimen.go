// Package specimen holds lock algorithms from the literature that are known
// to be broken, and an adapter over the production lock (package lock), all
// behind one interface, Locker, that the chaos harness drives every lock
// through. Implement Locker to run your own lock under the harness.
//
// The specimens are kept faithful to their sources on purpose: neither
// accidentally correct nor more broken than the published version. Each
// one's doc comment cites where it comes from, says what is wrong with it,
// and under which fault it breaks:
//
//	name          source                                         breaks
//	setnx         redis.io SETNX docs (old), antirez              liveness: a crashed holder keeps the lock forever
//	setnx-expire  the SETNX + EXPIRE idiom                        liveness: a crash between the two commands
//	set-del       SET NX PX, unlock with DEL                      G1: a woken paused holder deletes another's lock
//	get-del       owner token, GET then DEL                       G1: expiry between GET and DEL
//	getset        redis.io SETNX docs (old) "deadlock" recipe     G1: skewed client clocks give two holders
//	lua           antirez, "Distributed locks with Redis"         G2 without fencing (pause); G1 under failover
//	watchdog      lua + renewal every TTL/3 (Redisson-style)       G2 without fencing (pause); G1 under failover
//	reentrant     Redisson RLock (hash counter)                   G2 without fencing (pause); G1 under failover
//	redlock       antirez's Redlock; Kleppmann 2016                G2 without fencing (pause, clock jumps)
//	fenced        the production lock (package lock)              G1 under failover; G2 holds with fencing
//
// # Outcomes
//
// Every method makes the attempt it describes once (go-redis is told not to
// resend) and honours its context. Errors map to history results:
//
//   - nil: ok.
//   - ErrNotAcquired (TryAcquire), ErrNotHeld (Release, Renew): fail, the
//     operation surely had no effect on the lock.
//   - ErrUnknownOutcome: unknown, the operation may or may not have taken
//     effect (a timeout or a connection lost after sending).
//   - ErrUnsupported: the algorithm has no such operation; nothing was sent
//     and nothing should be recorded.
//   - ErrInvalid: bad input; anything else: surely no effect (a context done
//     before sending, a Redis error reply, a failed dial, a closed client).
package specimen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/lock"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrNotAcquired: TryAcquire found the key held; it surely took no effect.
	ErrNotAcquired = errors.New("specimen: lock not acquired")
	// ErrNotHeld: Release or Renew was refused (expired, taken, released);
	// it surely took no effect.
	ErrNotHeld = errors.New("specimen: lock not held")
	// ErrUnknownOutcome: the operation may or may not have taken effect.
	ErrUnknownOutcome = errors.New("specimen: outcome unknown")
	// ErrUnsupported: the algorithm has no such operation (for example Renew
	// of a lock without expiry); nothing was sent.
	ErrUnsupported = errors.New("specimen: operation not supported by this algorithm")
	// ErrInvalid: bad input; the message names the field.
	ErrInvalid = errors.New("specimen: invalid argument")
)

// Locker is a lock algorithm under test. The harness makes one Locker per
// workload client (it may hold per-client state, such as a reentrancy owner
// or a skewed clock) and drives every lock through it.
//
// TryAcquire makes one attempt to take key for ttl. It returns ErrNotAcquired
// when someone else holds the key and ErrUnknownOutcome when the attempt may
// have taken the lock without the caller learning it. Locks without expiry
// ignore ttl (their Lease.TTL is 0).
//
// Close releases what the Locker holds for itself (connections it opened,
// subscriptions, watchdogs); it does not release leases. Locks must not
// close the Redis clients they were given.
type Locker interface {
	Name() string
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
	Close() error
}

// Lease is one hold of a lock, returned by Locker.TryAcquire.
//
// Fence returns the fencing token and ok=true for locks that issue one;
// tokens of successive holders of a key strictly increase. Locks without
// fencing return 0, false.
//
// Release gives the lock up (ErrNotHeld when refused). Renew extends it by
// ttl from now (ErrNotHeld when refused; ErrUnsupported when the algorithm
// cannot renew). Lost returns a channel closed when the algorithm itself
// learns or decides the lease is lost (a watchdog's refused renewal, the
// fenced lock's validity deadline), or nil when the algorithm never does.
// TTL is the lease length granted (0: the lock never expires).
type Lease interface {
	Key() string
	TTL() time.Duration
	Fence() (token uint64, ok bool)
	Release(ctx context.Context) error
	Renew(ctx context.Context, ttl time.Duration) error
	Lost() <-chan struct{}
}

// Deps is what Open needs to build a Locker for one workload client.
//
// Locks never close the clients in Deps. Each command is sent once whatever
// the client's MaxRetries.
type Deps struct {
	// Redis is the lock's Redis (a single master, or a failover client).
	// Required by every lock but redlock.
	Redis redis.UniversalClient
	// Redlock are the independent masters of redlock (at least 3, odd
	// numbers recommended). Required by redlock only.
	Redlock []redis.UniversalClient
	// RedlockTimeout bounds each instance's reply in redlock; 0 means
	// TTL/10 clamped to [5ms, 50ms] (antirez: "5-50 milliseconds" for 10s).
	RedlockTimeout time.Duration
	// Clock is the client's wall clock; skew it to model clock skew. Only
	// algorithms that read wall time (getset) use it. nil means time.Now.
	Clock func() time.Time
	// Prefix is put before every key the lock stores in Redis ("" for none).
	// The fenced lock names its keys itself (lock.RedisKeys(Prefix+key)).
	Prefix string
	// Fenced configures the production lock behind "fenced" (Watchdog,
	// ReplicaAcks, Drift, ...); its TTL is replaced by each TryAcquire's ttl
	// and its Logger, when nil, by Logger.
	Fenced lock.Options
	// Logger receives warnings (errors a faithful algorithm ignores, watchdog
	// failures); nil discards them.
	Logger *slog.Logger
	// Observer sees every renewal a lock makes on its own in the background
	// (the watchdog specimen's, and the fenced lock's when Fenced.Watchdog is
	// on), so that the harness can record them; nil observes nothing.
	Observer Observer
}

// Observer sees the renewals a lock makes in the background, which the
// caller did not ask for and would otherwise not know about. A history that
// misses them shows a later release as coming after the lease surely
// expired.
//
// Renewing is called just before a background renewal of key for ttl is
// sent; token and hasToken are the lease's fence (Lease.Fence). The done
// func it returns is called exactly once, when the renewal is over, with its
// error, which maps to a result as Lease.Renew's does (see Outcomes): nil
// ok, ErrNotHeld fail, ErrUnknownOutcome unknown (so is a context error:
// the renewal was stopped while it ran), anything else surely no effect.
// Renewing and done may be called from any goroutine, concurrently with the
// Locker's other methods; they must not block for long (the renewal waits
// for them) and must not call back into the Locker.
type Observer interface {
	Renewing(key string, ttl time.Duration, token uint64, hasToken bool) (done func(err error))
}

// observe announces a background renewal to d.Observer; the done it returns
// is never nil.
func (d Deps) observe(key string, ttl time.Duration, token uint64, hasToken bool) func(error) {
	if isNil(d.Observer) {
		return func(error) {}
	}
	if done := d.Observer.Renewing(key, ttl, token, hasToken); done != nil {
		return done
	}
	return func(error) {}
}

func (d Deps) normalize() Deps {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}

// opener builds one Locker.
type opener func(d Deps) (Locker, error)

func openers() map[string]opener {
	return map[string]opener{
		"setnx":        newSetNX,
		"setnx-expire": newSetNXExpire,
		"set-del":      newSetDel,
		"get-del":      newGetDel,
		"getset":       newGetSet,
		"lua":          newLua,
		"watchdog":     newWatchdog,
		"reentrant":    newReentrant,
		"redlock":      newRedlock,
		"fenced":       newFenced,
	}
}

// Names returns the names Open accepts, sorted. They are a contract (the
// CLI's --locks and summary.json use them).
func Names() []string {
	m := openers()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open returns a new Locker of the named algorithm (see Names).
func Open(name string, d Deps) (Locker, error) {
	o, ok := openers()[name]
	if !ok {
		return nil, fmt.Errorf("open lock %q: unknown name (known: %v): %w", name, Names(), ErrInvalid)
	}
	l, err := o(d.normalize())
	if err != nil {
		return nil, fmt.Errorf("open lock %q: %w", name, err)
	}
	return l, nil
}

// needRedis checks Deps.Redis.
func needRedis(d Deps) error {
	if isNil(d.Redis) {
		return fmt.Errorf("Deps.Redis is nil: %w", ErrInvalid)
	}
	return nil
}

// checkArgs validates the arguments of TryAcquire.
func checkArgs(ctx context.Context, key string, ttl time.Duration, needTTL bool) error {
	if ctx == nil {
		return fmt.Errorf("acquire %q: ctx is nil: %w", key, ErrInvalid)
	}
	if key == "" {
		return fmt.Errorf("acquire: key is empty: %w", ErrInvalid)
	}
	if needTTL && ttl < time.Millisecond {
		return fmt.Errorf("acquire %q: ttl = %v: must be at least 1ms: %w", key, ttl, ErrInvalid)
	}
	return nil
}

func checkTTL(op, key string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%s %q: ttl = %v: must be at least 1ms: %w", op, key, ttl, ErrInvalid)
	}
	return nil
}
