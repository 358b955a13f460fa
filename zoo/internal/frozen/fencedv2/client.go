package fencedv2

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	// watched are the leases whose watchdog runs, so that Close can stop
	// them; closed refuses new watchdogs after Close.
	wmu     sync.Mutex
	watched map[*Lease]struct{}
	closed  bool
}

// New returns a Client over rdb. The Client does not own rdb: closing the
// Client does not close rdb.
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("lock.New: rdb is nil: %w", ErrInvalid)
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, fmt.Errorf("lock.New: %w", err)
	}
	c := &Client{opts: o, rnd: seeded.New(o.Rand), notes: newNotifier(rdb, o.Logger), cmds: rediscmd.NewSender(rdb)}
	return c, nil
}

// isNil reports whether v is nil or a typed nil (rediscmd.IsNil).
func isNil(v any) bool { return rediscmd.IsNil(v) }

// Close stops the Client's pub/sub subscription and the watchdogs of the
// leases it handed out. It does not release them: they stay valid until
// their TTL runs out (release them first to free the locks at once), which
// is what a process that goes away leaves behind. Waits in progress fall
// back to timers; leases acquired after Close get no watchdog.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	c.wmu.Lock()
	c.closed = true
	leases := make([]*Lease, 0, len(c.watched))
	for l := range c.watched {
		leases = append(leases, l)
	}
	clear(c.watched)
	c.wmu.Unlock()
	for _, l := range leases {
		l.StopWatchdog()
	}
	return c.notes.close()
}

// watch adds l to the leases whose watchdog Close stops; false after Close.
func (c *Client) watch(l *Lease) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return false
	}
	if c.watched == nil {
		c.watched = make(map[*Lease]struct{})
	}
	c.watched[l] = struct{}{}
	return true
}

// unwatch removes l (its watchdog stopped).
func (c *Client) unwatch(l *Lease) {
	c.wmu.Lock()
	delete(c.watched, l)
	c.wmu.Unlock()
}

// Acquire blocks until it holds the lock on key or ctx is done; then it
// returns the ctx error (wrapped; errors.Is(err, context.DeadlineExceeded)).
//
// Waiters queue in FIFO order in Redis. A release hands the lock to the
// first waiter and tells it through pub/sub (or directly, in this process);
// a waiter also wakes when the holder's TTL runs out, and every QueueTTL/3 to
// keep its place. It polls at a short period (HandoffTTL/2) only while its
// pub/sub subscription is not confirmed.
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
	called := time.Now()
	l, err := c.acquireOnce(ctx, key, wait, opts)
	if c != nil && c.opts.Hooks.OnAcquire != nil {
		c.opts.Hooks.OnAcquire(key, time.Since(called), err)
	}
	return l, err
}

func (c *Client) acquireOnce(ctx context.Context, key string, wait bool, opts []AcquireOption) (*Lease, error) {
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
	if wait && cfg.retry != nil {
		return a.retry(ctx)
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
	if cfg.queued != nil {
		cfg.queued() // the attempt above put us in line
	}

	// Wait: subscribe (shared per Client), then retry on each wake-up.
	w := c.notes.join(a.keys.Channel, owner)
	defer c.notes.leave(w)
	retryNow := !snap.current(c.notes, w)
	if retryNow {
		// The subscription may be newer than our attempt: a release between
		// the two would be missed. Wait for the subscription, then try again
		// at once. The wait is short: we are already in line, and a release
		// may hand us the lock with a lease of HandoffTTL meanwhile.
		if err := w.awaitSubscribed(ctx, c.opts.HandoffTTL/2); err != nil {
			return nil, a.gaveUp(ctx, err)
		}
	}
	backoff := time.Millisecond
	refresh := c.opts.QueueTTL / 3
	other := false
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !retryNow {
			d := refresh
			if other {
				// The lock was handed to another waiter: if that one died in
				// line it never picks it up, and the hand-off lease runs out;
				// look again then rather than at the next refresh.
				d, other = c.opts.HandoffTTL+5*time.Millisecond, false
			}
			if !w.subscribed() {
				// No confirmed subscription (a SUBSCRIBE lost in a network
				// partition is never confirmed, and nothing re-sends it): no
				// message will say that the lock was handed to us. Look
				// within half a hand-off lease, so that a hand-off is picked
				// up before it runs out and the wait bound holds without
				// pub/sub.
				d = min(d, c.opts.HandoffTTL/2)
			}
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
				return nil, a.gaveUp(ctx, context.Cause(ctx))
			case <-w.grant:
				// The lock was handed to us with a provisional lease: pick it
				// up with an attempt, which finds it ours and gives it the
				// full TTL. The lease's validity counts from that attempt's
				// start, not from an earlier one, and WAIT covers it.
			case <-w.wake:
			case <-w.other:
				other = true
				continue
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

// retry is Acquire with a RetryStrategy: one-shot attempts (the attempt
// never joins the queue) spaced as the strategy says, until one gets the
// lock, fails surely, or the strategy stops (ErrNotAcquired) or ctx ends.
func (a *attempt) retry(ctx context.Context) (*Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		start := time.Now()
		res, err := a.try(ctx, "t")
		if err != nil || res.ok {
			return a.finish(ctx, start, res, err, false)
		}
		d := a.cfg.retry.NextBackoff()
		if d <= 0 {
			return nil, fmt.Errorf("%s %q: the retry strategy gave up: %w", a.op, a.key, ErrNotAcquired)
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, context.Cause(ctx))
		case <-timer.C:
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
		[]any{a.owner, a.cfg.ttl.Milliseconds(), mode, a.c.opts.QueueTTL.Milliseconds(), reentrant,
			a.keys.Channel, a.c.opts.HandoffTTL.Milliseconds()}
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
		if errors.As(err, &ns) && queued {
			return nil, a.gaveUp(ctx, err) // ctx ended between two attempts
		}
		if errors.As(err, &ns) || !outcomeUnknown(err) {
			if queued {
				a.cleanup(true) // leaves the queue; the failed attempt took nothing
			}
			return nil, fmt.Errorf("%s %q: %w", a.op, a.key, err)
		}
		a.cleanup(queued)
		if cerr := ctxCause(ctx); cerr != nil && !errors.Is(err, cerr) {
			// The caller's deadline passed mid-command (go-redis reports it as an i/o timeout).
			return nil, fmt.Errorf("%s %q: %w: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, cerr)
		}
		return nil, fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrUnknownOutcome, err)
	}
	if a.c.opts.ReplicaAcks > 0 && a.acks < int64(a.c.opts.ReplicaAcks) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
		_ = a.releaseBestEffort(rctx) // logged; the lock expires with its TTL otherwise
		cancel()
		return nil, fmt.Errorf("%s %q: %d of %d replicas acknowledged within %v: %w",
			a.op, a.key, a.acks, a.c.opts.ReplicaAcks, a.c.replicaTimeout(a.cfg.ttl), ErrReplicaAcks)
	}
	return newLease(a.c, a.key, a.keys, a.owner, res.fence, res.holds, a.cfg, start), nil
}

// cleanup runs after an acquire whose reply was lost (or, with queued, one
// that failed surely): it releases the lock if this attempt got it (fresh
// owner tokens only) and leaves the queue. It runs in the background so
// that the call returns within its own deadline, and it tries again (Redis
// may be frozen or cut off right now) until it is done or the attempt's
// lease would have expired anyway: it leaves no held key behind.
func (a *attempt) cleanup(queued bool) {
	go func() {
		deadline := time.Now().Add(a.cfg.ttl)
		pause := 50 * time.Millisecond
		release, leave := !a.cfg.ownerSet, queued
		for release || leave {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupLimit)
			var errs []error
			if release {
				err := a.releaseBestEffort(ctx)
				release = err != nil
				errs = append(errs, err)
			}
			if leave {
				err := a.leave(ctx)
				leave = err != nil
				errs = append(errs, err)
			}
			cancel()
			// A closed Redis client will not come back: nothing to wait for.
			if (!release && !leave) || errors.Is(errors.Join(errs...), redis.ErrClosed) || time.Now().Add(pause).After(deadline) {
				break
			}
			time.Sleep(pause)
			pause = min(2*pause, time.Second)
		}
		if release || leave {
			a.c.opts.Logger.Warn("lock: cleanup after an ambiguous acquire gave up; the lock and the queue place expire on their own",
				"key", a.key, "ttl", a.cfg.ttl, "queue_ttl", a.c.opts.QueueTTL)
		}
	}()
}

