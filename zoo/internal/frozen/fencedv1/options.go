package fencedv1

import (
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
	// maxOwnerLen bounds owner tokens given with WithOwner.
	maxOwnerLen = 256
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// TTL is the lease length; 0 means DefaultTTL. It must be at least MinTTL.
	TTL time.Duration
	// Drift is the fraction of the TTL reserved for clock drift between the
	// client and Redis: a lease is valid until acquire start + TTL×(1−Drift).
	// 0 means DefaultDrift; it must be in [0,1).
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
	// refreshing it (waiters refresh every QueueTTL/3). A waiter that crashed
	// keeps its place that long, and if a release hands it the lock in that
	// time, the lock stays unusable for its TTL: a crashed waiter delays the
	// others by at most QueueTTL + TTL. 0 means the lease TTL.
	QueueTTL time.Duration
	// Logger receives warnings (failed cleanups, watchdog errors); nil discards them.
	Logger *slog.Logger
	// Rand is the harness's hook for a replayable simulation (the shipped
	// lock's Options.Rand); nil: crypto/rand and math/rand/v2.
	Rand rand.Source
}

func (o Options) normalize() (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if err := checkTTL("Options.TTL", o.TTL); err != nil {
		return o, err
	}
	if o.Drift < 0 || o.Drift >= 1 || o.Drift != o.Drift {
		return o, fmt.Errorf("Options.Drift = %v: must be in [0,1): %w", o.Drift, ErrInvalid)
	}
	if o.Drift == 0 {
		o.Drift = DefaultDrift
	}
	if o.ReplicaAcks < 0 {
		return o, fmt.Errorf("Options.ReplicaAcks = %d: must be >= 0: %w", o.ReplicaAcks, ErrInvalid)
	}
	if o.ReplicaTimeout < 0 {
		return o, fmt.Errorf("Options.ReplicaTimeout = %v: must be >= 0: %w", o.ReplicaTimeout, ErrInvalid)
	}
	if o.QueueTTL < 0 || (o.QueueTTL > 0 && o.QueueTTL < MinTTL) {
		return o, fmt.Errorf("Options.QueueTTL = %v: must be 0 or at least %v: %w", o.QueueTTL, MinTTL, ErrInvalid)
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
}

// WithTTL sets this call's lease length instead of Options.TTL (at least MinTTL).
func WithTTL(ttl time.Duration) AcquireOption {
	return func(c *callConfig) { c.ttl, c.ttlSet = ttl, true }
}

// WithOwner acquires as the given owner token instead of a fresh random one.
// When that owner already holds the lock, the acquire is reentrant: it
// increments the hold count, keeps the fence, and returns a new Lease for the
// extra hold; the lock is freed only when every hold has been released.
// Pass a held lease's Owner() to re-enter it.
//
// Because the hold count changes, an acquire WithOwner whose outcome is
// unknown is not cleaned up: the caller, who knows the token, decides.
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
	return cfg, nil
}

func (c *Client) queueTTL(ttl time.Duration) time.Duration {
	if c.opts.QueueTTL > 0 {
		return c.opts.QueueTTL
	}
	return ttl
}

func (c *Client) replicaTimeout(ttl time.Duration) time.Duration {
	if c.opts.ReplicaTimeout > 0 {
		return c.opts.ReplicaTimeout
	}
	return min(max(ttl/10, 10*time.Millisecond), time.Second)
}
