package zoo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo/internal/frozen/fencedv1"
	"github.com/lockproof/lockproof/zoo/internal/frozen/fencedv2"
)

// FencedEntry is the production lock (package lock) with opts, as the
// harness runs it: "fenced". Builtin has it with the watchdog on. Its TTL is
// replaced by each acquire's ttl, its Logger (when nil) by Deps.Logger, and
// its OnRenew (when nil) by one that announces every watchdog renewal to
// Deps.Observer.
func FencedEntry(opts lock.Options) locker.Entry {
	return fencedEntry(FencedName, "the production lock: owner token, fence, TTL, watchdog, FIFO queue with hand-off, reentrancy", opts)
}

// FencedAcksEntry is the production lock asking its acquires to be
// acknowledged by replicas (lock.Options.ReplicaAcks; 1 when opts asks
// none): "fenced-acks". Builtin has it with the watchdog on. An acquire
// that too few replicas acknowledged within ReplicaTimeout gives its hold
// back and fails with ErrReplicaAcks, an unknown outcome to the harness:
// the give-back may be lost or land late. Its predictions are the fenced
// profile's, as FencedEntry's: acknowledgements narrow a failover's loss,
// they do not close it (a renewal is not waited for, and the replica that
// acknowledged may not be the one promoted).
func FencedAcksEntry(opts lock.Options) locker.Entry {
	if opts.ReplicaAcks == 0 {
		opts.ReplicaAcks = 1
	}
	e := fencedEntry(FencedAcksName, "the production lock whose acquires wait for a replica's acknowledgement (ReplicaAcks 1)", opts)
	e.Needs.Replicas = opts.ReplicaAcks
	return e
}

// fencedEntry is package lock with opts, as the registry entry name.
func fencedEntry(name, doc string, opts lock.Options) locker.Entry {
	var loss func(time.Duration) time.Duration
	if opts.Watchdog {
		loss = watchdogLossBound
	}
	return locker.Entry{Name: name, Profile: locker.ProfileFenced, WaitBound: opts.WaitBound(1), LossBound: loss,
		// The fenced profile's predictions are its own; its resource
		// safety under pause-client, where every other lock breaks, is
		// what decides it.
		Decisive:  &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource},
		Fair:      &locker.FairQueue{}, // strict FIFO: a hand-off goes to the head of the line
		Calls:     fencedCalls(),
		Footprint: fencedFootprint(),
		Handoff:   fencedHandoff(opts),
		Doc:       doc,
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			opts := opts // per client: the hook below records into this client's history
			if opts.Logger == nil {
				opts.Logger = d.Logger
			}
			if opts.Rand == nil {
				opts.Rand = d.Rand // nil but in a simulation
			}
			if opts.OnRenew == nil {
				opts.OnRenew = observeRenewals(d)
			}
			c, err := lock.New(d.Redis, opts)
			if err != nil {
				return nil, mapLockErr(err)
			}
			return &Fenced{name: name, d: d, c: currentLock{c: c, md: d.Client, retries: new(atomic.Uint64)}}, nil
		}}
}

// watchdogLossBound is the loss notice a watchdog renewing every TTL/3
// promises: the next renewal finds the key gone or taken, within a third
// of the TTL and that renewal's round trip; half the TTL leaves the round
// trip a sixth of it (at least 50ms).
func watchdogLossBound(ttl time.Duration) time.Duration { return max(ttl/2, ttl/3+50*time.Millisecond) }

