package workload

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// held is one hold the client has: the lease, its number in the history
// (history.Op.Hold), and how long the client itself reckons it valid
// when the lock states nothing (locker.Claimer): the start of the acquire
// or renewal that last succeeded plus the lease's TTL, on c's clock.
type held struct {
	lease locker.Lease
	id    uint64
	// mode and permits are a Moded lock's hold's (the history's mode and
	// permits, which every op about the hold carries: stamp).
	mode     history.Mode
	permits  int64
	believed time.Time
	// released tells the loss-notice watcher that the hold is being
	// released (watchLoss); nil: nothing watches.
	released func()
	// watched is the lease's Context when the holder watches and checks
	// it, not Lost (Mix.Context); nil: it watches Lost.
	watched context.Context
}

// stamp sets the hold's mode and permits on o, an op about it.
func (h held) stamp(o history.Op) history.Op {
	o.Mode, o.Permits = h.mode, h.permits
	return o
}

// reckon is how long a user reckons a lease valid that a successful call
// started at start gave: start + TTL (never, for a lease without expiry).
func (c *Client) reckon(l locker.Lease, start time.Time) time.Time {
	if l.TTL() <= 0 {
		return time.Time{}
	}
	return start.Add(l.TTL())
}

// check is what a user without fencing does right before a write: the
// lease is valid when its loss notice has not fired and it stays valid
// for margin more (the time the write still needs before it is sent):
// by the validity the lock claims (locker.Claimer), or, when it claims
// nothing, by the client's own reckoning. claimed is the lock's claim,
// zero when it states none.
func (c *Client) check(h held, margin time.Duration) (valid bool, claimed time.Time) {
	if h.watched != nil {
		if h.watched.Err() != nil {
			return false, time.Time{}
		}
	} else {
		select {
		case <-h.lease.Lost():
			return false, time.Time{}
		default:
		}
	}
	until := c.Clock.Now().Add(margin)
	if cl, ok := h.lease.(locker.Claimer); ok {
		claimed = cl.ValidUntil()
		return !claimed.IsZero() && until.Before(claimed), claimed
	}
	return h.believed.IsZero() || until.Before(h.believed), time.Time{}
}

// watchLoss records h's loss notice (a lost op) when Lease.Lost fires,
// at the instant the client would see it: a paused client sees it when
// it wakes, a crashed one never. It watches until the run ends, and for
// two TTLs after the hold's release (a notice then is false: the
// false-notice rule). Run waits for the watchers.
func (c *Client) watchLoss(ctx context.Context, rec *history.Recorder, h held) (released func()) {
	lost := h.lease.Lost()
	stop := make(chan struct{})
	var once sync.Once
	var releasing atomic.Bool
	released = func() {
		releasing.Store(true)
		once.Do(func() { time.AfterFunc(2*max(h.lease.TTL(), time.Second), func() { close(stop) }) })
	}
	if h.watched != nil {
		// The lease's context ends with the hold, lost or released: a
		// cancellation once the release began is no loss notice.
		lost = h.watched.Done()
	}
	if lost == nil {
		return released
	}
	c.watchers.Add(1)
	go func() {
		defer c.watchers.Done()
		select {
		case <-lost:
		case <-stop:
			return
		case <-c.gone:
			return
		case <-ctx.Done():
			return
		}
		if c.Gate.Wait(ctx) != nil || ctx.Err() != nil {
			return // crashed, or the run is over
		}
		if h.watched != nil && releasing.Load() {
			return
		}
		select {
		case <-c.gone:
			return // it left: Close ended the context
		default:
		}
		t := rec.Now()
		token, fenced := h.lease.Fence()
		_ = rec.Record(h.stamp(history.Op{Client: c.Name, Kind: history.Lost, Key: c.Key, Call: t, Return: t, Completed: true,
			Result: history.OK, Token: token, HasToken: fenced, Hold: h.id}))
	}()
	return released
}

// release releases l. A rushed release is sent with an already canceled
// context or a 5ms deadline; when it did not surely happen (fail or
// unknown), it is sent once more with the op timeout, as a careful caller
// retries a release until it is done.
func (c *Client) release(ctx context.Context, rec *history.Recorder, h held, rush bool, timeout time.Duration) error {
	_, err := c.releaseBeside(ctx, rec, h, rush, 0, timeout)
	return err
}

// Second calls beside a release (Mix.Concurrent).
const (
	besideNone    = iota
	besideRelease // a second Release
	besideRenew   // a Renew
)

// releaseBeside is release with a second call on the same lease at once
// (beside: besideRelease or besideRenew), from a goroutine that draws
// nothing from the client's stream and is joined before it returns. res
// is the result of the release's last call (the one beside aside).
func (c *Client) releaseBeside(ctx context.Context, rec *history.Recorder, h held, rush bool, beside int, timeout time.Duration) (res history.Result, err error) {
	if beside == besideNone {
		return c.releaseOne(ctx, rec, h, rush, timeout)
	}
	l := h.lease
	token, fenced := l.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.Release, Key: c.Key, Token: token, HasToken: fenced, Hold: h.id})
	do := func(ctx context.Context) error { return l.Release(ctx) }
	if beside == besideRenew {
		op = h.stamp(history.Op{Client: c.Name, Kind: history.Renew, Key: c.Key, TTLMillis: l.TTL().Milliseconds(), Token: token, HasToken: fenced, Hold: h.id})
		do = func(ctx context.Context) error { return l.Renew(ctx, l.TTL()) }
	}
	// Its own recording without the op in flight (the main call's).
	r := recording{rec: rec, gate: c.Gate}
	second := make(chan error, 1)
	go func() {
		_, err := r.lockEdit(ctx, op, ctxNormal, timeout, do, func(o *history.Op, res history.Result) {
			if o.Kind == history.Renew && res == history.OK {
				c.claim(rec, o, l)
			}
		})
		second <- err
	}()
	res, err = c.releaseOne(ctx, rec, h, rush, timeout)
	return res, errors.Join(err, <-second)
}

// releaseOne is release alone; res is its last call's result.
func (c *Client) releaseOne(ctx context.Context, rec *history.Recorder, h held, rush bool, timeout time.Duration) (history.Result, error) {
	l := h.lease
	if h.released != nil {
		// Before the release: it ends a watched context (Mix.Context).
		h.released()
	}
	token, fenced := l.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.Release, Key: c.Key, Token: token, HasToken: fenced, Hold: h.id})
	do := func(ctx context.Context) error { return l.Release(ctx) }
	// After a release that did not surely happen, what the lock still
	// claims (nothing, for a lock that keeps its word: the claims property).
	still := func(o *history.Op, res history.Result) {
		if res == history.Unknown {
			c.claim(rec, o, l)
		}
	}
	if rush {
		mode := ctxCanceled
		if c.rng.IntN(2) == 0 {
			mode = ctxTiny
		}
		res, err := c.recording(rec).lockEdit(ctx, op, mode, timeout, do, still)
		if err != nil || res == history.OK {
			return res, err
		}
		// A careful caller retries after a backoff (up to a fifth of the
		// TTL), in which a release that did happen hands the key on while
		// the lock may still claim it; or at once (half, from the side
		// stream), while the first request and the lock's own clean-up of
		// it may still be on their way: a lock whose second Release undoes
		// the nested hold before its id is buried lets the first, landing
		// late, end the outer hold.
		backoff := time.Duration(c.rng.Int64N(int64(max(l.TTL()/5, 20*time.Millisecond)) + 1))
		if c.side.IntN(2) == 0 {
			_ = sleepFor(ctx, backoff)
		}
	}
	return c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, do, still)
}
