package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	// boxed are options the scripts take on every call, boxed once.
	boxed struct{ ttl, queue, handoff any }

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
// then panics ("WaitGroup is reused before previous Wait has returned",
// as a shutdown loop calling Close with a short ctx while cleanups start
// would meet).
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
	c.boxed.ttl, c.boxed.queue, c.boxed.handoff = o.TTL.Milliseconds(), o.QueueTTL.Milliseconds(), o.HandoffTTL.Milliseconds()
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
// goes on in the background and the locks expire in Redis with their TTL.
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

// tickStarts counts a watchdog tick as background work (bg), unless Close
// was called: then the tick must not run.
func (c *Client) tickStarts() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return false
	}
	c.bg.Add(1)
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
	queue int64         // when !ok and the call joined the line: the line's length
	// handed: ok, and the attempt picked up a hand-off, handedAgo after
	// the lock was handed to it (the server's clock).
	handed    bool
	handedAgo time.Duration
	// upgrade: refused, since the owner holds the read-write lock for
	// reading only and asked to write (the script left the call's place).
	upgrade bool
}

// upgradeErr is the error of a call refused as an upgrade.
func (a *attempt) upgradeErr() error {
	return fmt.Errorf("%s %q: the owner holds the lock for reading; a read hold cannot become a write hold (two readers upgrading would wait for each other): %w: %w",
		a.op, a.key, ErrNotAcquired, ErrUpgrade)
}

func (c *Client) acquire(ctx context.Context, key string, wait bool, opts []AcquireOption) (*Lease, error) {
	return c.acquireKind(ctx, key, Keys{}, &mutexProto, "", 0, 0, wait, opts)
}

// acquireKind is an acquire of any kind, the mutex's (proto mutexProto;
// keys are then RedisKeys(key)) or a shared kind's in mode, k permits of
// a capacity n (shared.go), reported to Hooks.OnAcquire.
func (c *Client) acquireKind(ctx context.Context, key string, keys Keys, proto *protocol, mode string, k, n int, wait bool, opts []AcquireOption) (*Lease, error) {
	op := "try-acquire"
	if wait {
		op = "acquire"
	}
	if proto.shared {
		op += "-" + (&Lease{mode: mode}).Mode()
	}
	if c == nil || ctx == nil {
		return c.acquireAny(ctx, op, key, keys, proto, mode, k, n, wait, opts)
	}
	called := time.Now()
	ctx, end := c.opts.Hooks.begin(ctx, Call{Op: op, Key: key})
	l, err := c.acquireAny(ctx, op, key, keys, proto, mode, k, n, wait, opts)
	c.acquired(key, called, end, l, err)
	return l, err
}

// acquired reports an acquire called at called, which returned l and
// err, to Hooks.OnAcquire and its end func, then announces the lease (a
// loss found meanwhile is reported now, after the call's end).
func (c *Client) acquired(key string, called time.Time, end func(Result), l *Lease, err error) {
	if c.opts.Hooks.OnAcquire != nil {
		c.opts.Hooks.OnAcquire(key, time.Since(called), err)
	}
	r := Result{Err: err, Lease: l}
	if l != nil {
		r.Fence = l.fence
	}
	end(r)
	l.announce()
}

