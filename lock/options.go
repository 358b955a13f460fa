package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Defaults and limits.
const (
	// DefaultTTL is the lease length when Options.TTL is zero.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest lease accepted: below it the round trip eats the lease.
	MinTTL = 10 * time.Millisecond
	// DefaultDrift is the clock drift allowance when Options.Drift is zero.
	DefaultDrift = 0.01
	// MaxDrift bounds Options.Drift: past it a lease is valid for less than
	// half its TTL, which is a clock you should not run a lock on.
	MaxDrift = 0.5
	// MaxReplicaAcks bounds Options.ReplicaAcks (WAIT for more replicas than
	// a deployment has only ever times out).
	MaxReplicaAcks = 64
	// DefaultQueueTTL is Options.QueueTTL when zero.
	DefaultQueueTTL = time.Second
	// DefaultHandoffTTL is Options.HandoffTTL when zero.
	DefaultHandoffTTL = 100 * time.Millisecond
	// maxOwnerLen bounds owner tokens given with WithOwner.
	maxOwnerLen = 256
	// MaxMetadataLen bounds the metadata given WithMetadata (bytes).
	MaxMetadataLen = 4096
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// TTL is the lease length; 0 means DefaultTTL. It must be at least MinTTL.
	TTL time.Duration
	// Drift is the fraction of the TTL reserved for clock drift between the
	// client and Redis: a lease is valid until acquire start + TTL×(1−Drift).
	// 0 means DefaultDrift; it must be at most MaxDrift.
	Drift float64
	// Watchdog renews every lease every TTL/3 until it is released; a failed
	// renewal makes the lease lost (see Lease.Lost).
	Watchdog bool
	// ReplicaAcks, when > 0, makes every acquire wait (WAIT) until that many
	// replicas acknowledged it; fewer within ReplicaTimeout releases the lock
	// and fails with ErrReplicaAcks. This narrows, and does not close, the
	// window in which a failover loses the lock: replication stays asynchronous
	// and a replica that acknowledged may still not be the one promoted.
	ReplicaAcks int
	// ReplicaTimeout bounds the WAIT; 0 means TTL/10 (at least 10ms, at most 1s).
	ReplicaTimeout time.Duration
	// QueueTTL is how long a waiter keeps its place in the FIFO queue without
	// refreshing it (live waiters refresh every QueueTTL/3); it does not
	// follow the lease TTL of any call, and the queue's keys never expire
	// sooner than a waiter's place. 0 means DefaultQueueTTL.
	QueueTTL time.Duration
	// HandoffTTL is the provisional lease a waiter is handed when the lock
	// passes to it (a release, or a free lock whose queue head is not the
	// caller): the waiter confirms it on pickup with one round trip, which
	// gives it its full TTL. A waiter that died in line never confirms, so
	// it blocks the others for at most HandoffTTL (per dead waiter ahead),
	// not a whole TTL. 0 means DefaultHandoffTTL; it is capped by each
	// waiter's TTL. See WaitBound.
	HandoffTTL time.Duration
	// Logger receives warnings (failed cleanups, watchdog errors); nil discards them.
	Logger *slog.Logger
	// Rand, when set, is the Client's only source of randomness: its ID,
	// its owner tokens and its waiters' jitter, so that a simulation
	// (package sim) replays a seed byte for byte. Never set it in
	// production: clients seeded alike make the same owner tokens. nil
	// means crypto/rand for IDs and tokens and math/rand/v2 for jitter.
	Rand rand.Source
	// OnRenew, when set, is called around each renewal the watchdog makes:
	// just before the renewal is sent, with the lease's key, fence and TTL;
	// the func it returns (nil for none) is called once the renewal is
	// over, with its error (nil: renewed; ErrNotHeld: the lease is lost;
	// ErrUnknownOutcome: the reply was lost). Use it for metrics, logs, or
	// to record renewals (lockproof's harness does). It runs on the
	// watchdog's goroutine: keep it short, and do not call back into the
	// lease.
	OnRenew func(key string, fence uint64, ttl time.Duration) (done func(err error))
	// Hooks report what happens to locks, for metrics and logs.
	Hooks Hooks
	// SharedOwners makes a WithOwner token name the same owner in every
	// Client that is given it, in any process: an acquire WithOwner("job")
	// re-enters a lock that another process holds as "job". That is
	// rarely wanted, and one id reused by two processes (a hostname, a
	// job name) then silently means no exclusion between them; so by
	// default (false) an owner token belongs to the Client it was given
	// to (Redis stores it behind the Client's random ID, see Client.ID),
	// and two Clients that use the same token still exclude each other.
	// Set it only when holds must be shared across Clients on purpose,
	// and with Clients whose Options agree on it.
	SharedOwners bool
}

