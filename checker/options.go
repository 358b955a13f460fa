package checker

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// DefaultDrift is the clock drift bound the contract assumes (1%).
const DefaultDrift = 0.01

// NoDrift, as Options.Drift, checks with no drift at all: every bound is
// exact (a lease taken at call with length T is surely valid until
// call+T, inclusive), where 0 means DefaultDrift. Before it, callers
// passed a tiny drift, which moved every bound 1ns the lenient way (an
// acquire at exactly call+T passed mutual exclusion).
const NoDrift = -1.0

// DefaultLivenessSlack is how long after a crashed holder's lease surely
// expired an acquire by another client must succeed. One second covers
// Redis's expiry, scheduling and the acquire's own round trips with margin;
// a tighter slack would risk crying wolf.
const DefaultLivenessSlack = time.Second

// ErrBadOptions is returned (wrapped) for invalid Options.
var ErrBadOptions = errors.New("bad checker options")

// Options tune Check. The zero value is valid: drift 1%, slack 1s, no timeout.
type Options struct {
	// Drift is the relative clock drift bound between the history's clock and
	// the lock server's; 0 means DefaultDrift, NoDrift none at all.
	// Otherwise it must be in (0, 1).
	Drift float64
	// LivenessSlack is added to a crashed holder's surely-expired time before
	// a failed acquire by another client counts as a liveness violation; 0 means
	// DefaultLivenessSlack.
	LivenessSlack time.Duration
	// WaitBound is what the lock promises waiters: once no other client may
	// hold a key, a blocking acquire (history.Op.Wait) gets it within
	// WaitBound, whatever waiters that died ahead of it in line (their
	// acquires never returned). 0: the lock promises nothing and the
	// waiter-liveness rule is off. See docs/DESIGN.md.
	WaitBound time.Duration
	// LossBound is what the lock promises about its loss notice: once
	// another client took a key, a live holder is told (history op lost)
	// within LossBound. 0: the lock promises nothing and the loss-notice
	// rule is off. See docs/DESIGN.md (loss notice).
	LossBound time.Duration
	// Fair says the lock declares a fair queue: waiters are served in the
	// order they joined, but for at most Bypass waiters that joined later
	// (0: strict FIFO). false: the fairness property is n/a, and waiter
	// liveness counts every other client's hold as one ahead of a waiter.
	Fair   bool
	Bypass int
	// CallSlack is what the lock promises about its calls' contexts:
	// every call (history.Op.Deadline) returns within its context's
	// deadline plus CallSlack. 0: the lock promises nothing and the
	// late-return rule is off. See docs/DESIGN.md (calls).
	CallSlack time.Duration
	// CloseRefuses says the lock promises that a closed handle grants no
	// lease: an acquire called after its client's close returned ok is
	// refused. false: the closed-grant rule is off.
	CloseRefuses bool
	// Footprint is the bound the lock states for what it keeps in Redis
	// for a key (history op footprint): nil states none, and the
	// footprint property is n/a. See docs/DESIGN.md (footprint).
	Footprint *FootprintBound
	// Handoff is the lock's hand-off bound: a release that frees a key
	// while waiters are in line has the head of the line granted within
	// Handoff of its return, with no fault under way. 0: the lock states
	// none, and the promptness property is n/a. See docs/DESIGN.md
	// (promptness).
	Handoff time.Duration
	// NotReentrant says the lock refuses an acquire by the client that
	// holds the key (a plain SET NX): the lease model then takes such an
	// acquire for a new lease, which needs the holder's lease to have
	// possibly expired, never for a nested hold. false: the holder's
	// acquire may nest (a reentrant lock). It also keeps the search small:
	// without it, each acquire of unknown outcome by the holder of an
	// untokened lock may have added a hold, and a reset fault's hundreds of
	// them made a setnx history of 493 lease ops run out of its minute.
	NotReentrant bool
	// Timeout bounds the whole Check, every key and every property, the
	// explanations included; 0: no limit. What is not decided in time is
	// unknown (a direct rule's violation found in time still counts).
	Timeout time.Duration
	// MaxHeap bounds the Go heap (bytes) the searches may grow the process
	// to; 0: no limit. Past it the searches stop and what they did not
	// decide is unknown. The heap is sampled every few milliseconds, so set
	// it with headroom below the memory really available (the command line
	// also sets runtime/debug.SetMemoryLimit to it).
	MaxHeap uint64
	// Parallelism bounds the partitions checked at once; 0 means GOMAXPROCS.
	Parallelism int

	// chunkMin overrides chunkOps (tests).
	chunkMin int
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Drift == 0:
		o.Drift = DefaultDrift
	case o.Drift == NoDrift:
		o.Drift = 0
	case o.Drift < 0 || o.Drift >= 1 || o.Drift != o.Drift:
		return o, fmt.Errorf("%w: drift %v not in [0, 1) (NoDrift for none)", ErrBadOptions, o.Drift)
	}
	if o.LivenessSlack == 0 {
		o.LivenessSlack = DefaultLivenessSlack
	}
	for _, d := range []struct {
		what string
		v    time.Duration
	}{{"wait bound", o.WaitBound}, {"loss bound", o.LossBound}, {"hand-off bound", o.Handoff},
		{"call slack", o.CallSlack}, {"liveness slack", o.LivenessSlack}, {"timeout", o.Timeout}} {
		if d.v < 0 {
			return o, fmt.Errorf("%w: negative %s %v", ErrBadOptions, d.what, d.v)
		}
	}
	if o.Bypass < 0 {
		return o, fmt.Errorf("%w: negative bypass %d", ErrBadOptions, o.Bypass)
	}
	if b := o.Footprint; b != nil && (b.Base < 0 || b.PerHold < 0 || b.PerWaiter < 0 || b.PerUnknown < 0 || b.BuriedFor < 0) {
		return o, fmt.Errorf("%w: footprint bound %+v: every term must be >= 0", ErrBadOptions, *b)
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.chunkMin <= 0 {
		o.chunkMin = chunkOps
	}
	return o, nil
}