// acquireAny is acquireKind without the hooks.
func (c *Client) acquireAny(ctx context.Context, op, key string, keys Keys, proto *protocol, mode string, k, n int, wait bool, opts []AcquireOption) (*Lease, error) {
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
		// A closed Client runs no watchdog: a grant now would be a lease
		// nobody renews, lost one TTL later.
		return nil, fmt.Errorf("%s %q: %w: %w", op, key, ErrNotAcquired, ErrClosed)
	}
	given := cfg.owner
	if !cfg.ownerSet {
		given = newToken(c.rnd)
	}
	// id names the hold this call adds, for undoScript: an owner's, and a
	// fresh token's too, so that a lost release of its lease can be
	// undone in the background as surely as an owner's.
	if !proto.shared {
		keys = RedisKeys(key)
	}
	a := newAttempt(c, key, keys, c.token(given), given, cfg, op)
	a.proto, a.mode, a.permits, a.capacity = proto, mode, k, n
	a.obs = c.opts.Hooks.carried(ctx)
	if cfg.ownerSet {
		a.setID(newToken(c.rnd))
	} else {
		// A fresh token is the call's own: it names its hold too.
		a.setID(given)
	}

	try := "t"
	if wait {
		try = "w"
	}
	if wait && cfg.retry != nil {
		return a.retry(ctx)
	}
	var snap noteSnapshot
	if wait {
		snap = c.notes.snapshot(a.keys.Channel)
	}
	start := time.Now()
	res, err := a.try(ctx, try)
	if err != nil || res.ok {
		return a.finish(ctx, start, res, err, wait)
	}
	if res.upgrade {
		return nil, a.upgradeErr()
	}
	if !wait {
		return nil, &TakenError{Op: op, Key: key, RetryAfter: max(res.pttl, 0)}
	}
	if cfg.queued != nil {
		cfg.queued() // the attempt above put us in line
	}
	c.opts.Hooks.event(ctx, Event{Kind: EventJoin, Op: op, Key: key, Queue: res.queue})

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
	// would drop out of line.
	refreshAt := start.Add(refresh)
	// freeAt is when the lock may be free next, as far as our last
	// attempt saw (zero: free, or no TTL). The notifier watches over
	// hand-offs to other waiters and wakes us if one is not picked up
	// (see notifier.dispatch): we do not look after each.
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
		res, err = a.try(ctx, try)
		if err != nil || res.ok {
			return a.finish(ctx, start, res, err, true)
		}
		if res.upgrade {
			return nil, a.upgradeErr()
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
// ends. An attempt whose reply was lost may have taken the lock: before
// the next, it is cleaned up (its id buried and its hold ended, one
// script), and the next attempt gets an id of its own. When that cleanup
// does not surely happen, the call ends there with ErrUnknownOutcome and
// the cleanup goes on in the background. A call that ends without a
// lease after a lost attempt says ErrUnknownOutcome: the lock may have
// been held for it for a moment.
func (a *attempt) retry(ctx context.Context) (*Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lost error // the last attempt whose reply was lost, cleaned up since
	for {
		start := time.Now()
		res, err := a.try(ctx, "t")
		if res.ok {
			return a.finish(ctx, start, res, err, false)
		}
		if res.upgrade {
			return nil, a.orLost(a.upgradeErr(), lost)
		}
		var ns errNotSent
		if err != nil && (errors.As(err, &ns) || (outcomeUnknown(err) && a.cfg.ownerSet)) {
			return a.finish(ctx, start, res, a.orLost(err, lost), false)
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
				return a.finish(ctx, start, res, a.orLost(err, lost), false)
			}
			if lost != nil {
				return nil, fmt.Errorf("the retry strategy gave up: %w (after an attempt whose reply was lost: %w: %w)", why, ErrUnknownOutcome, lost)
			}
			return nil, fmt.Errorf("the retry strategy gave up: %w", why)
		}
		if err != nil && outcomeUnknown(err) {
			// The lost attempt may have taken the lock, or may still be
			// on its way: bury it and end its hold (one script) before
			// the next attempt, which gets an id of its own.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
			cerr := a.end(lctx, true, false)
			cancel()
			if cerr != nil {
				return a.finish(ctx, start, res, err, false)
			}
			lost = err
			a.setID(newToken(a.c.rnd))
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			if err != nil && outcomeUnknown(err) {
				lost = err
			}
			if lost != nil {
				return nil, fmt.Errorf("%s %q: %w: %w (an attempt's reply was lost: %w)", a.op, a.key, ErrUnknownOutcome, context.Cause(ctx), lost)
			}
			return nil, fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// orLost is err, or, when an earlier attempt's reply was lost (lost, its
// hold taken back since), err marked ErrUnknownOutcome: the lock may have
// been held for the call for a moment.
func (a *attempt) orLost(err, lost error) error {
	if lost == nil || outcomeUnknown(err) {
		return err
	}
	return fmt.Errorf("%w (an earlier attempt's reply was lost: %w: %w)", err, ErrUnknownOutcome, lost)
}

// newAttempt is a call of op on key for owner (as Redis stores it; given
// as the caller gave it); its id is set by setID.
func newAttempt(c *Client, key string, keys Keys, owner, given string, cfg callConfig, op string) *attempt {
	return &attempt{c: c, key: key, keys: keys, owner: owner, given: given, cfg: cfg, op: op,
		sk: keys.boxed(), ownerArg: owner, proto: &mutexProto}
}

// protocol is the scripts of one kind of lock: the mutex's (scripts.go) or
// the shared kinds' (the read-write lock and the semaphore,
// shared_scripts.go). The scripts of every kind take the same keys and
// arguments, so one attempt and one Lease run any kind; a shared kind's
// acquire takes three more (mode, permits, capacity).
type protocol struct {
	acquire, end, renew, ttl, reenter *rediscmd.Script
	// shared: the shared kinds' (a place in line says its mode and
	// permits; an acquire may be refused as an upgrade).
	shared bool
}

// The two protocols. They are values of a fixed table of scripts (read
// only), shared by every Client.
var (
	mutexProto  = protocol{acquire: acquireScript, end: endScript, renew: renewScript, ttl: ttlScript, reenter: reenterScript}
	sharedProto = protocol{acquire: sharedAcquireScript, end: sharedEndScript, renew: sharedRenewScript,
		ttl: sharedTTLScript, reenter: sharedReenterScript, shared: true}
)

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
	// id names the hold the call makes (h.<id>) and its place in line,
	// the same for every attempt of a wait (a retry keeps the place);
	// WithRetry's attempt after a lost one gets a new id (setID).
	id string
	// sk, ownerArg and idArg are keys, owner and id boxed as script
	// arguments, once for the call and its lease.
	sk              *scriptKeys
	ownerArg, idArg any
	// proto is the kind's scripts; mode ("r", "w", "p"; "" for the
	// mutex), permits and capacity are a shared kind's (shared.go).
	proto    *protocol
	mode     string
	permits  int
	capacity int
	// obs is the context Hooks.Begin gave the call, without its
	// cancellation: the context of Hooks.Event for what comes after it
	// (a cleanup, its lease's loss). nil: Background.
	obs context.Context
}

// obsCtx is a.obs, or Background.
func (a *attempt) obsCtx() context.Context {
	if a.obs == nil {
		return context.Background()
	}
	return a.obs
}

// keyList is the lock's Redis keys in the order the scripts expect them.
func (k Keys) keyList() []string {
	return []string{k.Lock, k.Fence, k.Queue, k.QueueDeadlines, k.Gone}
}

// scriptArgs is the argument slice of a script on the five keys (sk) and
// args: rediscmd.Head free elements first (Client.runArgs).
func (sk *scriptKeys) scriptArgs(args ...any) []any {
	a := make([]any, rediscmd.Head, rediscmd.Head+len(sk.keys)+len(args))
	a = append(a, sk.keys[:]...)
	return append(a, args...)
}

// endArgs are endScript's arguments for hold id (boxed) of owner (boxed):
// fence ("" any), bury (for a call of ttl), place ("" none).
func (c *Client) endArgs(sk *scriptKeys, owner, id, fence any, bury bool, ttl time.Duration, place string) []any {
	var b any = ""
	if bury {
		b = c.buryLife(ttl)
	}
	return sk.scriptArgs(owner, id, fence, b, place, sk.channel, c.boxed.handoff)
}

// member is the call's place in line, as the queue stores it.
func (a *attempt) member() string {
	if a.proto.shared {
		return a.mode + strconv.Itoa(a.permits) + "#" + a.id + ":" + a.owner
	}
	return strconv.FormatInt(a.cfg.ttl.Milliseconds(), 10) + "#" + a.id + ":" + a.owner
}

func (a *attempt) scriptArgs(mode string) []any {
	var reentrant any = "0"
	if a.cfg.ownerSet {
		reentrant = "1"
	}
	var m any = "t"
	if mode == "w" {
		m = "w"
	}
	if a.proto.shared {
		return a.sk.scriptArgs(a.ownerArg, a.ttlArg(), m, a.c.boxed.queue, reentrant,
			a.sk.channel, a.cfg.metadata, a.idArg, a.c.boxed.handoff, a.mode, a.permits, a.capacity)
	}
	return a.sk.scriptArgs(a.ownerArg, a.ttlArg(), m, a.c.boxed.queue, reentrant,
		a.sk.channel, a.cfg.metadata, a.idArg, a.c.boxed.handoff)
}

// ttlArg is the call's TTL in ms, boxed (the Client's when it is its default).
func (a *attempt) ttlArg() any {
	if a.cfg.ttl == a.c.opts.TTL {
		return a.c.boxed.ttl
	}
	return a.cfg.ttl.Milliseconds()
}

// setID names the call's hold id.
func (a *attempt) setID(id string) {
	a.id, a.idArg = id, id
}

// try runs the acquire script once (with WAIT when replica acks are asked for).
func (a *attempt) try(ctx context.Context, mode string) (attemptResult, error) {
	if err := ctx.Err(); err != nil {
		return attemptResult{}, errNotSent{context.Cause(ctx)}
	}
	args := a.scriptArgs(mode)
	var reply any
	var err error
	if a.c.opts.ReplicaAcks > 0 {
		reply, a.acks, err = a.c.runWithWait(ctx, a.proto.acquire, a.keys.keyList(), args[rediscmd.Head+5:], a.c.opts.ReplicaAcks, a.c.replicaTimeout(a.cfg.ttl))
	} else {
		reply, err = a.c.runArgs(ctx, a.proto.acquire, 5, args)
	}
	if err != nil {
		return attemptResult{}, err
	}
	vals, ok := reply.([]any)
	if ok && len(vals) == 1 && vals[0] == int64(-2) && a.proto.shared {
		return attemptResult{upgrade: true}, nil
	}
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
		r := attemptResult{ok: true, fence: uint64(n), holds: holds}
		if len(vals) > 3 {
			ago, _ := vals[3].(int64)
			r.handed, r.handedAgo = true, max(time.Duration(ago)*time.Microsecond, 0)
		}
		return r, nil
	}
	r := attemptResult{pttl: time.Duration(n) * time.Millisecond}
	if len(vals) > 2 {
		r.queue, _ = vals[2].(int64)
	}
	return r, nil
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
		// The give-back ends this call's hold and no other: landing late,
		// on a later hold of the owner, it finds no record of its id.
		if gerr := a.giveBack(ctx); gerr != nil {
			a.cleanup(false)
		}
		return nil, fmt.Errorf("%s %q: %d of %d replicas acknowledged within %v: %w",
			a.op, a.key, a.acks, a.c.opts.ReplicaAcks, a.c.replicaTimeout(a.cfg.ttl), ErrReplicaAcks)
	}
	if a.c.isClosed() {
		// Close ran while this acquire was in flight: a closed Client
		// grants nothing (its watchdogs are stopped, and its caller is
		// shutting down), so the hold goes back at once.
		return nil, a.closedMeanwhile(ctx)
	}
	l := newLease(a, res.fence, res.holds, start)
	if a.cfg.watchdog && !l.watched() {
		// Close ran between the check above and the watchdog's start:
		// no call returns the lease, and its loss is nobody's news.
		l.discard()
		return nil, a.closedMeanwhile(ctx)
	}
	if res.handed {
		a.c.opts.Hooks.event(ctx, Event{Kind: EventHandoff, Op: a.op, Key: a.key, Fence: l.fence, Lease: l, Took: res.handedAgo})
	}
	return l, nil
}

