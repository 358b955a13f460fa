package workload

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// inspect asks the lock who holds the key and records it (an inspect op)
// and, as owner when owner is set, how many holds that owner has (a holds
// op).
func (c *Client) inspect(ctx context.Context, rec *history.Recorder, insp locker.Inspector, owner string, timeout time.Duration) error {
	var in locker.Inspection
	op := history.Op{Client: c.Name, Kind: history.Inspect, Key: c.Key}
	if _, err := c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		in, err = insp.Inspect(ctx, c.Key)
		return err
	}, func(o *history.Op, res history.Result) {
		if res != history.OK || !in.Held {
			return
		}
		o.Held, o.Holder = true, in.Holder
		if in.HasFence {
			o.Token, o.HasToken = in.Fence, true
		}
		if in.HasHolds {
			o.HoldCount, o.HasHolds = max(in.Holds, 0), true
		}
	}); err != nil || owner == "" {
		return err
	}
	var n int64
	op = history.Op{Client: c.Name, Kind: history.Holds, Key: c.Key}
	_, err := c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		n, err = insp.HoldsOf(ctx, c.Key, owner)
		return err
	}, func(o *history.Op, res history.Result) {
		if res == history.OK {
			o.HoldCount, o.HasHolds = max(n, 0), true
		}
	})
	return err
}

// learnt records on an acquire's op what the call learnt: when it was
// surely in line (inLineAt, 0: not said), and for a grant its token and
// the validity its lock claims.
func (c *Client) learnt(rec *history.Recorder, inLineAt *atomic.Int64, lease *locker.Lease) func(o *history.Op, res history.Result) {
	return func(o *history.Op, res history.Result) {
		if t := inLineAt.Load(); t != 0 {
			o.InLine, o.HasInLine = min(max(t, o.Call), o.Return), true
		}
		if res == history.OK {
			o.Token, o.HasToken = (*lease).Fence()
			c.claim(rec, o, *lease)
		}
	}
}

// onHistory converts an instant of c's clock to the history's clock.
func (c *Client) onHistory(rec *history.Recorder, t time.Time) int64 {
	v := rec.Now() + int64(t.Sub(c.Clock.Now()))
	return min(max(v, 0), history.MaxTime-1)
}

// claim records on o the validity l claims now (locker.Claimer), when it
// claims one.
func (c *Client) claim(rec *history.Recorder, o *history.Op, l locker.Lease) {
	cl, ok := l.(locker.Claimer)
	if !ok {
		return
	}
	if t := cl.ValidUntil(); !t.IsZero() {
		claimUntil(o, c.onHistory(rec, t))
	}
}

// claimUntil records on o that the lock claimed its lease valid until t
// (history clock): the one place a claim is written, whether the lease
// said it (claim) or its server did (askTTL).
func claimUntil(o *history.Op, t int64) {
	o.ValidUntil, o.HasValid = min(max(t, 0), history.MaxTime-1), true
}

// askTTL asks the lock's server how long h's lease is still valid
// (locker.ServerClaimer), as code checking its lock does, and records the
// answer (a ttl op): its call plus the time left, a claim the claims
// property holds the lock to; a fail when the server says the lease is
// not held. A lease that cannot ask is not asked.
func (c *Client) askTTL(ctx context.Context, rec *history.Recorder, h held, timeout time.Duration) error {
	sc, ok := h.lease.(locker.ServerClaimer)
	if !ok {
		return nil
	}
	token, fenced := h.lease.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.TTL, Key: c.Key, Token: token, HasToken: fenced, Hold: h.id})
	var left time.Duration
	_, err := c.recording(rec).lock(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		left, err = sc.TTLLeft(ctx)
		return err
	}, func(o *history.Op) {
		if left > 0 {
			// From the call: the server counted the time left at some
			// instant of the op, no earlier.
			claimUntil(o, o.Call+int64(left))
		}
	})
	return err
}

// renewObserver records the renewals c's lock makes in the background (a
// watchdog's) as renew ops; without them a later release would look like one
// after the lease surely expired.
type renewObserver struct{ c *Client }

// Renewing implements locker.Observer. Nothing is recorded before Run, nor
// after the client crashed (the gate refuses the renewal before sending it).
func (o renewObserver) Renewing(key string, ttl time.Duration, token uint64, hasToken bool) func(error) {
	rec := o.c.rec.Load()
	if rec == nil || o.c.Gate.Crashed() {
		return nil
	}
	p := rec.Invoke(history.Op{Client: o.c.Name, Kind: history.Renew, Key: key, TTLMillis: ttl.Milliseconds(),
		Token: token, HasToken: hasToken})
	return func(err error) {
		if o.c.Gate.Crashed() {
			_ = o.c.recording(rec).crashed(p)
			return
		}
		res, err := lockResult(err)
		if err != nil { // ErrInvalid: nothing was sent
			res = history.Fail
		}
		_ = p.Complete(res, nil) // invalid-op and write errors are kept in rec.Err; after Close it stays pending
	}
}
