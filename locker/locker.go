// Package locker is the interface through which lockproof's harness drives a
// lock: the production lock (package lock), the zoo of broken algorithms
// (package zoo), and any lock a user brings. It belongs to the harness, not
// to any lock: implement it in a few methods to put your lock under the
// matrix (see docs/OWN-LOCK.md).
//
// A lock implements Locker (one-shot acquire) and, when it has them, the
// optional interfaces Waiter (blocking acquire) and, on its leases,
// Reentrant (the owner acquires again). The workload asks for each with a
// type assertion and skips what a lock lacks, so a lock is never recorded
// doing an operation it does not have.
//
// # Outcomes
//
// Every method makes the attempt it describes once (go-redis is told not to
// resend) and honours its context. Errors map to history results:
//
//   - nil: ok.
//   - ErrNotAcquired (TryAcquire, Acquire, Reenter), ErrNotHeld (Release,
//     Renew): fail, the operation surely had no effect on the lock.
//   - ErrUnknownOutcome: unknown, the operation may or may not have taken
//     effect (a timeout or a connection lost after sending).
//   - ErrUnsupported: the algorithm has no such operation; nothing was sent
//     and nothing is recorded.
//   - ErrInvalid: bad input (a bug of the caller; the workload stops).
//   - a context error: unknown, since the command may have been sent (a
//     deadline that struck mid-command). The one exception is a blocking
//     acquire whose context ended while it waited in line with no command
//     in flight: it surely holds nothing, and returns ErrNotAcquired.
//   - anything else: surely no effect (a Redis error reply, a failed dial,
//     a closed client).
package locker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Test with errors.Is; a lock's own errors may wrap them.
var (
	// ErrNotAcquired: an acquire found the key held (or, for a blocking
	// acquire, its context ended while it waited); it surely took no effect.
	ErrNotAcquired = errors.New("locker: lock not acquired")
	// ErrNotHeld: Release or Renew was refused (expired, taken, released);
	// it surely took no effect.
	ErrNotHeld = errors.New("locker: lock not held")
	// ErrUnknownOutcome: the operation may or may not have taken effect.
	ErrUnknownOutcome = errors.New("locker: outcome unknown")
	// ErrUnsupported: the algorithm has no such operation (for example Renew
	// of a lock without expiry); nothing was sent.
	ErrUnsupported = errors.New("locker: operation not supported by this algorithm")
	// ErrInvalid: bad input; the message names the field.
	ErrInvalid = errors.New("locker: invalid argument")
)

// Locker is a lock algorithm under test. The harness opens one Locker per
// workload client (it may hold per-client state, such as an owner token or
// a skewed clock) and drives the lock through it; one client is one owner.
//
// TryAcquire makes one attempt to take key for ttl. It returns
// ErrNotAcquired when someone else holds the key and ErrUnknownOutcome when
// the attempt may have taken the lock without the caller learning it. Locks
// without expiry ignore ttl (their Lease.TTL is 0).
//
// Close models the client going away: it stops what the Locker runs for
// itself (watchdogs, subscriptions, connections it opened) and does not
// release leases, which then expire. Locks must not close the Redis clients
// they were given.
type Locker interface {
	Name() string
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
	Close() error
}

// ContextCloser is a Locker whose Close takes a context (package lock's
// Close(ctx)): it returns within ctx, leaving what it could not finish to
// finish in the background. The harness closes through it when a Locker
// has it, and records the close with its deadline (the calls property
// holds a lock that promises it, CallContract.Slack, to return in time).
type ContextCloser interface {
	CloseContext(ctx context.Context) error
}

// Process is a Locker that runs its lock in a process of its own (package
// lineproto: a lock in any language): the harness's client faults act on
// that process, pause-client with SIGSTOP and SIGCONT, crash-client with
// SIGKILL, to its whole process group. Pid is the process's id (its
// group's), 0 once it has exited.
type Process interface {
	Pid() int
}

// Waiter is a Locker with a blocking acquire: Acquire waits, in whatever way
// the lock waits (a queue, pub/sub, polling), until it holds key or ctx is
// done. When ctx ends while it waits and the caller surely does not hold the
// lock it returns an error wrapping ErrNotAcquired (and the ctx error); when
// the caller may hold it (a reply lost, a queue it could not leave), one
// wrapping ErrUnknownOutcome.
type Waiter interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
}

// InLine is a Waiter that says when a blocking acquire is in line:
// AcquireInLine is Acquire that calls inLine once, when the attempt that
// put the caller in line has returned having found the lock taken (never
// when it took the lock at once). The harness records that instant, and
// judges a lock's fair queue (locker.Entry.Fair) only for waiters whose
// lock says it: a later caller may otherwise have joined first.
type InLine interface {
	AcquireInLine(ctx context.Context, key string, ttl time.Duration, inLine func()) (Lease, error)
}

