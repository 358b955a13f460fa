package fencedv1

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/rediscmd"
	"github.com/lockproof/lockproof/internal/seeded"
)

// Client acquires leases on one Redis deployment (single node, Sentinel or
// Cluster, through any redis.UniversalClient). It is safe for concurrent use.
// Close it to stop its shared pub/sub subscription.
type Client struct {
	opts  Options
	rnd   *seeded.Source // Options.Rand (a harness hook, not of the frozen algorithm)
	notes *notifier
	// cmds sends the scripts: each at most once, honouring ctx.
	cmds *rediscmd.Sender
}

// New returns a Client over rdb. The Client does not own rdb: closing the
// Client does not close rdb.
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("fencedv1.New: rdb is nil: %w", ErrInvalid)
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, fmt.Errorf("fencedv1.New: %w", err)
	}
	c := &Client{opts: o, rnd: seeded.New(o.Rand), notes: newNotifier(rdb, o.Logger), cmds: rediscmd.NewSender(rdb)}
	return c, nil
}

func isNil(v any) bool { return rediscmd.IsNil(v) }

// Close stops the Client's pub/sub subscription. Leases it handed out stay
// valid (release them first); waits in progress fall back to timers.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	return c.notes.close()
}

// Acquire blocks until it holds the lock on key or ctx is done; then it
// returns the ctx error (wrapped; errors.Is(err, context.DeadlineExceeded)).
//
// Waiters queue in FIFO order in Redis. A release hands the lock to the
// first waiter and tells it through pub/sub (or directly, in this process);
// a waiter also wakes when the holder's TTL runs out, and every QueueTTL/3 to
// keep its place. It never polls at a fixed short period.
// A lost reply returns an error wrapping ErrUnknownOutcome after a best-effort
// owner-checked cleanup.
func (c *Client) Acquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.acquire(ctx, key, true, opts)
}

// TryAcquire makes one attempt. When the lock is held, or other callers are
// queued for it, it returns an error wrapping ErrNotAcquired.
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.acquire(ctx, key, false, opts)
}

// attemptResult is the reply of acquireScript.
type attemptResult struct {
	ok    bool
	fence uint64
	holds int64
	pttl  time.Duration // when !ok: the holder's remaining TTL; <= 0: no holder or no TTL
}

func (c *Client) acquire(ctx context.Context, key string, wait bool, opts []AcquireOption) (*Lease, error) {
	op := "try-acquire"
	if wait {
		op = "acquire"
	}
	if c == nil {
		return nil, fmt.Errorf("%s %q: client is nil: %w", op, key, ErrInvalid)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%s %q: ctx is nil: %w", op, key, ErrInvalid)
	}
	if key == "" {
		return nil, fmt.Errorf("%s: key is empty: %w", op, ErrInvalid)
	}
	cfg, err := c.callConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", op, key, err)
	}
	owner := cfg.owner
	if !cfg.ownerSet {
		owner = newToken(c.rnd)
	}
	a := &attempt{c: c, key: key, keys: RedisKeys(key), owner: owner, cfg: cfg, op: op}

	mode := "t"
	if wait {
		mode = "w"
	}
	var snap noteSnapshot
	if wait {
		snap = c.notes.snapshot(a.keys.Channel)
	}
	start := time.Now()
	res, err := a.try(ctx, mode)
	if err != nil || res.ok {
		return a.finish(ctx, start, res, err, wait)
	}
	if !wait {
		return nil, fmt.Errorf("%s %q: %w", op, key, ErrNotAcquired)
	}

	// Wait: subscribe (shared per Client), then retry on each wake-up.
	w := c.notes.join(a.keys.Channel, owner)
	defer c.notes.leave(w)
	retryNow := !snap.current(c.notes, w)
	if retryNow {
		// The subscription may be newer than our attempt: a release between
		// the two would be missed. Wait for the subscription (bounded), then
		// try again at once.
		if err := w.awaitSubscribed(ctx, c.queueTTL(cfg.ttl)); err != nil {
			a.leaveQueue()
			return nil, fmt.Errorf("%s %q: %w", op, key, err)
		}
	}
	backoff := time.Millisecond
	refresh := c.queueTTL(cfg.ttl) / 3
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !retryNow {
			d := refresh
			switch {
			case res.pttl > 0:
				d = min(d, res.pttl)
				backoff = time.Millisecond
			default:
				// Free but someone else is first in line (or a key without TTL):
				// jittered exponential backoff, capped by the refresh period.
				d = min(d, backoff/2+c.rnd.N(backoff/2))
				backoff = min(2*backoff, refresh)
			}
			timer.Reset(d)
			select {
			case <-ctx.Done():
				a.leaveQueue()
				return nil, fmt.Errorf("%s %q: %w", op, key, context.Cause(ctx))
			case fence := <-w.grant:
				if c.opts.ReplicaAcks > 0 {
					// Pick the hand-off up with an attempt, so that WAIT
					// covers it (the attempt finds the lock ours).
					break
				}
				// The releaser handed us the lock. It did so after our last
				// attempt ran (which found the lock taken), so that attempt's
				// start is a safe start of the lease.
				return a.finish(ctx, start, attemptResult{ok: true, fence: fence, holds: 1}, nil, true)
			case <-w.wake:
			case <-timer.C:
			}
		}
		retryNow = false
		start = time.Now()
		res, err = a.try(ctx, mode)
		if err != nil || res.ok {
			return a.finish(ctx, start, res, err, true)
		}
	}
}

// attempt is one Acquire call in progress.
type attempt struct {
	c     *Client
	key   string
	keys  Keys
	owner string
	cfg   callConfig
	op    string
	acks  int64 // replica acks, when Options.ReplicaAcks > 0
}