// Hooks are called as locks are acquired, released and lost, on the
// caller's goroutine (OnLost and EventLost: a goroutine of the lock's, the
// watchdog's, the expiry timer's, after the acquire that made the lease
// returned it and before a Release that follows). Keep them short; they
// must not call back into the lock (a loss's hooks may read the lease
// they are told of: Fence, ValidUntil, Context). Nil hooks are skipped.
type Hooks struct {
	// OnAcquire reports every acquire (of any kind, a Reenter too): how
	// long the call took (for Acquire, the wait) and its error (nil:
	// acquired).
	OnAcquire func(key string, took time.Duration, err error)
	// OnRelease reports every Release that ended a lease (nil or
	// ErrNotHeld): how long the lease was held.
	OnRelease func(key string, held time.Duration, err error)
	// OnLost reports a lease lost (its validity ran out without renewal, or
	// a renewal found the lock taken), with the reason.
	OnLost func(key string, fence uint64, cause error)
	// Begin, when set, is called as each call starts (an acquire of any
	// kind, a release, a renewal: the watchdog's too), with the call's
	// context. The call runs under the context it returns (a tracing
	// span's, say), and the func it returns, when not nil, is called once
	// as the call ends, with its outcome. Package lockproof/lockotel
	// makes OpenTelemetry spans and metrics of it.
	Begin func(ctx context.Context, c Call) (context.Context, func(Result))
	// Event, when set, reports what happens within and after a call (a
	// place in line, a hand-off picked up, a loss, a cleanup), with the
	// context Begin returned for the call it belongs to; a loss's and a
	// cleanup's are the acquire's, without its cancellation.
	Event func(ctx context.Context, e Event)
}

// RetryStrategy spaces the attempts of an Acquire made WithRetry:
// NextBackoff returns how long to wait before the next attempt, or 0 (or
// less) to give up. A strategy is used by one Acquire call: make a new one
// per call.
type RetryStrategy interface {
	NextBackoff() time.Duration
}

type linearBackoff time.Duration

func (b linearBackoff) NextBackoff() time.Duration { return time.Duration(b) }

// LinearBackoff waits d between attempts, forever (bound it with ctx or
// LimitRetry).
func LinearBackoff(d time.Duration) RetryStrategy { return linearBackoff(d) }

type exponentialBackoff struct{ next, max time.Duration }

func (b *exponentialBackoff) NextBackoff() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}

// ExponentialBackoff waits min, then twice as long each time, up to max.
func ExponentialBackoff(minWait, maxWait time.Duration) RetryStrategy {
	return &exponentialBackoff{next: minWait, max: max(minWait, maxWait)}
}

type limitRetry struct {
	s    RetryStrategy
	left int
}

func (l *limitRetry) NextBackoff() time.Duration { return l.next(l.s.NextBackoff) }

// next spends one retry and asks s for its wait, or gives up (0) when none
// is left.
func (l *limitRetry) next(wait func() time.Duration) time.Duration {
	if l.left <= 0 {
		return 0
	}
	l.left--
	return wait()
}

// LimitRetry gives up after n retries of s (n+1 attempts in all).
func LimitRetry(s RetryStrategy, n int) RetryStrategy { return &limitRetry{s: s, left: n} }

func (l *limitRetry) NextBackoffAfter(err error) time.Duration {
	return l.next(func() time.Duration { return nextAfter(l.s, err) })
}

// ErrorAwareStrategy is a RetryStrategy that sees why the last attempt
// failed. Acquire WithRetry calls NextBackoffAfter instead of NextBackoff
// when the strategy has it, with a *TakenError when the lock was taken,
// and with the attempt's error when it failed: one that surely had no
// effect (a Redis error reply, a refused connection), or, for a call
// without WithOwner, one whose outcome is unknown (the next attempt, by
// the same owner token, picks up what a lost reply may have taken). It
// returns the wait before the next attempt, or 0 (or less) to give up
// with that error. Without it, an Acquire WithRetry gives up on the first
// error that is not a taken lock.
type ErrorAwareStrategy interface {
	RetryStrategy
	NextBackoffAfter(err error) time.Duration
}