// fencedHandoff is package lock's hand-off promise with opts: a release
// that frees the lock with waiters in line hands it to the head (its
// script writes the head's provisional lease and publishes the head's
// token), and the head picks it up with one attempt: a pub/sub message and
// a round trip after the release's reply. Measured on loopback with the
// lock itself (8 s of 4 to 32 clients, each its own lock.Client and
// go-redis client, contending for one key with 2ms holds, on this 2-core
// machine shared with other jobs at a load average of 6 to 9;
// docs/FINDINGS.md): from a release's return to the next holder's grant, p99
// 0.9ms (4 clients), 1.8-2.1ms (8), 2.4ms (16), 4.4ms (32); of about
// 12,600 hand-offs the slowest took 51ms, 48ms, 37ms, 33ms, 29ms
// (scheduling: the process waiting for a core), 4 above 30ms, 2 above
// 40ms. The bound is the hand-off lease itself, HandoffTTL (100ms by
// default): 20 times the worst p99, and room for a loaded CI machine's
// scheduling stalls (40ms was passed by 2 of 12,600 hand-offs at a load
// of 6 to 9, and a real-time matrix has thousands); below the periods at which a waiter
// whose subscription it believes alive looks on its own: QueueTTL/3
// (333ms) to keep its place, the holder's remaining TTL. A lock whose
// waiters are served by their own look (a release that deletes the lock
// under its line, a subscription that died unnoticed) misses it; one
// whose waiters poll every HandoffTTL/2 because they know their
// subscription is down does not, by design: that is the lock's own
// fallback.
func fencedHandoff(opts lock.Options) *locker.HandoffBound {
	h := opts.HandoffTTL
	if h <= 0 {
		h = lock.DefaultHandoffTTL
	}
	return &locker.HandoffBound{Within: h}
}

// fencedCalls is what package lock promises about its calls (its doc,
// "Every blocking call honours its context"; Acquire after Close returns
// ErrClosed): each returns within its deadline plus a small constant. The
// lock's own constant is a goroutine switch; the second here is room for
// a loaded machine's scheduling (32 clients on two busy cores), and half
// the two op timeouts by which a call that ignores its ctx comes back
// late under the isolate fault (the workload's go-redis clients that
// ignore ctx deadlines read for three op timeouts).
func fencedCalls() *locker.CallContract {
	return &locker.CallContract{Slack: time.Second, CloseRefuses: true}
}

// lateWhy is what the frozen copies do under late-delivery: they bury no
// request their caller gave up on but an acquire's, and not a renewal or a
// release (round three's review: a nested hold's release landing after its
// undo freed the lock under the outer lease; a retried acquire's lost
// attempt took the lock for nobody). "" under any other fault.
func lateWhy(fault string, p *locker.Prediction) string {
	if !traitsOf(fault).DeliversLate {
		return ""
	}
	mayBreak(p, contract.PropLease, contract.PropLiveness, contract.PropClaims, contract.PropNotice, contract.PropFairness, contract.PropCalls)
	return "; the old lock's late requests take effect after their caller gave up (a nested hold's release landing after its undo frees the lock under the outer lease)"
}

// FencedName is the registry name of the production lock (FencedEntry).
const FencedName = "fenced"

// FencedAcksName is the registry name of the production lock waiting for a
// replica's acknowledgement (FencedAcksEntry).
const FencedAcksName = "fenced-acks"

// fencedV1Entry is "fenced-v1": package lock as it was before the fixes of
// its review (zoo/internal/frozen/fencedv1), without watchdog, kept to show that
// the harness catches its defects.
func fencedV1Entry() locker.Entry {
	// It claims what the shipped lock claims, its promise to waiters too.
	return locker.Entry{Name: FencedV1Name, Profile: locker.ProfileFenced, WaitBound: lock.Options{}.WaitBound(1), Fair: &locker.FairQueue{},
		Doc: "package lock before its review's fixes (frozen copy): a nested hold with a shorter TTL shortens the lease",
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if !contract.Predicted(fault) {
				return p
			}
			// The workload's nested holds with a fifth of the TTL shorten
			// the old lock's lease (its PEXPIRE takes the nested TTL):
			// another client takes the key while the outer lease is valid,
			// when it tries in that window: 9 runs in 10 without a fault (3s
			// runs). One run may miss it; a few seeds find it
			// (TestHarnessCatchesTheOldLock).
			mayBreak(&p, contract.PropLease, contract.PropClaims)
			why := "a nested hold with a shorter TTL shortens the old lock's lease (fixed in package lock), while the outer hold still claims its validity"
			if traitsOf(fault).KillsClients {
				// The old lock hands a waiter that died in line the whole
				// TTL, and keeps a dead head of the queue first until its
				// place expires: a live waiter behind it is served late
				// (waiter liveness), when the crash lines it up.
				mayBreak(&p, contract.PropLiveness)
				why += "; a waiter that died in line holds the old lock up for a TTL (waiter liveness)"
			}
			why += "; " + oldLineWhy(&p)
			why += lateWhy(fault, &p)
			if t := traitsOf(fault); t.CutsSubscriptions && t.KeepsServing {
				mayBreak(&p, contract.PropLiveness)
				why += "; the old lock's waiters take a dead subscription for a live one and may sleep through their hand-offs (waiter liveness)"
			}
			before(&p, why)
			return p
		},
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			// The queue deadline the shipped lock uses (the old one defaulted
			// to the lease TTL): the same configuration, the old algorithm.
			c, err := fencedv1.New(d.Redis, fencedv1.Options{Logger: d.Logger, QueueTTL: lock.DefaultQueueTTL, Rand: d.Rand})
			if err != nil {
				return nil, mapLockErr(err)
			}
			return &Fenced{name: FencedV1Name, d: d, c: v1Lock{c}}, nil
		}}
}

