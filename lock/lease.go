package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Lease is one hold of a lock. Its methods are safe for concurrent use.
//
// A lease ends when it is released (Release) or lost: its validity deadline
// passed without a successful renewal, or a renewal found the lock taken.
// Loss closes Lost() and cancels Context() with cause ErrLost.
type Lease struct {
	c     *Client
	key   string
	keys  Keys
	owner string // as Redis stores it (Client.token)
	given string // as the caller gave it (WithOwner), or the fresh token
	// id names the lease's hold record in Redis (h.<id>): every request
	// about this hold (release, renew, TTLLeft, Reenter) names it, so it
	// acts on this hold and on no other of the same owner.
	id    string
	md    string // WithMetadata's
	fence uint64
	holds int64
	ttl   time.Duration
	drift float64
	// proto is the kind's scripts; mode and permits are a shared kind's
	// hold's (Mode, Permits).
	proto   *protocol
	mode    string
	permits int

	// sk, ownerArg, idArg: keys, owner and id boxed as script arguments
	// (the acquire's, reused by the release).
	sk              *scriptKeys
	ownerArg, idArg any
	born            time.Time // when the attempt that got it started

	mu         sync.Mutex
	validUntil time.Time // local monotonic clock
	done       bool      // released or lost
	released   bool      // ended by Release
	// cause is why the lease ended (nil while it stands). ctx and lost
	// are made when first asked for (Context, Lost): most leases are
	// released by code that asks for neither, and each is an allocation
	// on the uncontended path.
	cause  error
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}
	// fenceArg is the fence as a script argument, made at the first
	// request that checks it.
	fenceArg any
	// releasing counts the Release calls in flight: a loss found meanwhile
	// (a watchdog renewal that lost the race with the release's script,
	// the validity deadline) waits for them in pendingLoss, and is
	// dropped when the release ends the lease. Without it, a Release that
	// succeeds could close Lost on the lease it released.
	releasing   int
	pendingLoss string
	// relBusy: a Release call is in flight; a concurrent Release waits
	// for its result (relWait, made by the first such caller) instead of
	// sending its own.
	relBusy bool
	relWait *releaseCall
	// unsure: a release's reply was lost (a later Release says so when
	// it finds the hold gone).
	unsure bool
	// renewals numbers the lease's renewals: each has the id
	// "<id>.<n>", which a renewal whose reply was lost buries.
	renewals int
	expiry   *time.Timer
	wd       *time.Timer        // next watchdog renewal; nil without watchdog
	wdCtx    context.Context    // canceled when the lease ends
	stopWD   context.CancelFunc // cancels wdCtx
	// obs is the acquire's context from Hooks.Begin, without its
	// cancellation: the watchdog's renewals and the loss are reported
	// under it (a span of the acquire is their parent).
	obs context.Context
	// op is the call that made the lease (Call.Op's names).
	op string
	// announced: the acquire returned the lease (see announce); a loss
	// before is kept in lossUnannounced until then.
	announced       bool
	lossUnannounced error
	// reports is held while a loss is reported (lose, announce), and
	// taken before l.mu; a Release waits for it, so that the hooks hear of
	// a loss before the release that follows it.
	reports sync.Mutex
}

// newLease is the lease of the hold that call a got, with this fence and
// hold count, its validity counted from start.
func newLease(a *attempt, fence uint64, holds int64, start time.Time) *Lease {
	c, cfg := a.c, a.cfg
	l := &Lease{
		c: c, key: a.key, keys: a.keys, owner: a.owner, given: a.given, id: a.id, md: cfg.metadata, fence: fence, holds: holds,
		ttl: cfg.ttl, drift: c.opts.Drift, born: start, sk: a.sk, ownerArg: a.ownerArg, idArg: a.idArg,
		proto: a.proto, mode: a.mode, permits: a.permits, obs: a.obsCtx(), op: a.op,
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.validUntil = l.deadline(start, l.ttl)
	if cfg.watchdog || c.opts.Hooks.OnLost != nil || c.opts.Hooks.Event != nil {
		// Somebody hears of a loss without asking: arm the deadline now.
		l.expiry = time.AfterFunc(time.Until(l.validUntil), l.checkExpiry)
	}
	if cfg.watchdog && c.watch(l) {
		l.wdCtx, l.stopWD = context.WithCancel(l.obs)
		l.wd = time.AfterFunc(l.ttl/3, l.watchdogTick)
	}
	return l
}

// watched reports whether the lease's watchdog was started.
func (l *Lease) watched() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wd != nil
}