// nextAfter is s's next wait after an attempt that failed with err: an
// ErrorAwareStrategy decides; any other strategy retries a taken lock only.
func nextAfter(s RetryStrategy, err error) time.Duration {
	if ea, ok := s.(ErrorAwareStrategy); ok {
		return ea.NextBackoffAfter(err)
	}
	var taken *TakenError
	if errors.As(err, &taken) {
		return s.NextBackoff()
	}
	return 0
}

type retryIf struct {
	s  RetryStrategy
	ok func(error) bool
}

func (r retryIf) NextBackoff() time.Duration { return r.s.NextBackoff() }

func (r retryIf) NextBackoffAfter(err error) time.Duration {
	if !r.ok(err) {
		return 0
	}
	return r.s.NextBackoff()
}

// RetryIf retries as s does after every failed attempt whose error
// retryable accepts (a taken lock is a *TakenError, which wraps
// ErrNotAcquired), and gives up at once on any other: for example, keep
// trying through a failover's refused connections, but not when a Redis
// error reply says the script cannot run.
func RetryIf(s RetryStrategy, retryable func(err error) bool) ErrorAwareStrategy {
	return retryIf{s: s, ok: retryable}
}

type jitter struct {
	s    RetryStrategy
	frac float64
}

func (j jitter) spread(d time.Duration) time.Duration {
	if d <= 0 || j.frac <= 0 {
		return d
	}
	cut := time.Duration(float64(d) * min(j.frac, 1))
	return max(d-cut+rand.N(cut+1), 1) // never 0: that would mean "give up"
}

func (j jitter) NextBackoff() time.Duration { return j.spread(j.s.NextBackoff()) }

func (j jitter) NextBackoffAfter(err error) time.Duration { return j.spread(nextAfter(j.s, err)) }

// Jitter spreads s's waits: each wait d becomes a uniform draw from
// [d×(1−fraction), d] (fraction 1 is "full jitter", 0 changes nothing;
// it is clamped to [0, 1]), so that callers who failed together do not
// retry together. A give-up (0) stays one.
func Jitter(s RetryStrategy, fraction float64) ErrorAwareStrategy {
	return jitter{s: s, frac: max(fraction, 0)}
}