// fencedV2Entry is "fenced-v2": package lock as it was before the fixes of
// the review of what it tells its user (zoo/internal/frozen/fencedv2), with its
// watchdog on as "fenced" runs, kept to show that the harness catches its
// defects.
func fencedV2Entry() locker.Entry {
	return locker.Entry{Name: FencedV2Name, Profile: locker.ProfileFenced, WaitBound: fencedv2.Options{}.WaitBound(1),
		LossBound: watchdogLossBound, Fair: &locker.FairQueue{},
		// Held to the shipped lock's promise about its calls, which its
		// doc made too: its Close blocks behind a subscription dialing a
		// frozen Redis, its Acquire after Close succeeds, and its fencing
		// resource (frozen with it, fencedv2.Resource) ignores the ctx of a
		// go-redis client that does.
		Calls: fencedCalls(),
		Resources: func(rdb redis.UniversalClient, prefix string) (fencing.Resource, fencing.Resource, error) {
			return fencedv2.NewResource(rdb, prefix, true), fencedv2.NewResource(rdb, prefix, false), nil
		},
		Doc: "package lock before its second review's fixes (frozen copy): a release of unknown outcome keeps claiming the lease, a release racing the watchdog reports the lease lost",
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if !contract.Predicted(fault) {
				return p
			}
			why := oldLineWhy(&p) + lateWhy(fault, &p)
			// Both need a rushed release (the workload's rush-release
			// share) or a release landing on a watchdog renewal: most runs
			// show one.
			mayBreak(&p, contract.PropClaims, contract.PropNotice)
			why += "; a release of unknown outcome that did hand the lock on leaves the old lock claiming the lease (claims); a release racing its watchdog reports the released lease lost (loss notice)"
			if contract.Like(fault) == contract.FaultPartition {
				// A partitioned holder's read or write through the old
				// resource, on a go-redis client that ignores ctx
				// deadlines, runs to the client's read timeout.
				mayBreak(&p, contract.PropCalls)
				why += "; its fencing resource ignores the ctx of a go-redis client without ContextTimeoutEnabled: a partitioned holder's read or write returns at the client's read timeout, long after its deadline (call contract)"
			}
			if t := traitsOf(fault); t.CutsSubscriptions && t.KeepsServing {
				// Its notifier takes a dropped subscription whose
				// re-SUBSCRIBE was refused for a live one: a waiter sleeps
				// through its hand-off until its next look (a third of the
				// queue TTL, or the holder's TTL), its provisional lease
				// runs out, and the waiters behind it are served first. 4
				// of 4 seeds showed the fair queue broken, 3 of 4 a waiter
				// served late.
				p.Set(contract.WantViolated, contract.PropFairness)
				mayBreak(&p, contract.PropLiveness)
				why += "; the old lock's waiters take a dead subscription for a live one and sleep through their hand-offs: later joiners are served first (fair queue), and the waiter late (waiter liveness)"
			}
			before(&p, why)
			return p
		},
		Open: func(d locker.Deps) (locker.Locker, error) {
			if err := needRedis(d); err != nil {
				return nil, err
			}
			opts := fencedv2.Options{Watchdog: true, Logger: d.Logger, OnRenew: observeRenewals(d), Rand: d.Rand}
			c, err := fencedv2.New(d.Redis, opts)
			if err != nil {
				return nil, mapLockErr(err)
			}
			return &Fenced{name: FencedV2Name, d: d, c: v2Lock{c}}, nil
		}}
}