// StopWatchdog stops the lease's watchdog without releasing the lease: the
// lock stays held in Redis until its TTL runs out, and the lease is lost
// locally when its validity deadline passes. It models the renewing thread
// or process dying (Client.Close does it for every lease of the Client).
// It does nothing for a lease without watchdog or one that ended.
func (l *Lease) StopWatchdog() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopWatchdogLocked()
}

func (l *Lease) stopWatchdogLocked() {
	if l.wd == nil {
		return
	}
	l.wd.Stop()
	l.stopWD()
	l.wd = nil
	l.c.unwatch(l)
}

// deadline is the validity deadline of a lease of ttl taken (or renewed) by
// an attempt that started at start.
func (l *Lease) deadline(start time.Time, ttl time.Duration) time.Time {
	return start.Add(time.Duration(float64(ttl) * (1 - l.drift)))
}

// Key returns the lock key the lease holds.
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Owner returns the owner token (128 random bits, hex, unless given
// WithOwner), as it was given: Redis stores it behind the Client's ID
// unless Options.SharedOwners. WithOwner(l.Owner()) on the same Client
// re-enters the lock as that owner; Reenter does so only while this
// lease's own hold stands.
func (l *Lease) Owner() string {
	if l == nil {
		return ""
	}
	return l.given
}

// Metadata returns what the acquire stored WithMetadata ("" for none).
func (l *Lease) Metadata() string {
	if l == nil {
		return ""
	}
	return l.md
}

// Fence returns the fencing token. Fences of successive holders of a key
// strictly increase (across a failover too, while the servers' clocks agree
// within the failover time: see the package doc); a reentrant hold has its
// owner's fence. Resources must reject writes carrying a fence below the
// highest they have seen.
func (l *Lease) Fence() uint64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Holds returns the owner's hold count right after this acquire (1 unless reentrant).
func (l *Lease) Holds() int64 {
	if l == nil {
		return 0
	}
	return l.holds
}

// TTL returns the lease length asked for (by the acquire, or by the last
// RenewFor).
func (l *Lease) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// ValidUntil returns the time until which the lease is surely valid: the start
// of the last successful acquire or renew + TTL×(1−drift); once the lease
// has ended (released, lost, or a release whose outcome is unknown), the
// moment it ended at the latest. It carries a monotonic clock reading;
// compare it with time.Now() or time.Until.
func (l *Lease) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Lost returns a channel closed when the lease is lost (not when released).
func (l *Lease) Lost() <-chan struct{} {
	if l == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	l.armExpiry()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.done && errors.Is(l.cause, ErrLost) {
			close(l.lost)
		}
	}
	return l.lost
}

// Context returns a context to run the guarded work under. It is canceled
// when the lease is lost (context.Cause wraps ErrLost) or released (cause
// ErrReleased). It carries no deadline: the lease's validity moves with
// every renewal, and a context's deadline must not move (a child made
// with context.WithTimeout under a deadline that later moved on would
// outlive its own timeout). To bound one downstream call by the lease's
// validity as it stands, use WithValidity.
func (l *Lease) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("nil lease: %w", ErrInvalid))
		return ctx
	}
	l.armExpiry()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.contextLocked()
}

// contextLocked is the lease's context, made now if it was not (canceled
// at once with the cause of a lease that ended). Called with l.mu held.
func (l *Lease) contextLocked() context.Context {
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.done {
			l.cancel(l.cause)
		}
	}
	return l.ctx
}