// Owned is a Locker whose acquires may name their owner, as package
// lock's WithOwner and Redisson's thread id do: AcquireAs is TryAcquire
// (wait false) or the blocking Acquire (wait true, telling inLine as
// InLine does when inLine is not nil) as owner. Acquires of one owner on a
// key are holds of that owner: the lock is free when each is released, a
// waiter handed the lock holds it once, and a lease of the owner that was
// lost must not release or renew a later hold of the same owner. The
// harness gives each client an owner of its own, and keeps it across
// holds, lost ones included.
type Owned interface {
	AcquireAs(ctx context.Context, key string, ttl time.Duration, owner string, wait bool, inLine func()) (Lease, error)
}

// Unwatched is a Locker whose acquires may ask for no watchdog, as
// package lock's WithWatchdog(false) and Redisson's lock with a lease time
// do: the lease then lasts its TTL unless its holder renews it.
// AcquireUnwatched is TryAcquire (wait false) or the blocking Acquire
// (wait true, telling inLine as InLine does when inLine is not nil)
// without the watchdog. The harness asks for it where the watchdog would
// hide a defect: a wait in line when its Locker is closed must not be
// granted (CallContract.CloseRefuses), whether or not a watchdog would
// have to look after the lease.
type Unwatched interface {
	AcquireUnwatched(ctx context.Context, key string, ttl time.Duration, wait bool, inLine func()) (Lease, error)
}

// Mode is the kind of hold a Moded lock grants: the history's "mode"
// (docs/DESIGN.md).
type Mode string

// The modes of a Moded lock.
const (
	// ModeRead is a read hold of a read-write lock: read holds share.
	ModeRead Mode = "read"
	// ModeWrite is a write hold of a read-write lock: it excludes every
	// other client's hold.
	ModeWrite Mode = "write"
	// ModePermits is a semaphore's hold of some of its Capacity permits.
	ModePermits Mode = "permits"
)

// Moded is a Locker whose holds have modes: a read-write lock (Modes
// ModeRead and ModeWrite; Capacity 0) or a semaphore (ModePermits of
// Capacity permits), as package lock's RWLock and Semaphore and Redisson's
// RReadWriteLock and RSemaphore are. AcquireMode is TryAcquire (wait
// false) or the blocking Acquire (wait true, telling inLine as InLine does
// when inLine is not nil) of a hold of mode, permits of them (1 but for
// ModePermits). The harness draws each acquire's mode (and permits),
// records them, and judges the key by the rules rw-exclusion and permits
// instead of exclusive leases (docs/DESIGN.md); TryAcquire, and Acquire
// when the lock is a Waiter, are its exclusive holds, as Locker asks: a
// write hold, or all Capacity permits.
type Moded interface {
	Modes() []Mode
	Capacity() int
	AcquireMode(ctx context.Context, key string, ttl time.Duration, mode Mode, permits int, wait bool, inLine func()) (Lease, error)
}

// Retrier is a Locker that can acquire by one-shot attempts spaced by a
// retry strategy (package lock's WithRetry, bsm/redislock's
// RetryStrategy): AcquireRetry never joins a line; it returns when an
// attempt took the lock, when the strategy gives up (ErrNotAcquired), or
// when ctx is done. The harness records it as a one-shot acquire (it is
// promised no wait bound: waiters in line go first).
type Retrier interface {
	AcquireRetry(ctx context.Context, key string, ttl time.Duration) (Lease, error)
}

// ForceUnlocker is a Locker with an operator's force unlock, as package
// lock's ForceUnlock and Redisson's forceUnlock do: it frees key whoever
// holds it (for an operator clearing a lock whose holder is believed
// gone), and reports whether a lock was held. The harness's force-unlock
// fault uses it while a client holds; a lock without it gets a DEL of its
// keys instead.
type ForceUnlocker interface {
	ForceUnlock(ctx context.Context, key string) (held bool, err error)
}

// Inspector is a Locker that tells who holds a key, as package lock's
// Inspect and HoldsOf and Redisson's isLocked, isHeldByThread and
// getHoldCount do: code and operators trust what it says, so the harness
// holds it to the history (the lease property's rules inspect-free,
// inspect-holder and hold-count, docs/DESIGN.md).
//
// Inspect reads key's state once, atomically. HoldsOf counts the holds
// owner (as AcquireAs named it) has on key: 0 when another owner holds
// it or nobody does. Both change nothing; errors as TryAcquire's (a
// reply lost is ErrUnknownOutcome, though nothing can have changed).
type Inspector interface {
	Inspect(ctx context.Context, key string) (Inspection, error)
	HoldsOf(ctx context.Context, key, owner string) (int64, error)
}