// oldLineWhy amends p with what both frozen copies do to their line and
// their owners, and says it. Under churn a waiter drops out of line (a
// hand-off to another waiter put off the attempt that refreshes its
// place): later joiners are served first. With the workload's owned
// acquires (workload.Mix.Owner), an owner handed the lock in line counts
// it twice, and its one release leaves the lock held for its TTL (the next
// acquire as that owner then gets the same token again, and waiters wait);
// and a lost lease's release frees the owner's newer hold.
func oldLineWhy(p *locker.Prediction) string {
	mayBreak(p, contract.PropFairness, contract.PropLease, contract.PropLiveness)
	return "under churn a waiter drops out of line and later joiners are served first (fair queue); an owner handed the lock in line counts it twice: its one release leaves the lock held (lease: the owner's next acquire gets the same token; waiter liveness), and a lost lease's release frees the owner's newer hold (lease: not-owner)"
}

type v2Lock struct{ c *fencedv2.Client }

func (l v2Lock) acquire(ctx context.Context, key string, ttl time.Duration, wait bool, owner string, inLine func()) (fencedHold, error) {
	var extra []fencedv2.AcquireOption
	if inLine != nil {
		extra = append(extra, fencedv2.WithQueued(inLine))
	}
	return acquireOn(ctx, key, ttl, wait, owner, l.c.TryAcquire, l.c.Acquire, fencedv2.WithTTL, fencedv2.WithOwner, extra...)
}

// close cannot pass ctx on: the old Close took none.
func (l v2Lock) close(context.Context) error { return l.c.Close() }

func (l v2Lock) forceUnlock(ctx context.Context, key string) (bool, error) {
	return l.c.ForceUnlock(ctx, key)
}

func (l v2Lock) acquireRetry(ctx context.Context, key string, ttl time.Duration) (fencedHold, error) {
	return acquireOn(ctx, key, ttl, true, "", l.c.TryAcquire, l.c.Acquire, fencedv2.WithTTL, fencedv2.WithOwner,
		fencedv2.WithRetry(fencedv2.ExponentialBackoff(retryMin, retryMax)))
}

// observeRenewals is an OnRenew hook (package lock's, or its frozen
// copies') that announces every watchdog renewal of a client to
// d.Observer, with the key as the harness names it.
func observeRenewals(d locker.Deps) func(key string, fence uint64, ttl time.Duration) func(error) {
	return func(key string, fence uint64, ttl time.Duration) func(error) {
		done := d.Observe(unprefix(d.Prefix, key), ttl, fence, true)
		return func(err error) { done(mapLockErr(err)) }
	}
}

func unprefix(prefix, key string) string { return key[min(len(prefix), len(key)):] }

// Fenced adapts the production lock (package lock) to locker: an owner
// token, a fencing counter and a TTL in one Lua script per operation, the
// FIFO queue with pub/sub hand-off behind Acquire, reentrancy behind
// Reenter, and the lock's own watchdog. It is the lock the harness is meant
// to confirm, run as users run it: every operation goes through
// lock.Client and lock.Lease, nothing is re-implemented here. (fenced-v1
// runs the frozen copy of the lock through the same adapter.)
//
// What it guarantees and where it breaks: G1 holds on one master under
// pauses, latency and partitions; a failover with asynchronous replication
// loses the lock (G1 breaks under failover). Fences strictly increase, so
// with a fenced resource G2 holds under every fault, failover included.
// Renew extends by the TTL the lease was acquired with: a different ttl is
// refused with ErrInvalid.
type Fenced struct {
	name string
	d    locker.Deps
	c    fencedClient
}