// giveBack ends the call's hold within leaveBudget.
func (a *attempt) giveBack(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveBudget)
	defer cancel()
	return a.end(rctx, false, false)
}

// closedMeanwhile gives back the hold of an acquire that Close overtook.
func (a *attempt) closedMeanwhile(ctx context.Context) error {
	if err := a.giveBack(ctx); err != nil {
		a.cleanup(false)
		return fmt.Errorf("%s %q: %w: closed meanwhile, and giving the lock back failed: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, ErrClosed)
	}
	return fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, ErrClosed)
}

// cleanup runs after an acquire whose reply was lost (or, with queued, one
// that failed surely): one script buries the call's id (a request of it
// still on its way then takes nothing), ends the hold it may have made,
// and leaves its place in line (queued). It runs in the background so
// that the call returns within its own deadline, and it tries again
// (Redis may be frozen or cut off right now) until it is done, or for
// cleanupPatience (or the call's TTL, if longer).
func (a *attempt) cleanup(queued bool) {
	a.background(func(ctx context.Context) error { return a.end(ctx, true, queued) })
}

// background runs step until it succeeds, in the background (Close waits
// for it): each try bounded by cleanupLimit, spaced from 5ms to a second,
// for cleanupPatience or the call's TTL, whichever is longer. The call's
// own request may still be on its way (held in transit past its sender's
// deadline): until the bury has run it takes what it finds when it lands,
// so the first tries come fast.
func (a *attempt) background(step func(context.Context) error) {
	a.c.bg.Add(1)
	go func() {
		defer a.c.bg.Done()
		deadline := time.Now().Add(max(a.cfg.ttl, cleanupPatience))
		pause := 5 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), leaveBudget+pause)
			err := step(ctx)
			cancel()
			// A closed Redis client will not come back: nothing to wait for.
			if err == nil || errors.Is(err, redis.ErrClosed) {
				a.c.opts.Hooks.event(a.obsCtx(), Event{Kind: EventCleanup, Op: a.op, Key: a.key, Err: err})
				return
			}
			if time.Now().Add(pause).After(deadline) {
				a.c.opts.Logger.Warn("lock: cleanup after an ambiguous call gave up; the lock and the queue place expire on their own",
					"key", a.key, "op", a.op, "ttl", a.cfg.ttl, "queue_ttl", a.c.opts.QueueTTL, "err", err)
				a.c.opts.Hooks.event(a.obsCtx(), Event{Kind: EventCleanup, Op: a.op, Key: a.key, Err: err})
				return
			}
			time.Sleep(pause)
			pause = min(2*pause, time.Second)
		}
	}()
}