func (a *attempt) scriptArgs(mode string) ([]string, []any) {
	reentrant := "0"
	if a.cfg.ownerSet {
		reentrant = "1"
	}
	return []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines},
		[]any{a.owner, a.cfg.ttl.Milliseconds(), mode, a.c.queueTTL(a.cfg.ttl).Milliseconds(), reentrant}
}

// try runs the acquire script once (with WAIT when replica acks are asked for).
func (a *attempt) try(ctx context.Context, mode string) (attemptResult, error) {
	if err := ctx.Err(); err != nil {
		return attemptResult{}, errNotSent{context.Cause(ctx)}
	}
	keys, args := a.scriptArgs(mode)
	var reply any
	var err error
	if a.c.opts.ReplicaAcks > 0 {
		reply, a.acks, err = a.c.runWithWait(ctx, acquireScript, keys, args, a.c.opts.ReplicaAcks, a.c.replicaTimeout(a.cfg.ttl))
	} else {
		reply, err = a.c.run(ctx, acquireScript, keys, args...)
	}
	if err != nil {
		return attemptResult{}, err
	}
	vals, ok := reply.([]any)
	if !ok || len(vals) < 2 {
		return attemptResult{}, fmt.Errorf("unexpected acquire reply %v", reply)
	}
	flag, _ := vals[0].(int64)
	n, _ := vals[1].(int64)
	if flag == 1 {
		var holds int64 = 1
		if len(vals) > 2 {
			holds, _ = vals[2].(int64)
		}
		return attemptResult{ok: true, fence: uint64(n), holds: holds}, nil
	}
	return attemptResult{pttl: time.Duration(n) * time.Millisecond}, nil
}

// finish turns an attempt's outcome into a lease or an error.
func (a *attempt) finish(ctx context.Context, start time.Time, res attemptResult, err error, queued bool) (*Lease, error) {
	if err != nil {
		var ns errNotSent
		if errors.As(err, &ns) || !outcomeUnknown(err) {
			if queued {
				a.leaveQueue()
			}
			return nil, fmt.Errorf("%s %q: %w", a.op, a.key, err)
		}
		a.cleanup(queued)
		if cerr := context.Cause(ctx); cerr != nil && !errors.Is(err, cerr) {
			// The caller's deadline passed mid-command (go-redis reports it as an i/o timeout).
			return nil, fmt.Errorf("%s %q: %w: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, cerr)
		}
		return nil, fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrUnknownOutcome, err)
	}
	if a.c.opts.ReplicaAcks > 0 && a.acks < int64(a.c.opts.ReplicaAcks) {
		a.releaseBestEffort()
		return nil, fmt.Errorf("%s %q: %d of %d replicas acknowledged within %v: %w",
			a.op, a.key, a.acks, a.c.opts.ReplicaAcks, a.c.replicaTimeout(a.cfg.ttl), ErrReplicaAcks)
	}
	return newLease(a.c, a.key, a.keys, a.owner, res.fence, res.holds, a.cfg, start), nil
}

// cleanup runs after an acquire whose reply was lost: it releases the lock if
// this attempt got it (fresh owner tokens only) and leaves the queue.
func (a *attempt) cleanup(queued bool) {
	if !a.cfg.ownerSet {
		a.releaseBestEffort()
	}
	if queued {
		a.leaveQueue()
	}
}

func (a *attempt) freshCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), min(a.cfg.ttl, time.Second))
}

func (a *attempt) releaseBestEffort() {
	ctx, cancel := a.freshCtx()
	defer cancel()
	_, err := a.c.run(ctx, releaseScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines}, a.owner, a.keys.Channel)
	if err != nil {
		a.c.opts.Logger.Warn("fencedv1: cleanup release failed; the lock expires with its TTL",
			"key", a.key, "ttl", a.cfg.ttl, "err", err)
	}
}

func (a *attempt) leaveQueue() {
	ctx, cancel := a.freshCtx()
	defer cancel()
	fresh := "1"
	if a.cfg.ownerSet {
		fresh = "0"
	}
	_, err := a.c.run(ctx, leaveScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines},
		a.owner, a.keys.Channel, a.cfg.ttl.Milliseconds(), fresh)
	if err != nil {
		a.c.opts.Logger.Warn("fencedv1: leaving the wait queue failed; the place expires with the queue TTL",
			"key", a.key, "queue_ttl", a.c.queueTTL(a.cfg.ttl), "err", err)
	}
}

// run runs a script once (EVALSHA, then EVAL when the script is not
// cached), neither resent by go-redis: a resent release or reentrant
// acquire could take effect twice.
func (c *Client) run(ctx context.Context, s *rediscmd.Script, keys []string, args ...any) (any, error) {
	return c.cmds.Run(ctx, s, keys, args...)
}

// runWithWait runs a script and WAIT in one pipeline, on one connection, so
// that WAIT counts the replicas that acknowledged the script's writes.
func (c *Client) runWithWait(ctx context.Context, s *rediscmd.Script, keys []string, args []any, n int, timeout time.Duration) (any, int64, error) {
	reply, acks, waitErr, err := c.cmds.RunWithWait(ctx, s, n, timeout, keys, args...)
	if waitErr != nil {
		// The script ran; the count of acks is unknown: treat as none.
		c.opts.Logger.Warn("fencedv1: WAIT failed", "err", waitErr)
	}
	return reply, acks, err
}

// errNotSent marks an error from before the command was sent (ctx already done).
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return e.err.Error() }
func (e errNotSent) Unwrap() error { return e.err }

// outcomeUnknown reports whether err leaves open whether the command took
// effect: anything but a Redis error reply or a failure before sending
// (rediscmd.SurelyNoEffect).
func outcomeUnknown(err error) bool { return err != nil && !rediscmd.SurelyNoEffect(err) }
