package workload

import (
	"context"
	"sync"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// stepCloseWaiting: the client shuts down for good while holding, with a
// wait of its own in line (Mix.CloseWaiting: Workload.shutDown). Only a
// lock with a blocking acquire draws this choice, from the side stream,
// and not while a second wait of the owner runs beside (Mix.Twice): that
// wait, in line with a place of its own, would be refused at its turn
// after the Close and passed over, which the fair-queue rule, judging a
// waiter by its place alone, reads as an overtaking.
func (w *Workload) stepCloseWaiting(s *section) (bool, error) {
	c := s.c
	if _, ok := c.locker.(locker.Waiter); !ok || s.twice || !s.sideChance(&s.mix.CloseWaiting) {
		return false, nil
	}
	close(c.gone) // nobody is left to hear a loss notice
	if err := w.shutDown(s.ctx, s.rec, c, s.h); err != nil {
		return true, err
	}
	return true, errStop
}

// shutDown is a client going away for good while it holds h and another
// of its goroutines waits for the same key, as a service shutting down
// while one request holds the lock and another waits for it: the waiter
// joins the line behind h (a blocking acquire of its own, not as the
// client's owner), the client closes its Locker once the waiter is in
// line (closeLocker), releases h through the closed handle (a release
// needs no watchdog), waits for the waiter, and stops. The release hands
// the lock on, to the waiter when it is first in line: after Close, which
// a lock that promises it must refuse (locker.CallContract.CloseRefuses;
// the calls property's closed-grant rule). Half the waits (a seeded
// choice, from the side stream) ask for no watchdog when the lock can
// (locker.Unwatched), as a caller who gives a lease time does: a lock
// that gives back a grant after Close only when the watchdog asked for
// cannot start keeps one that asked for none. A lease the waiter got anyway is released.
func (w *Workload) shutDown(ctx context.Context, rec *history.Recorder, c *Client, h held) error {
	cfg := w.cfg
	waiter := c.locker.(locker.Waiter) // stepCloseWaiting drew only for a Waiter
	op := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Wait: true, Hold: c.nextHold()}
	in := make(chan struct{})
	var once sync.Once
	inLine := func() { once.Do(func() { close(in) }) }
	acquire := func(ctx context.Context) (locker.Lease, error) { return waiter.Acquire(ctx, c.Key, cfg.TTL) }
	il, says := c.locker.(locker.InLine)
	if says {
		acquire = func(ctx context.Context) (locker.Lease, error) { return il.AcquireInLine(ctx, c.Key, cfg.TTL, inLine) }
	}
	if u, ok := c.locker.(locker.Unwatched); ok && c.side.IntN(2) == 0 {
		acquire = func(ctx context.Context) (locker.Lease, error) {
			return u.AcquireUnwatched(ctx, c.Key, cfg.TTL, true, inLine)
		}
	}
	var lease locker.Lease
	done := make(chan error, 1)
	go func() {
		// Not c.recording: the client's op in flight is the main flow's.
		res, err := recording{rec: rec, gate: c.Gate}.lock(ctx, op, ctxNormal, max(cfg.OpTimeout, cfg.WaitTimeout), func(ctx context.Context) error {
			var err error
			lease, err = acquire(ctx)
			return err
		}, func(o *history.Op) {
			o.Token, o.HasToken = lease.Fence()
			c.claim(rec, o, lease)
		})
		inLine() // returned: nothing to wait for
		if err == nil && res == history.OK {
			err = c.release(ctx, rec, held{lease: lease, id: op.Hold}, false, cfg.OpTimeout)
		}
		done <- err
	}()
	// In line when the lock says so (bounded: fenced-v1 never says), or
	// once its first attempt is surely over (see FirstQueued); then a
	// moment more for the waiter to settle (to subscribe), so that it
	// and Close do not send at one virtual instant, in an order Go does
	// not fix, and the seed replays.
	if says {
		t := time.NewTimer(cfg.OpTimeout)
		select {
		case <-in:
		case <-t.C:
		}
		t.Stop()
	}
	_ = sleepFor(ctx, queuedAfter)
	err := w.closeLocker(ctx, rec, c, "shutdown")
	if err == nil {
		err = c.release(ctx, rec, h, false, cfg.OpTimeout)
	}
	if jerr := <-done; err == nil {
		err = jerr
	}
	return err
}

