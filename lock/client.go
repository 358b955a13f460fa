package lock

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
	rnd   *seeded.Source // Options.Rand; nil: crypto/rand and math/rand/v2
	notes *notifier
	// cmds sends the scripts: each at most once, honouring ctx.
	cmds *rediscmd.Sender

	// id scopes the Client's owner tokens in Redis (Options.SharedOwners).
	id string

	// watched are the leases whose watchdog runs, so that Close can stop
	// them; closed refuses new watchdogs after Close.
	wmu     sync.Mutex
	watched map[*Lease]struct{}
	closed  bool
	// bg counts background work Close waits for: cleanups after acquires
	// that gave up or lost their reply, and the pub/sub connection's close.
	bg background
}

// background counts the Client's background work for Close. Not a
// sync.WaitGroup: work may start after a Close stopped waiting (its ctx
// ended) while that Close's Wait was still pending, and a WaitGroup's Add
// then panics ("WaitGroup is reused before previous Wait has returned":
// review defect 2 of round three, a shutdown loop calling Close with a
// short ctx while cleanups started).
type background struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0; nil: idle, none made yet
}

// Add counts one more piece of work.
func (b *background) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		b.idle = make(chan struct{})
	}
	b.n += n
}

// Done counts one piece of work done.
func (b *background) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.n == 0 {
		close(b.idle)
	}
}

// Idle returns a channel closed when no work is counted.
func (b *background) Idle() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle == nil {
		b.idle = make(chan struct{})
		close(b.idle)
	}
	return b.idle
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
	rnd := seeded.New(o.Rand)
	c := &Client{opts: o, rnd: rnd, cmds: rediscmd.NewSender(rdb), id: newToken(rnd)[:16]}
	c.notes = newNotifier(rdb, o.Logger, &c.bg, o.HandoffTTL)
	return c, nil
}

// ID returns the Client's random ID. Unless Options.SharedOwners, Redis
// stores every owner token of the Client as "<ID>/<token>" (Inspect's
// Info.Owner shows it), so that the same WithOwner token given to two
// Clients names two owners.
func (c *Client) ID() string {
	if c == nil {
		return ""
	}
	return c.id
}

// token is owner as Redis stores it (see ID).
func (c *Client) token(owner string) string {
	if c.opts.SharedOwners {
		return owner
	}
	return c.id + "/" + owner
}

// isNil reports whether v is nil or a typed nil (rediscmd.IsNil).
func isNil(v any) bool { return rediscmd.IsNil(v) }

