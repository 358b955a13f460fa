package lock

import (
	"errors"
	"fmt"
	"time"
)

// TakenError is the error of a TryAcquire, or of an Acquire WithRetry
// whose strategy gave up, that found the lock held, or free with others
// in line: RetryAfter is the holder's remaining TTL as Redis said it, a
// hint for when to try again (0 when the lock was free and others were
// first in line). It wraps ErrNotAcquired; get it with errors.As.
type TakenError struct {
	Op, Key    string
	RetryAfter time.Duration
}

func (e *TakenError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s %q: %v (held, %v left)", e.Op, e.Key, ErrNotAcquired, e.RetryAfter)
	}
	return fmt.Sprintf("%s %q: %v (others in line)", e.Op, e.Key, ErrNotAcquired)
}

// Unwrap makes errors.Is(err, ErrNotAcquired) hold.
func (e *TakenError) Unwrap() error { return ErrNotAcquired }

// Sentinel errors. Every error the package returns wraps at most one of the
// outcome sentinels (ErrNotAcquired, ErrNotHeld, ErrUnknownOutcome,
// ErrReplicaAcks) so that callers can tell "surely not" from "maybe";
// transport errors that surely did not reach Redis wrap none of them.
var (
	// ErrNotAcquired: TryAcquire found the lock held (or other callers queued for it).
	ErrNotAcquired = errors.New("lock not acquired")
	// ErrNotHeld: a release or renew found the lease expired, taken by another
	// owner, already released, or already lost. The operation surely had no effect.
	ErrNotHeld = errors.New("lock not held")
	// ErrUnknownOutcome: the reply to an acquire, release or renew was lost
	// (timeout, reset, context deadline mid-command); the command may or may
	// not have taken effect. The error also wraps the cause.
	ErrUnknownOutcome = errors.New("lock operation outcome unknown")
	// ErrInvalid: bad input; the message names the field.
	ErrInvalid = errors.New("invalid argument")
	// ErrReplicaAcks: fewer replicas than Options.ReplicaAcks acknowledged the
	// acquire within ReplicaTimeout; the lock was released (best effort).
	ErrReplicaAcks = errors.New("not enough replica acknowledgements")
	// ErrLost is the cause of a lease's Context when the lease was lost: its
	// validity deadline passed without a successful renewal, or a renewal found
	// it no longer held.
	ErrLost = errors.New("lease lost")
	// ErrReleased is the cause of a lease's Context after Release.
	ErrReleased = errors.New("lease released")
	// ErrClosed: the Client was closed; it acquires nothing more. An
	// acquire refused so also wraps ErrNotAcquired (nothing was taken).
	ErrClosed = errors.New("lock client closed")
	// ErrUpgrade: an owner that holds a read-write lock for reading asked
	// to write. A read hold cannot become a write hold: two readers that
	// both tried would wait for each other for good. Release the read
	// holds and acquire for writing. An error that wraps it wraps
	// ErrNotAcquired too (nothing was taken).
	ErrUpgrade = errors.New("read hold cannot be upgraded to a write hold")
)
