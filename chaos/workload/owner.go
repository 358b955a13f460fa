package workload

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// waitTwice starts a second blocking acquire as the client's owner, on its
// key, in a goroutine of its own (Mix.Twice), recorded with a hold number
// of its own, which releases what it got after a brief section; join
// waits for it. The goroutine draws nothing from the client's stream, so
// the seed's draws stay the main flow's.
func (c *Client) waitTwice(ctx context.Context, rec *history.Recorder, owned locker.Owned, ttl, opTimeout, timeout time.Duration) (join func() error) {
	op := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: ttl.Milliseconds(), Wait: true, Hold: c.nextHold()}
	var inLine func()
	var inLineAt atomic.Int64
	if _, ok := c.locker.(locker.InLine); ok {
		inLine = func() { inLineAt.Store(max(rec.Now(), 1)) }
	}
	var lease locker.Lease
	done := make(chan error, 1)
	go func() {
		// A moment after the first wait, of its own (twiceStagger).
		_ = sleepFor(ctx, twiceStagger(op.Hold))
		// Not c.recording: its in-flight op is the main flow's.
		res, err := recording{rec: rec, gate: c.Gate}.lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) error {
			var err error
			lease, err = owned.AcquireAs(ctx, c.Key, ttl, c.owner(), true, inLine)
			return err
		}, c.learnt(rec, &inLineAt, &lease))
		if err == nil && res == history.OK {
			// Its loss notice is watched from the grant on, as the first
			// hold's is: the checker holds every live hold to the lock's
			// loss bound (a seed whose key was lost under this hold once
			// found it unwatched, its notice never recorded).
			h := held{lease: lease, id: op.Hold}
			h.released = c.watchLoss(ctx, rec, h)
			// A brief section of its own, then its release, whatever the
			// first wait does meanwhile, as a goroutine of its own does:
			// a lock that lets this wait pick up the hand-off given at
			// the first wait's place, the first still on its way to it,
			// hands the lock on to the next client when this one
			// releases, past the first wait (tla/LockLine.tla, anycall).
			_ = sleepFor(ctx, twiceWork(op.Hold))
			err = c.release(ctx, rec, h, false, opTimeout)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// again is what a holder acquiring as its own owner (Mix.Owner) does when
// its check found the lease gone: it acquires again as the same owner
// (one attempt), then releases the lost lease, as code whose release was
// deferred does, and, holding anew, works and releases the new hold. The
// lost lease's release must fail and leave the new hold alone.
func (w *Workload) again(ctx context.Context, rec *history.Recorder, c *Client, owned locker.Owned, lost held) error {
	cfg := w.cfg
	var nl locker.Lease
	op := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Hold: c.nextHold()}
	start := c.Clock.Now()
	res, err := c.recording(rec).lock(ctx, op, ctxNormal, cfg.OpTimeout, func(ctx context.Context) error {
		var err error
		nl, err = owned.AcquireAs(ctx, c.Key, cfg.TTL, c.owner(), false, nil)
		return err
	}, func(o *history.Op) {
		o.Token, o.HasToken = nl.Fence()
		c.claim(rec, o, nl)
	})
	if err != nil {
		return err
	}
	if err := c.release(ctx, rec, lost, false, cfg.OpTimeout); err != nil {
		return err
	}
	if res != history.OK {
		return nil
	}
	h := held{lease: nl, id: op.Hold, believed: c.reckon(nl, start)}
	h.released = c.watchLoss(ctx, rec, h)
	_ = sleepRand(ctx, c.rng, cfg.Hold)
	if err := c.Gate.Wait(ctx); err != nil {
		return errStop
	}
	return c.release(ctx, rec, h, false, cfg.OpTimeout)
}