// Close stops the Client's pub/sub subscription and the watchdogs of the
// leases it handed out. It does not release them: they stay valid until
// their TTL runs out (release them first to free the locks at once), which
// is what a process that goes away leaves behind. Waits in progress fall
// back to timers. Acquire and TryAcquire after Close return an error
// wrapping ErrClosed and ErrNotAcquired; a wait in progress that gets the
// lock after Close gives it back (its watchdog could not run) with the
// same error.
//
// Close then waits, until ctx ends, for the Client's background work: the
// cleanups of acquires and releases that gave up or lost their reply,
// and the close of the pub/sub connection. A cleanup takes a round trip
// or three while Redis answers; while it does not, it keeps trying for a
// minute (or the TTL of its call, if longer), since a request of the call
// held in transit could still land and must find the call buried. When
// ctx ends first Close returns ctx's cause, and the work goes on without
// it. Calling Close again waits again, as often as needed. A service's
// shutdown bounds the wait with its own ctx: a second or two sees the
// cleanups of a reachable Redis done; what a shorter one leaves behind
// goes on in the background and the locks expire in Redis with their TTL
// (review, old defect 7).
func (c *Client) Close(ctx context.Context) error {
	if c == nil {
		return nil
	}
	if ctx == nil {
		return fmt.Errorf("close: ctx is nil: %w", ErrInvalid)
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
	err := c.notes.close()
	select {
	case <-c.bg.Idle():
		return err
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("close: background cleanups still running: %w", context.Cause(ctx)))
	}
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

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.closed
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
	if c.isClosed() {
		// Review defect 10: it used to acquire without the watchdog asked
		// for, and the lease was lost one TTL later.
		return nil, fmt.Errorf("%s %q: %w: %w", op, key, ErrNotAcquired, ErrClosed)
	}
	given := cfg.owner
	if !cfg.ownerSet {
		given = newToken(c.rnd)
	}
	// id names the hold this call adds, for undoScript: an owner's, and a
	// fresh token's too, so that a lost release of its lease can be
	// undone in the background as surely as an owner's.
	a := &attempt{c: c, key: key, keys: RedisKeys(key), owner: c.token(given), given: given, cfg: cfg, op: op, id: newToken(c.rnd)}
	a.call = a.id

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
		return nil, &TakenError{Op: op, Key: key, RetryAfter: max(res.pttl, 0)}
	}
	if cfg.queued != nil {
		cfg.queued() // the attempt above put us in line
	}

	// Wait: subscribe (shared per Client), then retry on each wake-up.
	w := c.notes.join(a.keys.Channel, a.owner)
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
	// The attempt that refreshes our place in line is due refresh after
	// the last one, whatever wakes us meanwhile: a deadline reset at each
	// hand-off to another waiter would never come under churn, and we
	// would drop out of line (review defect 1).
	refreshAt := start.Add(refresh)
	// freeAt is when the lock may be free next, as far as our last
	// attempt saw (zero: free, or no TTL). The notifier watches over
	// hand-offs to other waiters and wakes us if one is not picked up
	// (see notifier.dispatch): we do not look after each (review defect 8).
	var freeAt time.Time
	if res.pttl > 0 {
		freeAt = start.Add(res.pttl)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !retryNow {
			d := time.Until(refreshAt)
			if !w.subscribed() {
				// No confirmed subscription (a SUBSCRIBE lost in a network
				// partition is never confirmed, and nothing re-sends it): no
				// message will say that the lock was handed to us. Look
				// within half a hand-off lease, so that a hand-off is picked
				// up before it runs out and the wait bound holds without
				// pub/sub.
				d = min(d, c.opts.HandoffTTL/2)
			}
			if !freeAt.IsZero() {
				d = min(d, time.Until(freeAt))
				backoff = time.Millisecond
			} else {
				// Free but someone else is first in line (or a key without TTL):
				// jittered exponential backoff, capped by the refresh period.
				d = min(d, backoff/2+c.rnd.N(backoff/2))
				backoff = min(2*backoff, refresh)
			}
			timer.Reset(max(d, 0))
			select {
			case <-ctx.Done():
				return nil, a.gaveUp(ctx, context.Cause(ctx))
			case <-w.grant:
				// The lock was handed to us with a provisional lease: pick it
				// up with an attempt, which finds it ours and gives it the
				// full TTL. The lease's validity counts from that attempt's
				// start, not from an earlier one, and WAIT covers it.
			case <-w.wake:
			case <-timer.C:
			}
		}
		retryNow = false
		start = time.Now()
		refreshAt = start.Add(refresh)
		res, err = a.try(ctx, mode)
		if err != nil || res.ok {
			return a.finish(ctx, start, res, err, true)
		}
		freeAt = time.Time{}
		if res.pttl > 0 {
			freeAt = start.Add(res.pttl)
		}
	}
}