// fencedClient is what the adapter uses of a lock client: package lock's,
// or the frozen copy's.
type fencedClient interface {
	// acquire runs Acquire (wait) or TryAcquire, as owner when owner != "",
	// telling inLine (when not nil) when a wait is in line.
	acquire(ctx context.Context, key string, ttl time.Duration, wait bool, owner string, inLine func()) (fencedHold, error)
	forceUnlock(ctx context.Context, key string) (bool, error)
	// acquireRetry runs Acquire with the adapter's retry strategy
	// (WithRetry: spaced one-shot attempts, never in line).
	acquireRetry(ctx context.Context, key string, ttl time.Duration) (fencedHold, error)
	close(ctx context.Context) error
}

// Retries of AcquireRetry: exponential from 2ms to 50ms, as a user
// polling a busy lock would space them.
const retryMin, retryMax = 2 * time.Millisecond, 50 * time.Millisecond

// retryThroughTrouble is the shipped lock's AcquireRetry's RetryIf, as
// its doc suggests a user write one: keep trying through connection
// trouble (a lost reply among it: an unknown outcome, which the lock
// makes safe to retry), not when Redis refuses the script. It drives the
// lock's path for a retry after an unknown outcome (round three's defect
// 3: the lost attempt was never buried, and landing late it took the
// lock for a token nobody held).
func retryThroughTrouble(err error) bool {
	var refused redis.Error
	return !errors.As(err, &refused)
}

// givingUpRetry is the retry strategy of package lock's own example
// (ExampleRetryIf), which half of AcquireRetry's calls use, alternately:
// at most 5 retries, exponential from 10ms, through refused connections
// and lost replies, but none once the lock is simply taken. A call that
// gives up after an attempt whose reply was lost must say so
// (ErrUnknownOutcome) and leave no hold behind, not keep the lost
// attempt's hold for its TTL while it says surely not acquired. The example's Jitter is left out: it draws
// from the process's source, and a simulated seed would not replay.
func givingUpRetry() lock.RetryStrategy {
	notTaken := func(err error) bool { return !errors.Is(err, lock.ErrNotAcquired) }
	return lock.RetryIf(lock.LimitRetry(lock.ExponentialBackoff(10*time.Millisecond, time.Second), 5), notTaken)
}

// fencedHold is what the adapter uses of a lease; *lock.Lease has it.
type fencedHold interface {
	TTL() time.Duration
	Fence() uint64
	Owner() string
	Lost() <-chan struct{}
	ValidUntil() time.Time
	Context() context.Context
	Release(ctx context.Context) error
	Renew(ctx context.Context) error
}

// currentLock is package lock's client; md is the metadata its acquires
// store (Deps.Client: the workload client's name, which Inspect then
// reports as the holder).
type currentLock struct {
	c  *lock.Client
	md string
	// retries counts the AcquireRetry calls: every other one gives up
	// as package lock's example does (givingUpRetry).
	retries *atomic.Uint64
}

func (l currentLock) acquire(ctx context.Context, key string, ttl time.Duration, wait bool, owner string, inLine func()) (fencedHold, error) {
	var extra []lock.AcquireOption
	if inLine != nil {
		extra = append(extra, lock.WithQueued(inLine))
	}
	if l.md != "" {
		extra = append(extra, lock.WithMetadata(l.md))
	}
	return acquireOn(ctx, key, ttl, wait, owner, l.c.TryAcquire, l.c.Acquire, lock.WithTTL, lock.WithOwner, extra...)
}

func (l currentLock) close(ctx context.Context) error { return l.c.Close(ctx) }

// inspectorClient is a lock client that reports a key's holder (package
// lock's Inspect and HoldsOf; the frozen copies have no such API).
type inspectorClient interface {
	inspect(ctx context.Context, key string) (lock.Info, string, error)
	holdsOf(ctx context.Context, key, owner string) (int64, error)
}

// inspect is Client.Inspect, with the client's ID (Info.Owner is
// "<ID>/<token>" for its own holds).
func (l currentLock) inspect(ctx context.Context, key string) (lock.Info, string, error) {
	in, err := l.c.Inspect(ctx, key)
	return in, l.c.ID(), err
}

