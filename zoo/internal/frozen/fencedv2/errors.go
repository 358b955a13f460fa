package fencedv2

import "errors"

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
)