func (o Options) normalize() (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if err := checkTTL("Options.TTL", o.TTL); err != nil {
		return o, err
	}
	if o.Drift < 0 || o.Drift > MaxDrift || o.Drift != o.Drift {
		return o, fmt.Errorf("Options.Drift = %v: must be in [0, %v]: %w", o.Drift, MaxDrift, ErrInvalid)
	}
	if o.Drift == 0 {
		o.Drift = DefaultDrift
	}
	if o.ReplicaAcks < 0 || o.ReplicaAcks > MaxReplicaAcks {
		return o, fmt.Errorf("Options.ReplicaAcks = %d: must be in [0, %d]: %w", o.ReplicaAcks, MaxReplicaAcks, ErrInvalid)
	}
	if o.ReplicaTimeout < 0 {
		return o, fmt.Errorf("Options.ReplicaTimeout = %v: must be >= 0: %w", o.ReplicaTimeout, ErrInvalid)
	}
	if o.QueueTTL < 0 || (o.QueueTTL > 0 && o.QueueTTL < MinTTL) {
		return o, fmt.Errorf("Options.QueueTTL = %v: must be 0 or at least %v: %w", o.QueueTTL, MinTTL, ErrInvalid)
	}
	if o.QueueTTL == 0 {
		o.QueueTTL = DefaultQueueTTL
	}
	if o.HandoffTTL < 0 || (o.HandoffTTL > 0 && o.HandoffTTL < MinTTL) {
		return o, fmt.Errorf("Options.HandoffTTL = %v: must be 0 or at least %v: %w", o.HandoffTTL, MinTTL, ErrInvalid)
	}
	if o.HandoffTTL == 0 {
		o.HandoffTTL = DefaultHandoffTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

func checkTTL(field string, ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%s = %v: must be at least %v: %w", field, ttl, MinTTL, ErrInvalid)
	}
	return nil
}

// AcquireOption changes one Acquire or TryAcquire call.
type AcquireOption func(*callConfig)

type callConfig struct {
	ttl      time.Duration
	ttlSet   bool
	owner    string
	ownerSet bool
	watchdog bool
	retry    RetryStrategy
	queued   func()
	metadata string
}

// WithMetadata stores md with the lock while this call's hold stands
// (Inspect returns it; so does the Lease's Metadata): who holds it and
// why, for operators (redislock's Metadata, redsync's WithValue). A
// reentrant acquire with metadata replaces the lock's; without, it keeps
// it. A hand-off stores the waiter's metadata when it is picked up. At
// most MaxMetadataLen bytes.
func WithMetadata(md string) AcquireOption {
	return func(c *callConfig) { c.metadata = md }
}

// WithQueued makes Acquire call fn once it is in line: when the attempt
// that joined the queue has returned, having found the lock taken (not
// when the first attempt took the lock, nor with WithRetry, which never
// queues). For measuring time in line, and for the harness, which judges
// who was served first; fn must return quickly.
func WithQueued(fn func()) AcquireOption {
	return func(c *callConfig) { c.queued = fn }
}

// WithRetry makes Acquire retry one-shot attempts spaced by s instead of
// waiting in the FIFO queue: for callers who want a bounded number of
// attempts (LimitRetry) rather than a place in line. It gives up with
// ErrNotAcquired when s does, or when ctx ends. TryAcquire ignores it.
func WithRetry(s RetryStrategy) AcquireOption {
	return func(c *callConfig) { c.retry = s }
}

// WithTTL sets this call's lease length instead of Options.TTL (at least MinTTL).
func WithTTL(ttl time.Duration) AcquireOption {
	return func(c *callConfig) { c.ttl, c.ttlSet = ttl, true }
}

// WithOwner acquires as the given owner token instead of a fresh random one.
// When that owner already holds the lock, the acquire is reentrant: it
// increments the hold count, keeps the fence, and returns a new Lease for the
// extra hold; the lock is freed only when every hold has been released.
// Pass a held lease's Owner() to re-enter it. A waiter WithOwner that is
// handed the lock holds it once. A lease of the owner that was lost (it
// expired, or Redis forgot it) cannot release or renew a later hold of the
// same owner: its Release and Renew return ErrNotHeld (the scripts check
// the fence along with the owner).
//
// An acquire WithOwner whose outcome is unknown takes back, in the
// background, the hold it may have added (only that one: the owner's
// other holds are its Leases'), unless another acquire of the owner added
// a hold since; then the caller, who knows the token, decides.
func WithOwner(owner string) AcquireOption {
	return func(c *callConfig) { c.owner, c.ownerSet = owner, true }
}

// WithWatchdog turns the watchdog on or off for this call, overriding Options.Watchdog.
func WithWatchdog(on bool) AcquireOption {
	return func(c *callConfig) { c.watchdog = on }
}

func (c *Client) callConfig(opts []AcquireOption) (callConfig, error) {
	cfg := callConfig{ttl: c.opts.TTL, watchdog: c.opts.Watchdog}
	for i, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("option %d is nil: %w", i, ErrInvalid)
		}
		o(&cfg)
	}
	if cfg.ttlSet {
		if err := checkTTL("WithTTL", cfg.ttl); err != nil {
			return cfg, err
		}
	}
	if cfg.ownerSet && (cfg.owner == "" || len(cfg.owner) > maxOwnerLen) {
		return cfg, fmt.Errorf("WithOwner: owner must be 1..%d bytes, got %d: %w", maxOwnerLen, len(cfg.owner), ErrInvalid)
	}
	if len(cfg.metadata) > MaxMetadataLen {
		return cfg, fmt.Errorf("WithMetadata: %d bytes, at most %d: %w", len(cfg.metadata), MaxMetadataLen, ErrInvalid)
	}
	return cfg, nil
}

// WaitBound is how long after a lock is surely free (its last holder
// released it, or its lease surely expired) a live waiter gets it with
// these options, while Redis answers: a hand-off lease for each waiter
// ahead that died in line (deadAhead; the attempt that finds the lock free
// hands it to the head, so a dead head costs its hand-off lease and no
// more), one more for a live head's pickup, and 150ms of slack for round
// trips and scheduling. Callers that wait longer never give up on a lock
// that is free; lockproof's checker holds the lock to it (waiter liveness,
// G3).
func (o Options) WaitBound(deadAhead int) time.Duration {
	n, err := o.normalize()
	if err != nil {
		n = o
	}
	return time.Duration(max(deadAhead, 0)+1)*n.HandoffTTL + 150*time.Millisecond
}

func (c *Client) replicaTimeout(ttl time.Duration) time.Duration {
	if c.opts.ReplicaTimeout > 0 {
		return c.opts.ReplicaTimeout
	}
	return min(max(ttl/10, 10*time.Millisecond), time.Second)
}