// retry is Acquire with a RetryStrategy: one-shot attempts (the attempt
// never joins the queue) spaced as the strategy says, until one gets the
// lock, the strategy gives up (on a taken lock: a *TakenError, wrapping
// ErrNotAcquired; on an error: that error, see ErrorAwareStrategy) or ctx
// ends. Every attempt uses the call's owner token, so an attempt after
// one whose reply was lost picks up what that one may have taken; only a
// WithOwner call, whose attempts add holds, stops at an unknown outcome.
func (a *attempt) retry(ctx context.Context) (*Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		start := time.Now()
		res, err := a.try(ctx, "t")
		if res.ok {
			return a.finish(ctx, start, res, err, false)
		}
		var ns errNotSent
		if err != nil && (errors.As(err, &ns) || (outcomeUnknown(err) && a.cfg.ownerSet)) {
			return a.finish(ctx, start, res, err, false)
		}
		why := err
		switch {
		case err == nil:
			why = &TakenError{Op: a.op, Key: a.key, RetryAfter: max(res.pttl, 0)}
		case outcomeUnknown(err):
			// The strategy sees it as an unknown outcome (RetryIf's
			// predicate can ask errors.Is(err, ErrUnknownOutcome)).
			why = fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
		d := nextAfter(a.cfg.retry, why)
		if d <= 0 {
			if err != nil {
				return a.finish(ctx, start, res, err, false)
			}
			return nil, fmt.Errorf("the retry strategy gave up: %w", why)
		}
		if err != nil && outcomeUnknown(err) {
			// The lost attempt may still be on its way: bury it before
			// the next, which gets an id of its own, so that it takes
			// nothing when it lands later (review defect 3 of round
			// three: it landed after the lease's release and took the
			// free lock for a token nobody held). What it took before
			// the bury, the next attempt, by the same token, picks up.
			// When the bury's outcome is unknown too, the call ends here
			// and the cleanup goes on in the background.
			if berr := a.bury(ctx); berr != nil {
				return a.finish(ctx, start, res, err, false)
			}
			a.id = newToken(a.c.rnd)
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			if err != nil && outcomeUnknown(err) {
				// The last attempt may have taken the lock.
				return a.finish(ctx, start, res, err, false)
			}
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
	owner string // as Redis stores it (Client.token)
	given string // as the caller gave it, or the fresh token
	cfg   callConfig
	op    string
	acks  int64 // replica acks, when Options.ReplicaAcks > 0
	// id names this call's attempts to the lock (r, gone), so that a lost
	// reply's hold, or its lease's lost release, can be taken back.
	id string
	// call names the call's place in line, the same for all its attempts
	// (a retry keeps the place), and the hand-off given at it (p), which
	// only this call picks up or passes on.
	call string
}

func (a *attempt) scriptArgs(mode string) ([]string, []any) {
	reentrant := "0"
	if a.cfg.ownerSet {
		reentrant = "1"
	}
	return []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines, a.keys.Gone},
		[]any{a.owner, a.cfg.ttl.Milliseconds(), mode, a.c.opts.QueueTTL.Milliseconds(), reentrant,
			a.keys.Channel, a.id, a.cfg.metadata, a.call, a.c.opts.HandoffTTL.Milliseconds()}
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
	l := newLease(a.c, a.key, a.keys, a.owner, a.given, res.fence, res.holds, a.cfg, start)
	l.id = a.id
	if a.cfg.watchdog && !l.watched() {
		// Close ran while this acquire was in flight: the watchdog asked
		// for will not run, so give the lock back rather than hand out a
		// lease that would be lost one TTL from now.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
		err := l.Release(rctx)
		cancel()
		if err != nil && !errors.Is(err, ErrNotHeld) {
			return nil, fmt.Errorf("%s %q: %w: closed meanwhile, and giving the lock back failed: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, ErrClosed)
		}
		return nil, fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, ErrClosed)
	}
	return l, nil
}

// cleanup runs after an acquire whose reply was lost (or, with queued, one
// that failed surely): it buries the attempt, releases the lock if this
// attempt got it (a WithOwner call takes back only the hold it added:
// undo) and leaves the queue. It runs in the background so
// that the call returns within its own deadline, and it tries again (Redis
// may be frozen or cut off right now) until it is done, or for
// cleanupPatience (or the call's TTL, if longer).
func (a *attempt) cleanup(queued bool) { a.cleanupSteps(true, queued) }

// buryOnly is the cleanup of a call that can have added nothing to take
// back: a renewal whose reply was lost (an extension cannot be undone,
// but once its id is buried, the request takes nothing when it lands).
func (a *attempt) buryOnly() { a.cleanupSteps(false, false) }

// cleanupSteps is cleanup: bury, then release (if release) and leave (if
// queued).
func (a *attempt) cleanupSteps(release, queued bool) {
	a.c.bg.Add(1)
	go func() {
		defer a.c.bg.Done()
		// Not the attempt's TTL: the attempt's own request may still be
		// on its way (held in transit past its sender's deadline), and
		// until the bury has run it takes what it finds when it lands.
		// An owner's hold it adds joins the owner's own, which outlives
		// any TTL while the owner comes back (the simulation's
		// late-delivery, seed 873: the bury was itself held past the
		// TTL, the cleanup gave up, the attempt landed, and the owner's
		// next lease got the fence of the one it had released).
		deadline := time.Now().Add(max(a.cfg.ttl, cleanupPatience))
		pause, buryPause := 50*time.Millisecond, 5*time.Millisecond
		bury, leave := true, queued
		for bury || release || leave {
			// The bury is sent again soon, on another connection, when
			// its reply does not come within a healthy round trip: it may
			// be held in transit as the attempt's own request was, and
			// until one lands the attempt's request takes what it finds
			// (the simulation's late-delivery, seed 1047: the bury waited
			// out a second's limit, the attempt landed meanwhile and
			// joined its owner's next hold). Burying twice is harmless.
			limit := cleanupLimit
			if bury {
				limit = leaveBudget
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			var errs []error
			if bury {
				// First: a request of the attempt still on its way takes
				// nothing once this ran, so what follows sees all it did.
				err := a.bury(ctx)
				bury = err != nil
				errs = append(errs, err)
			}
			if release && !bury {
				var err error
				if a.cfg.ownerSet {
					// The owner's other holds are its own Leases': take
					// back only the hold this call added, if it did.
					err = a.undo(ctx)
				} else {
					err = a.releaseBestEffort(ctx)
				}
				release = err != nil
				errs = append(errs, err)
			}
			if leave && !bury {
				err := a.leave(ctx, true)
				leave = err != nil
				errs = append(errs, err)
			}
			cancel()
			// A closed Redis client will not come back: nothing to wait for.
			wait := pause
			if bury {
				wait, buryPause = buryPause, min(2*buryPause, 200*time.Millisecond)
			}
			if (!bury && !release && !leave) || errors.Is(errors.Join(errs...), redis.ErrClosed) || time.Now().Add(wait).After(deadline) {
				break
			}
			time.Sleep(wait)
			if !bury {
				pause = min(2*pause, time.Second)
			}
		}
		if bury || release || leave {
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
	// cleanupLimit bounds each round trip of a background cleanup.
	cleanupLimit = time.Second
	// cleanupPatience is how long a background cleanup keeps trying
	// (or the call's TTL, if longer): a request of the call held in
	// transit longer than that past its sender's deadline, which no TCP
	// connection here keeps, may take effect unburied.
	cleanupPatience = time.Minute
)

// gaveUp leaves the queue when a waiter's ctx ended (cause): within
// leaveBudget it returns ErrNotAcquired (the caller surely does not hold
// the lock: if it had been handed over, the leave passed it on); when the
// leave did not surely happen in time, it goes on in the background and the
// error wraps ErrUnknownOutcome (a hand-off to the caller may stand for one
// hand-off lease).
func (a *attempt) gaveUp(ctx context.Context, cause error) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
	err := a.leave(lctx, false)
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

// bury marks the attempt gone (buryScript), by its id.
func (a *attempt) bury(ctx context.Context) error {
	_, err := a.c.run(ctx, buryScript, []string{a.keys.Gone}, a.id)
	if err != nil {
		a.c.opts.Logger.Warn("lock: cleanup bury failed", "key", a.key, "ttl", a.cfg.ttl, "err", err)
	}
	return err
}

// releaseBestEffort releases the lock if the attempt's token holds it.
func (a *attempt) releaseBestEffort(ctx context.Context) error {
	_, err := a.c.run(ctx, releaseScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines, a.keys.Gone},
		a.owner, a.keys.Channel, "", "", a.c.opts.HandoffTTL.Milliseconds())
	if err != nil {
		a.c.opts.Logger.Warn("lock: cleanup release failed", "key", a.key, "ttl", a.cfg.ttl, "err", err)
	}
	return err
}

// undo takes back the hold this WithOwner call added, if its lost reply
// hid one and no later acquire of the owner added another since.
func (a *attempt) undo(ctx context.Context) error {
	_, err := a.c.run(ctx, undoScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines},
		a.owner, a.id, a.keys.Channel, a.c.opts.HandoffTTL.Milliseconds())
	if err != nil {
		a.c.opts.Logger.Warn("lock: cleanup undo failed", "key", a.key, "ttl", a.cfg.ttl, "err", err)
	}
	return err
}

// leave takes the attempt's place out of the queue (and passes the lock on
// if it was handed to the attempt's fresh token); cleanup: the attempt's
// cleanup sends it, after burying the attempt (a leave of the attempt's
// own that lands later passes nothing on: leaveScript).
func (a *attempt) leave(ctx context.Context, cleanup bool) error {
	fresh, by := "1", ""
	if a.cfg.ownerSet {
		fresh = "0"
	}
	if cleanup {
		by = "c"
	}
	_, err := a.c.run(ctx, leaveScript, []string{a.keys.Lock, a.keys.Fence, a.keys.Queue, a.keys.QueueDeadlines, a.keys.Gone},
		a.owner, a.keys.Channel, a.cfg.ttl.Milliseconds(), fresh, a.id, by, a.call, a.c.opts.HandoffTTL.Milliseconds())
	return err
}

// run runs a script once (EVALSHA, then EVAL when the script is not
// cached), neither resent by go-redis: a resent release or reentrant
// acquire could take effect twice.
//
// But for a refusal that says "not now": on a Redis Cluster whose slot is
// migrating, a script whose keys are split between the two masters is
// refused TRYAGAIN. It surely had no effect, and a moment later the
// migration has moved on, so it is sent again, backing off from 1ms to
// 50ms, for as long as ctx allows and at most 100 times (about 5s, for a
// ctx without end); its last refusal is returned then. A
// release returned the refusal before, and its hold stayed, renewed by
// the watchdog for good once its caller moved on (TestReleaseDuringSlotMigration).
func (c *Client) run(ctx context.Context, s *rediscmd.Script, keys []string, args ...any) (any, error) {
	for wait, tries := time.Millisecond, 1; ; wait, tries = min(2*wait, 50*time.Millisecond), tries+1 {
		reply, err := c.cmds.Run(ctx, s, keys, args...)
		if !redis.HasErrorPrefix(err, "TRYAGAIN") || tries == 100 {
			return reply, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			// The refusal surely had no effect; the caller's ctx ended
			// while it waited to resend: say both, so that a caller that
			// retries on ctx errors sees one (review, fenced x migrate:
			// a release returned the refusal alone, its caller moved on,
			// and the watchdog kept the hold for the rest of the run).
			return reply, fmt.Errorf("%w (%w while the slot migrated)", err, context.Cause(ctx))
		}
	}
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