// ended reports whether the lease ended, and why.
func (l *Lease) ended() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done, l.cause
}

// fenceArgLocked is the fence as a script argument. Called with l.mu held.
func (l *Lease) fenceArgLocked() any {
	if l.fenceArg == nil {
		l.fenceArg = strconv.FormatUint(l.fence, 10)
	}
	return l.fenceArg
}

// armExpiry starts the timer that loses the lease at its validity
// deadline, if it is not running; a deadline already passed loses the
// lease now. A lease without watchdog, OnLost or Event hook starts it only when
// somebody can hear of a loss (Lost, Context, WithValidity): a timer per
// acquire costs an uncontended acquire+release about 5% of its client
// CPU (the runtime wakes its netpoller for a timer earlier than the
// others), and nobody would hear it fire.
func (l *Lease) armExpiry() {
	l.mu.Lock()
	if l.done || l.expiry != nil {
		l.mu.Unlock()
		return
	}
	d := time.Until(l.validUntil)
	if d > 0 {
		l.expiry = time.AfterFunc(d, l.checkExpiry)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose("validity deadline passed without a renewal")
}

// releaseCall is one Release in flight; done is closed when err is set.
type releaseCall struct {
	done chan struct{}
	err  error
}

// Release frees this hold. The lock is freed when its last hold is
// released; then it is handed to the next waiter. A lease lost here (its
// validity ran out) whose hold Redis still keeps (the drift allowance)
// is released as any other: nil, and the key is free at once. Errors:
//   - ErrNotHeld: the hold was gone (the lock expired or was taken), or
//     this lease was already released. The release had no effect; the
//     lease has ended.
//   - ErrUnknownOutcome: the reply was lost; the release may or may not have
//     happened. The lease ends here (the work under it must stop: the lock
//     may be another client's already). The lock makes sure of it in the
//     background: it sends the release again until Redis answers. Release
//     can be called again, and does the same: a release names this hold's
//     record, so landing twice, late, or after the background one, it ends
//     nothing else (ErrNotHeld when the hold was gone already).
//   - the ctx error, when ctx was done before anything was sent: nothing
//     happened, the lease is unchanged; call again with a live ctx.
//   - any other error: the release surely did not happen (a refusal such
//     as TRYAGAIN while a Cluster slot migrates, wrapping ctx's cause
//     when ctx ended while it was resent; a refused dial). The lease
//     stands, but its watchdog stops: the lock expires with its TTL
//     unless Release is called again.
//
// Release is single-flight: a call made while another is in flight sends
// nothing; it waits for that one (or for its own ctx) and returns its
// error, or ErrNotHeld when that one released the hold (exactly one call
// ends a hold: the history of the calls says so).
//
// A release that definitely happened (nil), definitely could not
// (ErrNotHeld), or may have happened (ErrUnknownOutcome) ends the lease:
// it stops the watchdog and cancels Context (an unknown outcome with a
// cause wrapping ErrUnknownOutcome), and the lease no longer claims to be
// valid: the lock may already be another client's. Lost is not closed by a
// release, nor by a loss found while the release was in flight.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("release: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("release %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	ctx, end := l.c.opts.Hooks.begin(ctx, Call{Op: "release", Key: l.key, Fence: l.fence, Lease: l})
	r := Result{Lease: l, Fence: l.fence}
	r.Err = l.release(ctx, &r)
	end(r)
	return r.Err
}