func (l currentLock) holdsOf(ctx context.Context, key, owner string) (int64, error) {
	return l.c.HoldsOf(ctx, key, owner)
}

func (l currentLock) forceUnlock(ctx context.Context, key string) (bool, error) {
	return l.c.ForceUnlock(ctx, key)
}

func (l currentLock) acquireRetry(ctx context.Context, key string, ttl time.Duration) (fencedHold, error) {
	var strategy lock.RetryStrategy = lock.RetryIf(lock.ExponentialBackoff(retryMin, retryMax), retryThroughTrouble)
	if l.retries != nil && l.retries.Add(1)%2 == 0 {
		strategy = givingUpRetry()
	}
	extra := []lock.AcquireOption{lock.WithRetry(strategy)}
	if l.md != "" {
		extra = append(extra, lock.WithMetadata(l.md))
	}
	return acquireOn(ctx, key, ttl, true, "", l.c.TryAcquire, l.c.Acquire, lock.WithTTL, lock.WithOwner, extra...)
}

type v1Lock struct{ c *fencedv1.Client }

func (l v1Lock) acquire(ctx context.Context, key string, ttl time.Duration, wait bool, owner string, _ func()) (fencedHold, error) {
	return acquireOn(ctx, key, ttl, wait, owner, l.c.TryAcquire, l.c.Acquire, fencedv1.WithTTL, fencedv1.WithOwner)
}

// close cannot pass ctx on: the old Close took none.
func (l v1Lock) close(context.Context) error { return l.c.Close() }

func (l v1Lock) forceUnlock(context.Context, string) (bool, error) {
	return false, fmt.Errorf("fenced-v1 has no ForceUnlock: %w", locker.ErrUnsupported)
}

func (l v1Lock) acquireRetry(context.Context, string, time.Duration) (fencedHold, error) {
	return nil, fmt.Errorf("fenced-v1 has no WithRetry: %w", locker.ErrUnsupported)
}

// acquireOn runs a lock package's TryAcquire (or Acquire, to wait) with its
// TTL option and, when owner is set, its owner option.
func acquireOn[O any, L fencedHold](ctx context.Context, key string, ttl time.Duration, wait bool, owner string,
	try, block func(context.Context, string, ...O) (L, error), withTTL func(time.Duration) O, withOwner func(string) O, extra ...O) (fencedHold, error) {
	opts := append([]O{withTTL(ttl)}, extra...)
	if owner != "" {
		opts = append(opts, withOwner(owner))
	}
	do := try
	if wait {
		do = block
	}
	h, err := do(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Name returns "fenced" (or "fenced-v1").
func (f *Fenced) Name() string { return f.name }

// Close closes the lock client: its watchdogs stop and its pub/sub
// subscription closes; leases stay, and expire after their TTL. It waits a
// second at most for the lock's background cleanups: a scenario's end must
// not wait for a frozen or cut-off Redis. Cleanups still running then are
// not an error of Close: the lock goes on burying what its lost requests
// may still do for a minute (package lock, "Unknown outcomes"), and a
// scenario's end promises nothing of them.
func (f *Fenced) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := f.c.close(ctx)
	if _, current := f.c.(currentLock); err != nil && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) && current {
		f.d.Logger.Debug("fenced: close left background cleanups running", "err", err)
		return nil
	}
	return err
}

// CloseContext is Close within ctx (locker.ContextCloser); the frozen
// copies' Close takes no ctx, and cannot honour it.
func (f *Fenced) CloseContext(ctx context.Context) error { return f.c.close(ctx) }

// TryAcquire makes one lock.Client.TryAcquire with ttl.
func (f *Fenced) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return f.acquire(ctx, key, ttl, false, "", nil)
}

// Acquire is lock.Client.Acquire with ttl: it queues FIFO and waits for the
// hand-off until ctx is done.
func (f *Fenced) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return f.acquire(ctx, key, ttl, true, "", nil)
}