// Footprinter is a Locker that measures what it keeps in Redis for a key:
// Footprint reads the lock's own keys for key once (atomically, where it
// can) and changes nothing. The harness samples it during a run and once
// after every client stopped and closed, and holds the counts to the
// bound the lock states (Entry.Footprint; the footprint property,
// docs/DESIGN.md): a lock that leaks (a record of a hold that ended, a
// buried id never forgotten) grows past it. Footprint reads Redis only:
// it must work after Close. Errors as TryAcquire's.
type Footprinter interface {
	Footprint(ctx context.Context, key string) (Footprint, error)
}

// Footprint is what Footprint measured of a key's Redis keys.
type Footprint struct {
	// Records: hash fields, plus sorted set, set and list members, plus
	// string keys, summed over the lock's keys for the key.
	Records int64
	// Bytes: how much they hold (package lock's adapter: the lengths of
	// their fields, members and values; a lock may sum MEMORY USAGE). Shown,
	// not bounded.
	Bytes int64
}

// Inspection is what Inspect read of a key.
type Inspection struct {
	// Held: someone holds the key.
	Held bool
	// Holder names the holder's workload client (Deps.Client) as the lock
	// knows it (package lock: the hold's metadata, which the adapter sets
	// to Deps.Client; or the asking Locker itself); "" when it cannot say.
	Holder string
	// Holds is the holder's holds; HasHolds says the lock told it.
	Holds    int64
	HasHolds bool
	// Fence is the holder's fencing token; HasFence says the lock told it.
	Fence    uint64
	HasFence bool
}

// Lease is one hold of a lock.
//
// Fence returns the fencing token and ok=true for locks that issue one;
// tokens of successive holders of a key strictly increase. Locks without
// fencing return 0, false.
//
// Release gives this hold up (ErrNotHeld when refused). Renew extends it by
// ttl from now (ErrNotHeld when refused; ErrUnsupported when the algorithm
// cannot renew). Lost returns a channel closed when the algorithm itself
// learns or decides the lease is lost (a watchdog's refused renewal, a
// validity deadline), or nil when the algorithm never does. TTL is the
// lease length granted (0: the lock never expires).
type Lease interface {
	Key() string
	TTL() time.Duration
	Fence() (token uint64, ok bool)
	Release(ctx context.Context) error
	Renew(ctx context.Context, ttl time.Duration) error
	Lost() <-chan struct{}
}

// Claimer is a Lease that tells its user how long it is valid, as package
// lock's ValidUntil, redsync's Until and bsm/redislock's TTL do: the code
// under the lock trusts it, so the harness holds the lock to it (the claims
// property, docs/DESIGN.md). ValidUntil is the instant, on the Locker's
// clock (Deps.Clock), until which the lease is surely held; a zero time
// says the lock claims nothing now (the lease ended, was released or is
// lost). A lock that cannot say must not implement Claimer: the harness
// then takes the user's own reckoning, the acquire's start plus its TTL.
type Claimer interface {
	ValidUntil() time.Time
}

// ServerClaimer is a Lease that asks its lock's server how long the lease
// is still valid, as package lock's TTLLeft and bsm/redislock's TTL do:
// code checking its lock trusts the answer as it trusts ValidUntil, so the
// harness records it as a claim (history op ttl) and holds the lock to it
// (the claims property, docs/DESIGN.md), while the lease is held and
// after its release. TTLLeft returns the time left as the server counts
// it, and an error wrapping ErrNotHeld when the server says this lease is
// not held (expired, released, taken; a released nested hold among them,
// whatever its owner's other holds). It changes nothing; other errors as
// TryAcquire's.
type ServerClaimer interface {
	TTLLeft(ctx context.Context) (time.Duration, error)
}

// Contexter is a Lease that offers its holder a context canceled when the
// lease ends, lost or released, as package lock's Context does: code under
// the lock runs its work in it and stops when it is done, so the harness
// holds the lock to it as to Lost (a share of the workload's holders watch
// and check it alone: workload.Mix.Context; the loss-notice rule).
type Contexter interface {
	Context() context.Context
}

// Reentrant is a Lease whose owner can acquire its lock again while holding
// it: Reenter takes one more hold for ttl and returns it as a Lease of its
// own (with the same fence). The lock is free only when every hold has been
// released, and a hold must never shorten another's validity: the key stays
// held at least as long as the longest hold asks. Errors as TryAcquire's
// (ErrNotAcquired when the outer hold was already lost).
type Reentrant interface {
	Reenter(ctx context.Context, ttl time.Duration) (Lease, error)
}