// buryLife is how long a call of ttl stays buried (ms): an hour, or two
// TTLs if longer, since its cleanup keeps trying for the TTL.
func (c *Client) buryLife(ttl time.Duration) int64 {
	return max(time.Hour, 2*ttl).Milliseconds()
}

// Bounds of the cleanup an acquire does when it gives up.
const (
	// leaveBudget bounds the leave a waiter sends, past its own deadline,
	// when its ctx ends: long enough for a healthy round trip, short enough
	// that the call returns within its deadline plus a small constant.
	leaveBudget = 100 * time.Millisecond
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
	err := a.end(lctx, true, true)
	cancel()
	if err == nil {
		return fmt.Errorf("%s %q: %w: %w", a.op, a.key, ErrNotAcquired, cause)
	}
	// Not done: it goes on in the background until it is (a refusal,
	// such as BUSY or READONLY, as surely as a lost reply: until the leave
	// lands, the place stays in line and a hand-off may be given to it).
	a.cleanup(true)
	if outcomeUnknown(err) {
		return fmt.Errorf("%s %q: %w: leaving the queue: %w (%w)", a.op, a.key, ErrUnknownOutcome, err, cause)
	}
	return fmt.Errorf("%s %q: %w: leaving the queue: %w (%w)", a.op, a.key, ErrNotAcquired, err, cause)
}

