package workload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// recording is one client's recording wrapper, in the manner of etcd's
// robustness RecordingClient: every lock and resource operation of the
// client goes through it, and it does what each one needs around the call
// (invoke the op in the history, run the call under a deadline of its own,
// see whether the client crashed meanwhile, map the error to a result,
// complete the op), so that the critical section (Workload.section) is
// only the choice of what to do next.
type recording struct {
	rec  *history.Recorder
	gate *gate.Gate
	// invoked holds the lock op in flight, as invoked (a fault that waits
	// for a waiter in line reads it); nil between ops.
	invoked *atomic.Pointer[history.Op]
}

// ctxMode is how a lock op's context is made.
type ctxMode int

const (
	ctxNormal   ctxMode = iota // a deadline of the op's timeout
	ctxCanceled                // already canceled
	ctxTiny                    // a short deadline (tinyDeadline)
)

// tinyDeadline is ctxTiny's deadline: long enough that the command is
// written even on a busy machine (at 1ms a loaded CI runner often ran out
// before sending, an unknown outcome that changed nothing), short enough to
// cut a reply the latency fault holds back (10–30ms each way): the command
// runs and its outcome is unknown, the case a careful caller must handle.
const tinyDeadline = 5 * time.Millisecond

// lock records one lock operation: it invokes op, runs do under a context
// made per mode (cut from the run's ctx, so that an op in flight when the
// run ends still completes), and completes op with do's result mapped by
// lockResult, edit filling in what was learnt (only for ok). An op the
// lock lacks (locker.ErrUnsupported: nothing was sent) is withdrawn, and
// its result is "" (neither ok nor anything the history holds). After a
// crash of the client during do it returns errStop, the op left as the
// gate decided (see crashed).
func (r recording) lock(ctx context.Context, op history.Op, mode ctxMode, timeout time.Duration,
	do func(ctx context.Context) error, edit func(*history.Op)) (history.Result, error) {
	return r.lockEdit(ctx, op, mode, timeout, do, func(o *history.Op, res history.Result) {
		if res == history.OK && edit != nil {
			edit(o)
		}
	})
}

// lockEdit is lock whose edit fills in what was learnt for every result it
// records, told the result (a release's remaining claim when unknown, a
// waiter's instant in line whatever the result).
func (r recording) lockEdit(ctx context.Context, op history.Op, mode ctxMode, timeout time.Duration,
	do func(ctx context.Context) error, edit func(o *history.Op, res history.Result)) (history.Result, error) {
	p := r.rec.Invoke(op)
	if r.invoked != nil {
		invoked := p.Op()
		r.invoked.Store(&invoked)
		defer r.invoked.Store(nil)
	}
	derr := call(ctx, mode, timeout, do)
	if r.gate.Crashed() {
		return "", r.crashed(p)
	}
	if errors.Is(derr, locker.ErrUnsupported) {
		p.Withdraw()
		return "", nil
	}
	res, err := lockResult(derr)
	if err != nil {
		p.Withdraw()
		return "", fmt.Errorf("%s %q: %w", op.Kind, op.Key, err)
	}
	return res, p.Complete(res, func(o *history.Op) {
		setDeadline(o, mode, timeout)
		edit(o, res)
	})
}

// setDeadline records on o when the context call made for it expired: its
// call plus the timeout per mode (the context is made right after the call
// is stamped, so the instant recorded is not after the real deadline).
func setDeadline(o *history.Op, mode ctxMode, timeout time.Duration) {
	o.Deadline, o.HasDeadline = o.Call+timeoutOf(mode, timeout).Nanoseconds(), true
}

// timeoutOf is how long a context made per mode lives: a canceled one not
// at all (it is canceled before the call), a tiny one tinyDeadline.
func timeoutOf(mode ctxMode, timeout time.Duration) time.Duration {
	switch mode {
	case ctxCanceled:
		return 0
	case ctxTiny:
		return tinyDeadline
	}
	return timeout
}

// resource records one resource operation (a read or a write): it
// invokes op, runs do under a deadline of timeout, and completes op with
// do's result mapped by resourceResult, edit filling in what was learnt
// (only for ok: the value read). After a crash of the client during do it
// returns errStop. A write the resource refuses as malformed
// (fencing.ErrInvalid) is a bug of the workload: an error.
func (r recording) resource(ctx context.Context, op history.Op, timeout time.Duration,
	do func(ctx context.Context) error, edit func(*history.Op)) (history.Result, error) {
	p := r.rec.Invoke(op)
	derr := call(ctx, ctxNormal, timeout, do)
	if r.gate.Crashed() {
		return "", r.crashed(p)
	}
	if errors.Is(derr, fencing.ErrInvalid) {
		p.Withdraw()
		return "", fmt.Errorf("%s %q: %w", op.Kind, op.Key, derr)
	}
	res := resourceResult(derr)
	return res, p.Complete(res, func(o *history.Op) {
		setDeadline(o, ctxNormal, timeout)
		if res == history.OK && edit != nil {
			edit(o)
		}
	})
}

// call runs do under a context made per mode with the op's timeout, cut
// from the run's ctx: an op in flight when the run ends still completes.
func call(ctx context.Context, mode ctxMode, timeout time.Duration, do func(ctx context.Context) error) error {
	if mode == ctxTiny {
		timeout = tinyDeadline
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if mode == ctxCanceled {
		cancel()
	}
	return do(octx)
}

// crashed ends a worker whose client crashed during op p. A client that
// crashed right after a reply (Gate.CrashAfter) had p take effect, or not,
// before that moment: p completes as unknown now. Otherwise p never returns
// (a command may still be in flight) and the recorder writes it pending.
func (r recording) crashed(p *history.Pending) error {
	if r.gate.CrashedAfterReply() {
		if err := p.Complete(history.Unknown, nil); err != nil {
			return err
		}
	}
	return errStop
}

// lockResult maps a locker error to a history result (locker's Outcomes);
// an error back means a bug (bad input).
func lockResult(err error) (history.Result, error) {
	switch {
	case err == nil:
		return history.OK, nil
	case errors.Is(err, locker.ErrInvalid):
		return "", err
	case errors.Is(err, locker.ErrUnknownOutcome):
		return history.Unknown, nil
	case errors.Is(err, locker.ErrNotAcquired), errors.Is(err, locker.ErrNotHeld):
		return history.Fail, nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// A deadline that struck mid-command: the command may have run.
		return history.Unknown, nil
	default:
		// Errors that surely had no effect.
		return history.Fail, nil
	}
}

// resourceResult maps a fencing error to a history result. Resource ops
// have no "fail": an error that surely had no effect is recorded as unknown
// (the weaker claim).
func resourceResult(err error) history.Result {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fencing.ErrStaleToken):
		return history.Rejected
	default:
		return history.Unknown
	}
}