// Deps is what an Opener gets to build a Locker for one workload client.
//
// Locks never close the clients in Deps. Each command must be sent once
// whatever the client's MaxRetries.
type Deps struct {
	// Redis is the lock's Redis (a single master, or a failover client).
	// Required by every lock but those on independent masters (Redlock).
	Redis redis.UniversalClient
	// Redlock are independent masters (at least 3, odd numbers
	// recommended), when the lock's Entry asks for them (Needs.Redlock).
	Redlock []redis.UniversalClient
	// Store is the lock's consensus store (etcd, ZooKeeper), when its
	// Entry asks for one (Needs.Store); the zero Store otherwise.
	Store Store
	// Clock is the client's wall clock; skew it to model clock skew. Only
	// algorithms that read wall time use it. nil means time.Now.
	Clock func() time.Time
	// Prefix is put before every key the lock stores in Redis ("" for none).
	Prefix string
	// Client is the name of the workload client the Locker serves (for
	// logs, and the hello of a lock in its own process); "" outside a
	// workload.
	Client string
	// Logger receives warnings (errors a faithful algorithm ignores,
	// watchdog failures); nil discards them.
	Logger *slog.Logger
	// Observer sees every renewal a lock makes on its own in the background
	// (a watchdog's), so that the harness can record them; nil observes
	// nothing.
	Observer Observer
	// Rand, in a simulation (package sim), is the client's own seeded
	// source: a lock that draws every random choice from it (IDs, tokens,
	// jitter) replays a seed byte for byte. nil everywhere else; never a
	// production source (clients seeded alike draw alike).
	Rand rand.Source
}

// Store is how one workload client reaches a consensus store: the lock
// opens its own client of the store on it (the etcd or ZooKeeper client
// library, which lockproof's module does not import) and closes it in its
// Locker's Close.
type Store struct {
	// Kind is the store's topology (contract.TopologyEtcd,
	// contract.TopologyZooKeeper); "" when there is none.
	Kind string
	// Endpoints are the members' client addresses (host:port), as the
	// store's client is given them.
	Endpoints []string
	// Dial dials an endpoint through this client's own links (its
	// proxies, and its gate: a paused client's connections carry nothing
	// until it wakes, a crashed one's fail). A lock must dial through it
	// (grpc.WithContextDialer, zk.WithDialer), or the faults miss it; nil
	// dials directly.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Username and Password are the store's login, when its members ask
	// for one: etcd's user (the client authenticates with them and sends
	// its token with every request); ZooKeeper's digest identity
	// user:password (sent with AddAuth on the session, and again on every
	// reconnection), and the nodes the lock creates then carry an ACL
	// that admits that identity alone, not world:anyone. Both empty: no
	// login. A lock must never format Password into an error or a log.
	Username, Password string
	// TLS, when set, is spoken on every connection to a member: etcd's
	// gRPC over it, a client certificate in its Certificates; ZooKeeper's
	// client port wrapped in it (a secureClientPort). Its ServerName,
	// when empty, is the host of the member's own address (never the
	// proxy's the bytes go through). nil: plain TCP.
	TLS *tls.Config
}

// String implements fmt.Stringer: the store's kind, endpoints and
// login, its password never (a Store formatted into an error or a log
// must not leak it).
func (s Store) String() string {
	pw := ""
	if s.Password != "" {
		pw = " with a password"
	}
	return fmt.Sprintf("%s store %v, user %q%s, TLS %t", s.Kind, s.Endpoints, s.Username, pw, s.TLS != nil)
}

// GoString implements fmt.GoStringer (%#v) as String does.
func (s Store) GoString() string { return s.String() }

// Observer sees the renewals a lock makes in the background, which the
// caller did not ask for and would otherwise not know about. A history that
// misses them shows a later release as coming after the lease surely
// expired.
//
// Renewing is called just before a background renewal of key for ttl is
// sent; token and hasToken are the lease's fence (Lease.Fence). The done
// func it returns is called exactly once, when the renewal is over, with its
// error, which maps to a result as Lease.Renew's does (see Outcomes). Both
// may be called from any goroutine, concurrently with the Locker's other
// methods; they must not block for long (the renewal waits for them) and
// must not call back into the Locker.
type Observer interface {
	Renewing(key string, ttl time.Duration, token uint64, hasToken bool) (done func(err error))
}

// Observe announces a background renewal to d.Observer; the done it returns
// is never nil. Lock adapters call it around each renewal they make on their
// own.
func (d Deps) Observe(key string, ttl time.Duration, token uint64, hasToken bool) func(error) {
	if d.Observer == nil {
		return func(error) {}
	}
	if done := d.Observer.Renewing(key, ttl, token, hasToken); done != nil {
		return done
	}
	return func(error) {}
}

// Normalize fills Clock and Logger when nil.
func (d Deps) Normalize() Deps {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}