// release is Release without the hooks' Begin; it sets r.Held to how long
// the lease was held when this call ended it, and r.Joined when it sent
// nothing and took a concurrent call's outcome.
func (l *Lease) release(ctx context.Context, r *Result) error {
	// A loss whose hooks are running finishes first: they come before
	// this release's. One found from here on waits for this release
	// (releasing), or reports after it that it ended nothing.
	l.reports.Lock()
	l.mu.Lock()
	l.reports.Unlock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("release %q: already released: %w", l.key, ErrNotHeld)
	}
	if l.relBusy {
		if l.relWait == nil {
			l.relWait = &releaseCall{done: make(chan struct{})}
		}
		rc := l.relWait
		l.mu.Unlock()
		r.Joined = true
		select {
		case <-rc.done:
			if rc.err == nil {
				// One release ends a hold: this call ended nothing.
				return fmt.Errorf("release %q: released by a concurrent Release: %w", l.key, ErrNotHeld)
			}
			return rc.err
		case <-ctx.Done():
			return fmt.Errorf("release %q: waiting for the release in flight: %w", l.key, context.Cause(ctx))
		}
	}
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("release %q: nothing sent: %w", l.key, context.Cause(ctx))
	}
	l.relBusy = true
	again := l.unsure
	fence := l.fenceArgLocked()
	l.releasing++
	l.mu.Unlock()
	err := l.releaseOnce(ctx, fence, again, &r.Held)
	l.mu.Lock()
	l.relBusy = false
	rc := l.relWait
	l.relWait = nil
	l.mu.Unlock()
	if rc != nil {
		rc.err = err
		close(rc.done)
	}
	return err
}

// releaseOnce sends the release (endScript, naming this hold) once; again:
// an earlier one's outcome was unknown.
func (l *Lease) releaseOnce(ctx context.Context, fence any, again bool, held *time.Duration) error {
	send := func(ctx context.Context) (any, error) {
		return l.c.runArgs(ctx, l.proto.end, 5, l.c.endArgs(l.sk, l.ownerArg, l.idArg, fence, false, 0, ""))
	}
	reply, err := send(ctx)
	if err != nil {
		var ns errNotSent
		if outcomeUnknown(err) && !errors.As(err, &ns) {
			err = unknown(ctx, "release", l.key, err)
			l.mu.Lock()
			l.unsure = true
			l.mu.Unlock()
			l.endRelease(err)
			// A hold whose release did not run would stay for its TTL,
			// and for good while its watchdog or an owner's later
			// acquires kept the lock alive: send it again in the
			// background until Redis answers. It ends this hold's
			// record only, so landing after the first does nothing.
			l.cleanupOf("release", l.TTL()).background(func(ctx context.Context) error {
				_, err := send(ctx)
				return err
			})
			return err
		}
		// Surely not released (a refusal such as TRYAGAIN through a slot
		// migration that outlasted ctx, a refused dial): the watchdog
		// stops, so that a caller that gives up does not leave a hold the
		// lock itself keeps alive; it expires with its TTL, unless Release
		// is called again.
		l.StopWatchdog()
		l.endRelease(nil)
		return fmt.Errorf("release %q: %w", l.key, err)
	}
	vals, _ := reply.([]any)
	if len(vals) == 0 {
		l.endRelease(nil)
		return fmt.Errorf("release %q: unexpected reply %v", l.key, reply)
	}
	l.mu.Lock()
	l.releasing--
	l.released = true
	l.finishLocked(ErrReleased)
	l.mu.Unlock()
	if n, _ := vals[0].(int64); n < 0 {
		err := fmt.Errorf("release %q: expired or taken by another owner: %w", l.key, ErrNotHeld)
		if again {
			err = fmt.Errorf("release %q: the hold was gone (released by the request whose reply was lost, or expired): %w", l.key, ErrNotHeld)
		}
		*held = l.reportRelease(err)
		return err
	}
	*held = l.reportRelease(nil)
	if len(vals) > 1 {
		// Tell the next waiter at once if it waits in this process; the
		// publish reaches waiters elsewhere (and this one again, harmlessly).
		if msg, _ := vals[1].(string); msg != "" {
			l.c.notes.deliverLocal(l.keys.Channel, msg)
		}
	}
	return nil
}

