package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// Client is one workload client: its own proxies, gate, clock, Redis
// clients, lock and resource.
type Client struct {
	Name  string
	Key   string
	Links *env.Links
	Gate  *gate.Gate
	Clock *gate.Clock

	lockRDB  redis.UniversalClient
	resRDB   *redis.Client
	redlock  []*redis.Client
	locker   locker.Locker
	fenced   fencing.Resource // for leases with a fencing token
	unfenced fencing.Resource // for leases without one
	rng      *rand.Rand
	// side is a second stream, for the choices added after seeds were
	// saved (Mix.Concurrent): drawing them from rng would shift every
	// later draw of a saved seed, and the finding it was saved for.
	side    *rand.Rand
	holding atomic.Bool
	working atomic.Bool                // between its read and its lease check (Working)
	held    chan struct{}              // signalled (non-blocking) when the client holds with its write ahead
	waiting atomic.Bool                // a blocking acquire is in line (see FirstQueued)
	invoked atomic.Pointer[history.Op] // the lock op in flight, as invoked
	// onQueued, when set (a child process), is told when the client starts
	// and stops waiting in line, with the blocking acquire as invoked.
	onQueued func(op *history.Op, waiting bool)
	// onHolding, when set (a child process), is told when the client
	// starts and stops holding with its write ahead (Holding).
	onHolding func(holding bool)
	stopped   atomic.Bool
	rec       atomic.Pointer[history.Recorder] // set by Run: where background renewals are recorded
	holds     uint64                           // the last hold number given (history.Op.Hold)
	watchers  sync.WaitGroup                   // loss-notice watchers (watchLoss)
	gone      chan struct{}                    // closed when the client leaves for good (Mix.Leave)
	// ctxTimeouts: the client's go-redis clients honour ctx deadlines (CtxTimeouts).
	ctxTimeouts bool
}

// Working reports whether the client holds its lock and works on what it
// read, before its lease check (a key lost now leaves a holder that only
// its lock's loss notice can warn).
func (c *Client) Working() bool { return c.working.Load() }

// Locker is the client's lock (an operator's fault may use it: a force
// unlock goes through the lock's own API).
func (c *Client) Locker() locker.Locker { return c.locker }

// setHolding marks the client holding with its write ahead, or not, and
// tells whoever waits for it (WaitHolding, the parent of a child process).
func (c *Client) setHolding(h bool) {
	if c.holding.Swap(h) == h {
		return
	}
	if h {
		select {
		case c.held <- struct{}{}:
		default:
		}
	}
	if c.onHolding != nil {
		c.onHolding(h)
	}
}

// Holding reports whether the client holds its lock with its write ahead
// (between its lease check and its write's command).
func (c *Client) Holding() bool { return c.holding.Load() }

// CanWait reports whether the client's lock has a blocking acquire
// (locker.Waiter): only then can it be caught waiting in line.
func (c *Client) CanWait() bool {
	_, ok := c.locker.(locker.Waiter)
	return ok
}

// FirstQueued waits until one of cs waits in line in a blocking acquire
// (one that has not returned after queuedAfter: its first attempt found the
// lock taken) and returns it, bounded by ctx: a crash that strikes then
// leaves a dead waiter in the lock's queue.
func FirstQueued(ctx context.Context, cs []*Client) (*Client, error) {
	return firstOf(ctx, cs, "queue", func(c *Client) bool { return c.waiting.Load() })
}

// FirstHolding waits until one of cs holds its lock with its write ahead
// (Holding) and returns it, bounded by ctx.
func FirstHolding(ctx context.Context, cs []*Client) (*Client, error) {
	return firstOf(ctx, cs, "hold", (*Client).Holding)
}

// firstOf waits until one of cs that has not crashed is as it says (what
// it waits for, to do) and returns it, bounded by ctx.
func firstOf(ctx context.Context, cs []*Client, to string, is func(*Client) bool) (*Client, error) {
	var found *Client
	err := poll(ctx, func() bool {
		for _, c := range cs {
			if is(c) && !c.Gate.Crashed() {
				found = c
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("wait for one of %d clients to %s: %w", len(cs), to, err)
	}
	return found, nil
}

// CtxTimeouts reports whether the client's go-redis clients honour ctx
// deadlines (ContextTimeoutEnabled); every other client's do not, and only
// their read timeouts bound a call that does not honour its own ctx.
func (c *Client) CtxTimeouts() bool { return c.ctxTimeouts }

// poll checks ready every 2ms until it holds (nil) or ctx is done (its
// error): for flags that other goroutines set without a signal.
func poll(ctx context.Context, ready func() bool) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// queuedAfter is how long a blocking acquire runs before the client counts
// as waiting in line: its first attempt (one round trip) is over by then.
const queuedAfter = 20 * time.Millisecond

// Stopped reports whether the client's worker ended (crashed, or done).
func (c *Client) Stopped() bool { return c.stopped.Load() }

// WaitHolding waits until the client holds its lock with its resource write
// still ahead (between its lease check and its write), bounded by ctx: a pause or
// crash that strikes then leaves a holder whose late write must be refused.
func (c *Client) WaitHolding(ctx context.Context) error {
	for {
		if c.Holding() {
			return nil
		}
		select {
		case <-c.held:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to hold %q: %w", c.Name, c.Key, ctx.Err())
		}
	}
}

func (c *Client) close() error {
	var errs []error
	if c.locker != nil {
		errs = append(errs, c.locker.Close())
	}
	if c.lockRDB != nil {
		errs = append(errs, c.lockRDB.Close())
	}
	if c.resRDB != nil {
		errs = append(errs, c.resRDB.Close())
	}
	for _, r := range c.redlock {
		errs = append(errs, r.Close())
	}
	if c.Links != nil {
		errs = append(errs, c.Links.Close())
	}
	return errors.Join(errs...)
}

// recording is c's recording wrapper over rec.
func (c *Client) recording(rec *history.Recorder) recording {
	return recording{rec: rec, gate: c.Gate, invoked: &c.invoked}
}

// owner is the client's own owner for locker.Owned: one per client, the
// same for each of its holds.
func (c *Client) owner() string { return c.Name + "-owner" }

// nextHold numbers the client's next hold.
func (c *Client) nextHold() uint64 {
	c.holds++
	return c.holds
}
