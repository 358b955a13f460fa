package lock

import (
	"context"
	"time"
)

// Call is what Hooks.Begin is told of a call as it starts.
type Call struct {
	// Op is the call: "acquire" or "try-acquire" (with "-read", "-write"
	// or "-permits" for the shared kinds), "reenter", "release" or
	// "renew".
	Op string
	// Key is the lock's key (a shared kind's name).
	Key string
	// Fence is the lease's fence, for a release, renewal or reenter (0
	// for an acquire: it has none yet).
	Fence uint64
	// Lease is the lease a release or renewal acts on, or the one a
	// reenter nests in (nil for an acquire: see Result.Lease). It tells
	// one hold from another where key and fence do not (nested holds
	// share both).
	Lease *Lease
}

// Result is what a call's end func (from Hooks.Begin) is told of its
// outcome.
type Result struct {
	// Err is the call's error: nil, or one wrapping ErrNotAcquired (the
	// lock is taken), ErrUnknownOutcome (the reply was lost: the call may
	// have taken effect), ErrNotHeld, ...
	Err error
	// Lease is the lease an acquire got (nil on error), or the lease of a
	// release or renewal.
	Lease *Lease
	// Fence is the lease's fence (0 when an acquire got none).
	Fence uint64
	// Held is, for a release that ended the lease (nil or ErrNotHeld),
	// how long the lease was held.
	Held time.Duration
	// Joined: a release that sent nothing and took the outcome of a
	// concurrent Release of the same lease (Release is single-flight),
	// so that one lost reply is not counted twice.
	Joined bool
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventJoin: a waiting acquire took a place in the lock's line;
	// Event.Queue is the line's length with it.
	EventJoin EventKind = iota + 1
	// EventHandoff: a mutex acquire picked up the lock a release (or a
	// cleanup) handed to it; Event.Took is the time from the hand-off to
	// the pickup, on the server's clock: the hand-off's fence is the
	// server's time as it handed over, unless the fence counter ran ahead
	// of that clock (after a failover to a node whose clock is behind);
	// Took is then less than the age, and 0 when the server cannot tell
	// it at all.
	EventHandoff
	// EventLost: a lease was lost (Event.Err wraps ErrLost, with the
	// reason); Event.Op is the call that made it. It comes after that
	// call's end func, and outside the lease's lock: the hook may read
	// the lease.
	EventLost
	// EventCleanup: a call whose reply was lost (Event.Op) has been
	// cleaned up in the background: its place in line left, its hold ended
	// (Event.Err nil), or the cleanup gave up (Event.Err the last error:
	// the lock and the place then expire on their own).
	EventCleanup
)

// String returns the kind's name: "join", "handoff", "lost", "cleanup".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventHandoff:
		return "handoff"
	case EventLost:
		return "lost"
	case EventCleanup:
		return "cleanup"
	}
	return "unknown"
}

// Event is what Hooks.Event reports.
type Event struct {
	Kind EventKind
	// Op is the call the event belongs to (Call.Op's names).
	Op  string
	Key string
	// Fence is the lease's, for EventLost and EventHandoff.
	Fence uint64
	// Lease is the lease lost (EventLost) or handed over (EventHandoff).
	Lease *Lease
	// Queue is the line's length (EventJoin), 0 when the lock did not say.
	Queue int64
	// Took is EventHandoff's latency.
	Took time.Duration
	// Err is EventLost's cause and a cleanup's last error.
	Err error
}

// begin starts a call under h.Begin (ctx unchanged and a no-op end when
// there is none).
func (h *Hooks) begin(ctx context.Context, c Call) (context.Context, func(Result)) {
	if h.Begin == nil {
		return ctx, func(Result) {}
	}
	cctx, end := h.Begin(ctx, c)
	if cctx == nil {
		cctx = ctx
	}
	if end == nil {
		end = func(Result) {}
	}
	return cctx, end
}

// carried is the context a call's later events are reported under (its
// cleanup, its lease's renewals and loss): ctx without its cancellation,
// or nil (Background) when no hook would read it.
func (h *Hooks) carried(ctx context.Context) context.Context {
	if h.Begin == nil && h.Event == nil {
		return nil
	}
	return context.WithoutCancel(ctx)
}

// event reports e under h.Event, if set.
func (h *Hooks) event(ctx context.Context, e Event) {
	if h.Event != nil {
		h.Event(ctx, e)
	}
}