// AcquireRetry is lock.Client.Acquire WithRetry (locker.Retrier):
// one-shot attempts spaced exponentially from 2ms to 50ms until one takes
// the lock or ctx is done, or Redis refuses one (retryThroughTrouble);
// every other call of the shipped lock's gives up as package lock's
// example does instead (givingUpRetry). ErrUnsupported on fenced-v1.
func (f *Fenced) AcquireRetry(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	h, err := f.c.acquireRetry(ctx, f.d.Prefix+key, ttl)
	if err != nil {
		return nil, mapLockErr(err)
	}
	return &fencedLease{f: f, key: key, h: h}, nil
}

// ForceUnlock is lock.Client.ForceUnlock (locker.ForceUnlocker): the lock
// passes to the first waiter, or is deleted; ErrUnsupported on fenced-v1.
func (f *Fenced) ForceUnlock(ctx context.Context, key string) (bool, error) {
	if ctx == nil || key == "" {
		return false, fmt.Errorf("force-unlock %q: ctx and key are required: %w", key, locker.ErrInvalid)
	}
	held, err := f.c.forceUnlock(ctx, f.d.Prefix+key)
	return held, mapLockErr(err)
}

// Inspect is lock.Client.Inspect (locker.Inspector): the holder is named
// by its hold's metadata (every acquire stores its client's name), or is
// this client itself when the owner is one of its own; ErrUnsupported on
// the frozen copies.
func (f *Fenced) Inspect(ctx context.Context, key string) (locker.Inspection, error) {
	ic, ok := f.c.(inspectorClient)
	if !ok {
		return locker.Inspection{}, fmt.Errorf("%s has no Inspect: %w", f.name, locker.ErrUnsupported)
	}
	if ctx == nil || key == "" {
		return locker.Inspection{}, fmt.Errorf("inspect %q: ctx and key are required: %w", key, locker.ErrInvalid)
	}
	in, id, err := ic.inspect(ctx, f.d.Prefix+key)
	if err != nil {
		return locker.Inspection{}, mapLockErr(err)
	}
	out := locker.Inspection{Held: in.Held}
	if in.Held {
		out.Holder = in.Metadata
		if out.Holder == "" && strings.HasPrefix(in.Owner, id+"/") {
			out.Holder = f.d.Client
		}
		out.Holds, out.HasHolds = in.Holds, true
		out.Fence, out.HasFence = in.Fence, in.Fence != 0
	}
	return out, nil
}

// HoldsOf is lock.Client.HoldsOf (locker.Inspector); ErrUnsupported on
// the frozen copies.
func (f *Fenced) HoldsOf(ctx context.Context, key, owner string) (int64, error) {
	ic, ok := f.c.(inspectorClient)
	if !ok {
		return 0, fmt.Errorf("%s has no HoldsOf: %w", f.name, locker.ErrUnsupported)
	}
	if ctx == nil || key == "" || owner == "" {
		return 0, fmt.Errorf("holds %q: ctx, key and owner are required: %w", key, locker.ErrInvalid)
	}
	n, err := ic.holdsOf(ctx, f.d.Prefix+key, owner)
	return n, mapLockErr(err)
}

// AcquireAs is TryAcquire or Acquire as owner (lock.WithOwner):
// locker.Owned.
func (f *Fenced) AcquireAs(ctx context.Context, key string, ttl time.Duration, owner string, wait bool, inLine func()) (locker.Lease, error) {
	if owner == "" {
		return nil, fmt.Errorf("acquire %q as owner: owner is empty: %w", key, locker.ErrInvalid)
	}
	return f.acquire(ctx, key, ttl, wait, owner, inLine)
}

// AcquireInLine is Acquire telling inLine when it is in line
// (lock.WithQueued; fenced-v1, which cannot say, never calls it).
func (f *Fenced) AcquireInLine(ctx context.Context, key string, ttl time.Duration, inLine func()) (locker.Lease, error) {
	return f.acquire(ctx, key, ttl, true, "", inLine)
}

func (f *Fenced) acquire(ctx context.Context, key string, ttl time.Duration, wait bool, owner string, inLine func()) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	h, err := f.c.acquire(ctx, f.d.Prefix+key, ttl, wait, owner, inLine)
	if err != nil {
		return nil, mapLockErr(err)
	}
	return &fencedLease{f: f, key: key, h: h}, nil
}