// end ends the call's hold, if it stands (endScript): burying the call's
// id first (bury), and leaving its place in line (queued). It is the
// release, the undo, the give-back and the leave: a no-op when it lands
// twice or late.
func (a *attempt) end(ctx context.Context, bury, queued bool) error {
	place := ""
	if queued {
		place = a.member()
	}
	_, err := a.c.runArgs(ctx, a.proto.end, 5, a.c.endArgs(a.sk, a.ownerArg, a.idArg, "", bury, a.cfg.ttl, place))
	if err != nil {
		a.c.opts.Logger.Warn("lock: ending a hold failed", "key", a.key, "op", a.op, "err", err)
	}
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
	a := make([]any, rediscmd.Head, rediscmd.Head+len(keys)+len(args))
	for _, k := range keys {
		a = append(a, k)
	}
	return c.runArgs(ctx, s, len(keys), append(a, args...))
}

// runArgs is run on a: rediscmd.Head free elements, numKeys keys, then the
// script's arguments.
func (c *Client) runArgs(ctx context.Context, s *rediscmd.Script, numKeys int, a []any) (any, error) {
	for wait, tries := time.Millisecond, 1; ; wait, tries = min(2*wait, 50*time.Millisecond), tries+1 {
		reply, err := c.cmds.RunArgs(ctx, s, numKeys, a)
		if err == nil || !redis.HasErrorPrefix(err, "TRYAGAIN") || tries == 100 {
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