// Bounds of the cleanup an acquire does when it gives up.
const (
	// leaveBudget bounds the leave a waiter sends, past its own deadline,
	// when its ctx ends: long enough for a healthy round trip, short enough
	// that the call returns within its deadline plus a small constant.
	leaveBudget = 100 * time.Millisecond
	// cleanupLimit bounds background cleanup.
	cleanupLimit = time.Second
)

// gaveUp leaves the queue when a waiter's ctx ended (cause): within
// leaveBudget it returns ErrNotAcquired (the caller surely does not hold
// the lock: if it had been handed over, the leave passed it on); when the
// leave did not surely happen in time, it goes on in the background and the
// error wraps ErrUnknownOutcome (a hand-off to the caller may stand for one
// hand-off lease).
func (a *attempt) gaveUp(ctx context.Context, cause error) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
	err := a.leave(lctx)
	cancel()
	if err == nil {
		return fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, cause)
	}
	if outcomeUnknown(err) {
		a.cleanup(true) // goes on in the background until it is done
		return fmt.Errorf("%s %q: %w: leaving the queue: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, cause)
	}
	return fmt.Errorf("%s %q: %w: leaving the queue: %w (%w)", a.op, a.key, ErrNotAcquired, err, cause)
}

// releaseBestEffort releases the lock if the attempt's token holds it.
func (a *attempt) releaseBestEffort(ctx context.Context) error {
	_, err := a.c.run(ctx, releaseScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines},
		a.owner, a.keys.Channel, a.c.opts.HandoffTTL.Milliseconds())
	if err != nil {
		a.c.opts.Logger.Warn("lock: cleanup release failed", "key", a.key, "ttl", a.cfg.ttl, "err", err)
	}
	return err
}

// leave takes the attempt's place out of the queue (and passes the lock on
// if it was handed to the attempt's fresh token).
func (a *attempt) leave(ctx context.Context) error {
	fresh := "1"
	if a.cfg.ownerSet {
		fresh = "0"
	}
	_, err := a.c.run(ctx, leaveScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines},
		a.owner, a.keys.Channel, a.cfg.ttl.Milliseconds(), fresh, a.c.opts.HandoffTTL.Milliseconds())
	return err
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
		c.opts.Logger.Warn("lock: WAIT failed", "err", waitErr)
	}
	return reply, acks, err
}

// ctxCause is ctx's cause, or context.DeadlineExceeded when its deadline
// has passed but its timer has not fired yet: a socket deadline set from
// ctx (ContextTimeoutEnabled) can expire a hair before ctx reports it.
func ctxCause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// errNotSent marks an error from before the command was sent (ctx already done).
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return e.err.Error() }
func (e errNotSent) Unwrap() error { return e.err }

// outcomeUnknown reports whether err leaves open whether the command took
// effect: anything but a Redis error reply or a failure before sending
// (rediscmd.SurelyNoEffect).
func outcomeUnknown(err error) bool { return err != nil && !rediscmd.SurelyNoEffect(err) }