// fencedLease is one hold of the lock.
type fencedLease struct {
	f   *Fenced
	key string
	h   fencedHold
}

func (x *fencedLease) Key() string                       { return x.key }
func (x *fencedLease) TTL() time.Duration                { return x.h.TTL() }
func (x *fencedLease) Fence() (uint64, bool)             { return x.h.Fence(), true }
func (x *fencedLease) Lost() <-chan struct{}             { return x.h.Lost() }
func (x *fencedLease) Release(ctx context.Context) error { return mapLockErr(x.h.Release(ctx)) }

// Context implements locker.Contexter with the lease's own.
func (x *fencedLease) Context() context.Context { return x.h.Context() }

// ValidUntil implements locker.Claimer with the lease's own word: its
// ValidUntil while its Context is live, nothing once the Context is done
// (the lock's doc: done when the lease is released or lost).
func (x *fencedLease) ValidUntil() time.Time {
	if x.h.Context().Err() != nil {
		return time.Time{}
	}
	return x.h.ValidUntil()
}

// Renew is Lease.Renew by the lease's TTL, or RenewFor with another ttl
// (the lease's TTL from then on); fenced-v1, which has no RenewFor,
// refuses another ttl with ErrUnsupported.
func (x *fencedLease) Renew(ctx context.Context, ttl time.Duration) error {
	if ttl == x.h.TTL() {
		return mapLockErr(x.h.Renew(ctx))
	}
	rf, ok := x.h.(interface {
		RenewFor(context.Context, time.Duration) error
	})
	if !ok {
		return fmt.Errorf("renew %q: ttl = %v: this lock renews by its TTL %v only: %w", x.key, ttl, x.h.TTL(), locker.ErrUnsupported)
	}
	return mapLockErr(rf.RenewFor(ctx, ttl))
}

// Reenter takes one more hold with its own ttl and the same fence: the
// production lock's Lease.Reenter, which refuses (ErrNotAcquired, as
// locker.Reentrant asks) once this lease's hold is gone; the frozen
// copies, which have none, acquire again as the lease's owner
// (WithOwner), which takes a fresh hold then.
func (x *fencedLease) Reenter(ctx context.Context, ttl time.Duration) (locker.Lease, error) {
	l, ok := x.h.(*lock.Lease)
	if !ok {
		return x.f.acquire(ctx, x.key, ttl, false, x.h.Owner(), nil)
	}
	if err := checkArgs(ctx, x.key, ttl, true); err != nil {
		return nil, err
	}
	h, err := l.Reenter(ctx, lock.WithTTL(ttl))
	if errors.Is(err, lock.ErrNotHeld) {
		return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, err)
	}
	if err != nil {
		return nil, mapLockErr(err)
	}
	return &fencedLease{f: x.f, key: x.key, h: h}, nil
}

// mapLockErr adds locker's sentinel to an error of package lock (or of its
// frozen copy); the lock's own sentinels stay matchable too.
func mapLockErr(err error) error {
	var s error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lock.ErrUnknownOutcome), errors.Is(err, lock.ErrReplicaAcks),
		errors.Is(err, fencedv1.ErrUnknownOutcome), errors.Is(err, fencedv1.ErrReplicaAcks),
		errors.Is(err, fencedv2.ErrUnknownOutcome), errors.Is(err, fencedv2.ErrReplicaAcks):
		s = locker.ErrUnknownOutcome
	case errors.Is(err, lock.ErrNotAcquired), errors.Is(err, fencedv1.ErrNotAcquired), errors.Is(err, fencedv2.ErrNotAcquired):
		s = locker.ErrNotAcquired
	case errors.Is(err, lock.ErrNotHeld), errors.Is(err, fencedv1.ErrNotHeld), errors.Is(err, fencedv2.ErrNotHeld):
		s = locker.ErrNotHeld
	case errors.Is(err, lock.ErrInvalid), errors.Is(err, fencedv1.ErrInvalid), errors.Is(err, fencedv2.ErrInvalid):
		s = locker.ErrInvalid
	default:
		return err
	}
	return fmt.Errorf("%w: %w", s, err)
}