// leave is a client going away while it holds: it closes its lock
// (closeLocker), and then one of its goroutines that did not
// hear of the shutdown makes one more attempt on the closed lock, as code
// racing a shutdown does (a blocking one, when the lock has it). A lock
// that promises it refuses that attempt
// (locker.CallContract.CloseRefuses), with or without the watchdog asked
// for. A lease the
// attempt got anyway is released.
func (w *Workload) leave(ctx context.Context, rec *history.Recorder, c *Client) error {
	cfg := w.cfg
	if err := w.closeLocker(ctx, rec, c, "leave"); err != nil {
		return err
	}
	// It waits, when the lock can: the lease the client left with is still
	// held, and a single attempt would be refused for that alone.
	var l locker.Lease
	acq := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Hold: c.nextHold()}
	try, timeout := func(ctx context.Context) (locker.Lease, error) { return c.locker.TryAcquire(ctx, c.Key, cfg.TTL) }, cfg.OpTimeout
	if waiter, ok := c.locker.(locker.Waiter); ok {
		acq.Wait, timeout = true, max(cfg.OpTimeout, cfg.WaitTimeout)
		try = func(ctx context.Context) (locker.Lease, error) { return waiter.Acquire(ctx, c.Key, cfg.TTL) }
	}
	res, err := c.recording(rec).lock(ctx, acq, ctxNormal, timeout, func(ctx context.Context) error {
		var err error
		l, err = try(ctx)
		return err
	}, func(o *history.Op) {
		o.Token, o.HasToken = l.Fence()
		c.claim(rec, o, l)
	})
	if err != nil || res != history.OK {
		return err
	}
	return c.release(ctx, rec, held{lease: l, id: acq.Hold}, false, cfg.OpTimeout)
}

// closeLocker closes c's lock, recording it (a close op, with its
// deadline when the lock's Close takes a ctx, locker.ContextCloser: then
// as a shutdown loop does, with short deadlines until one Close returns
// nil); why names the caller in the log of a close that failed. A crash
// meanwhile stops the worker (errStop).
func (w *Workload) closeLocker(ctx context.Context, rec *history.Recorder, c *Client, why string) error {
	cfg := w.cfg
	op := history.Op{Client: c.Name, Kind: history.Close, Key: c.Key}
	closer, hasCtx := c.locker.(locker.ContextCloser)
	p := rec.Invoke(op)
	var err error
	if hasCtx {
		// A service's shutdown loop: Close with a short deadline, again
		// until it returns nil, within the op's timeout, as a lock that
		// says "calling Close again waits again" allows: a second Close
		// while lost-reply cleanups are starting must wait, not panic.
		err = call(ctx, ctxNormal, cfg.OpTimeout, func(octx context.Context) error {
			for {
				err := call(octx, ctxTiny, 0, closer.CloseContext)
				if err == nil || octx.Err() != nil {
					return err
				}
			}
		})
	} else {
		err = c.locker.Close()
	}
	if c.Gate.Crashed() {
		return c.recording(rec).crashed(p)
	}
	res := history.OK
	if err != nil {
		// A close that failed may have stopped part of what it runs.
		res = history.Unknown
		cfg.Logger.Warn("close on "+why, "client", c.Name, "err", err)
	}
	return p.Complete(res, func(o *history.Op) {
		if hasCtx {
			setDeadline(o, ctxNormal, cfg.OpTimeout)
		}
	})
}