// cleanupOf is the attempt whose background work makes sure of a call op
// of the lease (a release, a renewal) whose reply was lost, bounded by
// ttl (the lease's, read under l.mu by the caller).
func (l *Lease) cleanupOf(op string, ttl time.Duration) *attempt {
	a := newAttempt(l.c, l.key, l.keys, l.owner, l.given, callConfig{ttl: ttl, owner: l.given, ownerSet: true}, op)
	a.proto, a.mode, a.permits = l.proto, l.mode, l.permits
	a.obs = l.obs
	a.setID(l.id)
	return a
}

// endRelease ends a Release call that did not surely release: with an
// unknown outcome (cause) the lease ends, since the release may have
// happened; with none (nothing happened) a loss found meanwhile is
// reported now.
func (l *Lease) endRelease(cause error) {
	l.mu.Lock()
	l.releasing--
	pending := l.pendingLoss
	if l.releasing == 0 {
		l.pendingLoss = ""
	}
	if cause != nil {
		l.finishLocked(cause)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	if pending != "" {
		l.lose(pending)
	}
}

// Renew extends the lease by its TTL from now. Errors: ErrNotHeld when the
// lock expired or was taken (the lease is then lost) or the lease already
// ended; ErrUnknownOutcome when the reply was lost (the lease is unchanged),
// or when Redis renewed the lock but the lease ended here meanwhile (lost
// by its validity deadline, or released): the key is then held a TTL more
// by this owner, and Release frees it.
func (l *Lease) Renew(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("renew: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("renew %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	return l.renew(ctx, 0)
}

// renew extends the lease by ttl from now (0: by its TTL); a different ttl
// becomes the lease's TTL (RenewFor).
func (l *Lease) renew(ctx context.Context, ttl time.Duration) (err error) {
	ctx, end := l.c.opts.Hooks.begin(ctx, Call{Op: "renew", Key: l.key, Fence: l.fence, Lease: l})
	defer func() { end(Result{Err: err, Lease: l, Fence: l.fence}) }()
	l.mu.Lock()
	done, cause := l.done, l.cause
	if ttl == 0 {
		ttl = l.ttl
	}
	l.mu.Unlock()
	if done {
		return fmt.Errorf("renew %q: lease ended (%v): %w", l.key, cause, ErrNotHeld)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew %q: %w", l.key, context.Cause(ctx))
	}
	start := time.Now()
	l.mu.Lock()
	l.renewals++
	id := l.id + "." + strconv.Itoa(l.renewals)
	l.mu.Unlock()
	reply, err := l.c.run(ctx, l.proto.renew, []string{l.keys.Lock, l.keys.Gone}, l.owner, ttl.Milliseconds(), strconv.FormatUint(l.fence, 10), id, l.id)
	if err != nil {
		if outcomeUnknown(err) {
			// The request may still be on its way: once it is buried it
			// extends nothing when it lands (a watchdog's renewals held
			// in transit past the lease's loss kept its key for seconds,
			// and a Release of the lost lease then freed a key the
			// history knew expired: the simulation's late-delivery).
			c := l.cleanupOf("renew", ttl)
			c.background(func(ctx context.Context) error {
				_, err := l.c.run(ctx, buryScript, l.keys.keyList(), id, l.c.buryLife(ttl))
				return err
			})
			return unknown(ctx, "renew", l.key, err)
		}
		return fmt.Errorf("renew %q: %w", l.key, err)
	}
	if n, _ := reply.(int64); n != 1 {
		l.lose("renewal found the lock expired or taken")
		return fmt.Errorf("renew %q: expired or taken by another owner: %w", l.key, ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		// The renewal ran before the release that ended the hold (after
		// it, it finds no record): the release freed the key.
		return fmt.Errorf("renew %q: the lease was released meanwhile: %w", l.key, ErrNotHeld)
	}
	if l.done {
		// Redis did renew the key, but the lease ended here meanwhile (its
		// validity deadline passed, or a release of unknown outcome): not
		// ErrNotHeld, which says the renewal had no effect, and a history
		// that believes it sees the owner's later release as one after the
		// lease expired.
		return fmt.Errorf("renew %q: Redis renewed the lock, but the lease had ended meanwhile (%v): %w",
			l.key, l.cause, ErrUnknownOutcome)
	}
	l.ttl = ttl
	if v := l.deadline(start, ttl); v.After(l.validUntil) {
		l.validUntil = v
		if l.expiry != nil {
			l.expiry.Reset(time.Until(v))
		}
	}
	return nil
}

// checkExpiry runs when the validity deadline may have passed.
func (l *Lease) checkExpiry() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	if d := time.Until(l.validUntil); d > 0 {
		l.expiry.Reset(d)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose("validity deadline passed without a renewal")
}

// lose ends the lease as lost (no-op when it already ended).
func (l *Lease) lose(why string) {
	l.reports.Lock()
	defer l.reports.Unlock()
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	if l.releasing > 0 {
		// A release is in flight: it decides (see Lease.releasing).
		l.pendingLoss = why
		l.mu.Unlock()
		return
	}
	cause := fmt.Errorf("lease %q fence %d: %s: %w", l.key, l.fence, why, ErrLost)
	l.finishLocked(cause)
	if l.lost != nil {
		close(l.lost)
	}
	// The hooks hear of the loss once the acquire that made the lease
	// has returned it (a lease may be lost before: born past its
	// validity, the server frozen), and outside l.mu: a hook may read
	// the lease (ValidUntil, Context) it is handed. l.reports, held
	// until they return, keeps a Release from ending first.
	announced := l.announced
	if !announced {
		l.lossUnannounced = cause
	}
	l.mu.Unlock()
	l.c.opts.Logger.Warn("lock: lease lost", "key", l.key, "fence", l.fence, "reason", why)
	if announced {
		l.reportLoss(cause)
	}
}

// reportLoss calls the hooks that hear of a loss.
func (l *Lease) reportLoss(cause error) {
	if h := l.c.opts.Hooks.OnLost; h != nil {
		h(l.key, l.fence, cause)
	}
	l.c.opts.Hooks.event(l.obs, Event{Kind: EventLost, Op: l.op, Key: l.key, Fence: l.fence, Lease: l, Err: cause})
}

// announce marks the lease returned to its caller (the acquire's end func
// has run): a loss found before is reported now, and later ones at once.
func (l *Lease) announce() {
	if l == nil {
		return
	}
	l.reports.Lock()
	l.mu.Lock()
	l.announced = true
	cause := l.lossUnannounced
	l.lossUnannounced = nil
	l.mu.Unlock()
	if cause == nil {
		l.reports.Unlock()
		return
	}
	// On a goroutine of the lock's, as every loss is reported (not the
	// caller's, which may hold what the hook takes); a Release waits for
	// it (l.reports).
	go func() {
		defer l.reports.Unlock()
		l.reportLoss(cause)
	}()
}

// discard ends a lease no call returns (Close ran while its acquire was
// in flight, and the hold goes back): nothing is reported of it.
func (l *Lease) discard() {
	l.mu.Lock()
	l.announced, l.lossUnannounced = false, nil
	l.finishLocked(ErrClosed)
	l.mu.Unlock()
	l.StopWatchdog()
}

// finishLocked ends the lease with cause (first cause wins). An ended
// lease vouches for nothing: ValidUntil is now at the latest, after an
// unknown release too (which may have taken effect).
func (l *Lease) finishLocked(cause error) {
	if l.done {
		return
	}
	l.done = true
	if now := time.Now(); l.validUntil.After(now) {
		l.validUntil = now
	}
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.stopWatchdogLocked()
	l.cause = cause
	if l.cancel != nil {
		l.cancel(cause)
	}
}

// watchdogTick renews the lease; it runs every TTL/3 (a timer, so a lease
// costs no goroutine between renewals) until the lease ends. A renewal that
// finds the lock taken loses the lease at once; failed renewals are retried
// sooner, and when none succeeds before the validity deadline the expiry
// timer loses the lease.
func (l *Lease) watchdogTick() {
	// A tick counts as the Client's background work, so that Close,
	// which waits for that, returns only after a renewal in flight: none
	// is made after Close returned (a tick that started before Close set
	// closed went on renewing once, seen under the race detector).
	if !l.c.tickStarts() {
		return
	}
	defer l.c.bg.Done()
	l.mu.Lock()
	ctx, done, valid, ttl := l.wdCtx, l.done || l.wd == nil, l.validUntil, l.ttl
	l.mu.Unlock()
	if done || ctx.Err() != nil {
		return
	}
	if !time.Now().Before(valid) {
		// No validity is left to extend: a renewal sent now could not
		// make the lease valid again (its context would be expired
		// already), and the expiry timer loses the lease. A retry can
		// be timed for this very instant (the deadline), when the
		// expiry timer fires too; stopping here, whichever of the two
		// runs first, keeps what the lease reports independent of that
		// order (the simulation replays a seed byte for byte only if
		// it is).
		return
	}
	interval := ttl / 3
	// The renewal gives up a nanosecond before the validity deadline, not
	// at it: a reply that came later could not make the lease valid
	// again anyway, and the expiry timer fires at the deadline itself.
	// Two timers of one instant run in an order Go does not fix, so a
	// renewal that failed at the deadline was recorded before the loss
	// in one run and after it in the next (the simulation replays a
	// seed byte for byte only if it is not).
	rctx, cancel := context.WithDeadline(ctx, valid.Add(-time.Nanosecond))
	var observed func(error)
	if h := l.c.opts.OnRenew; h != nil {
		observed = h(l.key, l.fence, ttl)
	}
	err := l.renew(rctx, ttl)
	cancel()
	if observed != nil {
		observed(err)
	}
	var next time.Duration
	switch {
	case err == nil:
		next = interval
	case errors.Is(err, ErrNotHeld) || ctx.Err() != nil:
		return
	case !time.Now().Before(l.ValidUntil()):
		// The validity deadline passed with no renewal through: one sent
		// now cannot make the lease valid again (the expiry timer loses
		// it, once a release in flight has settled). Retrying every
		// millisecond with a context already expired was a hot loop that
		// logged a warning each time, for as long as a release stayed in
		// flight (found by the simulation under pause-server).
		l.c.opts.Logger.Warn("lock: watchdog renewal failed at the lease's validity deadline; the watchdog stops", "key", l.key, "err", err)
		return
	default:
		l.c.opts.Logger.Warn("lock: watchdog renewal failed; retrying", "key", l.key, "err", err)
		next = max(min(interval/4, time.Until(l.ValidUntil())), time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && l.wd != nil {
		l.wd.Reset(next)
	}
}

// unknown wraps a lost reply: ErrUnknownOutcome, the error, and the caller's
// ctx cause when its deadline passed mid-command.
func unknown(ctx context.Context, op, key string, err error) error {
	if cerr := ctxCause(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s %q: %w: %w (%w)", op, key, ErrUnknownOutcome, err, cerr)
	}
	return fmt.Errorf("%s %q: %w: %w", op, key, ErrUnknownOutcome, err)
}

// WithValidity returns a child of parent that ends at the lease's validity
// deadline as it stands now (ValidUntil; context.Cause wraps
// context.DeadlineExceeded and ErrLost), or when the lease ends (lost or
// released: Context's cause), or with parent, whichever comes first. Make
// one per downstream call (a query, a write to a fenced resource): its
// deadline does not follow later renewals, so a call made under it never
// outlives the validity the lease had when the call began. Call cancel
// when the call is done.
func (l *Lease) WithValidity(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	lease := l.Context()
	ctx, cancelCause := context.WithCancelCause(parent)
	stop := context.AfterFunc(lease, func() { cancelCause(context.Cause(lease)) })
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, l.ValidUntil(),
		fmt.Errorf("lease %q: validity deadline passed: %w (%w)", l.Key(), context.DeadlineExceeded, ErrLost))
	return ctx, func() {
		stop()
		cancelDeadline()
		cancelCause(context.Canceled)
	}
}

// Reenter takes one more hold of this lease's lock for its owner, as
// WithOwner(l.Owner()) would, but only while this lease's own hold
// stands: when the lease was lost (the lock expired, was taken, or was
// handed on), or its validity ran out, it returns ErrNotHeld instead of a
// fresh hold that no outer lease protects. It never waits. The new Lease shares this one's owner
// and fence and has a hold of its own (Release it); opts may set its TTL
// (WithTTL), watchdog (WithWatchdog) and metadata (WithMetadata), and not
// its owner. A reply lost (ErrUnknownOutcome) takes back, in the
// background, the hold it may have added, as an acquire WithOwner does.
func (l *Lease) Reenter(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	if l == nil {
		return nil, fmt.Errorf("reenter: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return nil, fmt.Errorf("reenter %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	called := time.Now()
	ctx, end := l.c.opts.Hooks.begin(ctx, Call{Op: "reenter", Key: l.key, Fence: l.fence, Lease: l})
	n, err := l.reenter(ctx, opts)
	l.c.acquired(l.key, called, end, n, err)
	return n, err
}

// reenter is Reenter without the hooks.
func (l *Lease) reenter(ctx context.Context, opts []AcquireOption) (*Lease, error) {
	cfg, err := l.c.callConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("reenter %q: %w", l.key, err)
	}
	if cfg.ownerSet {
		return nil, fmt.Errorf("reenter %q: WithOwner: the owner is the lease's: %w", l.key, ErrInvalid)
	}
	if !cfg.ttlSet {
		cfg.ttl = l.TTL()
	}
	cfg.owner, cfg.ownerSet = l.given, true
	if l.c.isClosed() {
		return nil, fmt.Errorf("reenter %q: %w: %w", l.key, ErrNotAcquired, ErrClosed)
	}
	if done, cause := l.ended(); done {
		// %v: the cause may wrap ErrUnknownOutcome (a release whose
		// reply was lost), and this call sent nothing.
		return nil, fmt.Errorf("reenter %q: the lease ended (%v): %w", l.key, cause, ErrNotHeld)
	}
	if !time.Now().Before(l.ValidUntil()) {
		// Its validity ran out, though the timer that loses it may not
		// have fired yet and Redis may keep the key a little longer (the
		// drift allowance): the lease vouches for nothing now.
		return nil, fmt.Errorf("reenter %q: the lease's validity ran out: %w", l.key, ErrNotHeld)
	}
	if l.mode == modePermits {
		return nil, fmt.Errorf("reenter %q: a semaphore's permits are not reentrant: acquire more: %w", l.key, ErrInvalid)
	}
	a := newAttempt(l.c, l.key, l.keys, l.owner, l.given, cfg, "reenter")
	a.proto, a.mode, a.permits = l.proto, l.mode, 1
	a.obs = l.c.opts.Hooks.carried(ctx)
	a.setID(newToken(l.c.rnd))
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reenter %q: nothing sent: %w", l.key, context.Cause(ctx))
	}
	start := time.Now()
	reply, err := l.c.run(ctx, l.proto.reenter, []string{l.keys.Lock, l.keys.Gone},
		l.owner, strconv.FormatUint(l.fence, 10), cfg.ttl.Milliseconds(), a.id, cfg.metadata, l.id)
	if err != nil {
		return a.finish(ctx, start, attemptResult{}, err, false)
	}
	n, _ := reply.(int64)
	if n <= 0 {
		return nil, fmt.Errorf("reenter %q: the lease's hold is gone (expired, taken or handed on): %w", l.key, ErrNotHeld)
	}
	a.acks = int64(l.c.opts.ReplicaAcks) // a nested hold rides on the acknowledged outer one
	return a.finish(ctx, start, attemptResult{ok: true, fence: l.fence, holds: n}, nil, false)
}
