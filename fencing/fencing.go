// Package fencing provides resources that check fencing tokens, and unfenced
// ones for contrast.
//
// A fencing token is a number the lock service hands out with every lease,
// increasing from lease to lease (Kleppmann, "How to do distributed locking",
// 2016). A fenced resource keeps a fence: the highest token it has accepted
// and that token's owner. It refuses an op whose token is lower: a holder that
// was paused past its lease and wakes up with an old token cannot overwrite
// the work of the next holder. An op whose token equals the fence is accepted
// only from the fence's owner: a failover that loses the lock's counter
// increment can hand one token to two owners, and the tie-break keeps them
// apart. Equal token and owner is accepted, so a retried op is idempotent.
//
// Reads are fenced too (ReadFenced): an accepted fenced read raises the fence
// to its token without changing the value. Fencing writes alone does not
// protect a read-modify-write: a holder paused between its read and its write
// can wake after the next holder read but before it wrote; its late write
// still carries the highest token seen, is accepted, and the next holder's
// write then erases it (a lost update). With fenced reads the next holder's
// read raises the fence and the late write is refused.
//
// An unfenced resource accepts every op; it is what a lock without fencing
// protects, and the harness uses it to show what goes wrong.
//
// Resources do not check read-modify-write: a write records no expectation of
// the previous value. Lost updates are what the checker looks for in the
// history (the "prev" field); a resource that refused them would hide them.
package fencing

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrStaleToken: a fenced resource refused the write or fenced read
	// because it already accepted a higher token, or the same token from
	// another owner. The op surely did not take effect (history result
	// "rejected").
	ErrStaleToken = errors.New("fencing: stale token")
	// ErrUnknownOutcome: the request may or may not have taken effect (a
	// timeout or a connection lost after sending). History result "unknown".
	ErrUnknownOutcome = errors.New("fencing: unknown outcome")
	// ErrInvalid: bad input (empty key, empty owner, missing client, ...).
	ErrInvalid = errors.New("fencing: invalid input")
)

// Write is one write to a resource.
type Write struct {
	// Token is the fencing token of the writer's lease.
	Token uint64
	// NoToken marks a write from a lock without fencing: Token is ignored.
	// Fenced resources refuse such writes with ErrInvalid; unfenced ones
	// accept them and store token 0.
	NoToken bool
	// Owner names the writer (the lease owner). Required by fenced resources.
	Owner string
	// Value is the new value of the resource.
	Value string
}

// Value is the state of a resource: the last accepted write's value and the
// fence.
type Value struct {
	// Value is the value written; "" when never written.
	Value string
	// Token and Owner are the fence: those of the last accepted write or
	// fenced read, which on a fenced resource carries the highest token
	// accepted so far (0 and "" when nothing was accepted, or when the last
	// write came without a token). An unfenced resource keeps those of the
	// last write.
	Token uint64
	Owner string
	// Written is false when no write was ever accepted for the key.
	Written bool
}

// Resource is a store of values, one per key, guarded by a lock on the same
// key. Implementations are safe for concurrent use.
//
// Write returns nil when the write was accepted, an error wrapping
// ErrStaleToken when it was refused for its token, one wrapping
// ErrUnknownOutcome when it may or may not have taken effect, one wrapping
// ErrInvalid for bad input, and any other error when it surely did not take
// effect (for example a context that was done before anything was sent).
//
// ReadFenced is the read of a holder with a fencing token: on a fenced
// resource it is accepted under the same rule as a write (token above the
// fence, or equal to it with the same owner) and then raises the fence to
// (token, owner) without changing the value; a stale one is refused with
// ErrStaleToken and changes nothing. It returns the state after the read.
// Owner is required (ErrInvalid when empty). An unfenced resource ignores the
// token and owner: its ReadFenced is Read.
//
// Read is the read of a holder without a fencing token (a lock without
// fencing), or an inspection: it checks and changes nothing, and so does not
// protect a read-modify-write on a fenced resource. Its errors, and those of
// ReadFenced, follow the rules of Write.
type Resource interface {
	Write(ctx context.Context, key string, w Write) error
	ReadFenced(ctx context.Context, key string, token uint64, owner string) (Value, error)
	Read(ctx context.Context, key string) (Value, error)
}

// StaleError is the error of a refused write or fenced read. It wraps
// ErrStaleToken.
type StaleError struct {
	// Op is "write" or "read".
	Op  string
	Key string
	// Token and Owner of the refused op.
	Token uint64
	Owner string
	// CurrentToken and CurrentOwner are the fence that refused it.
	CurrentToken uint64
	CurrentOwner string
}

// Error describes the refusal.
func (e *StaleError) Error() string {
	return fmt.Sprintf("%s %q with token %d by %q: %v (fence: token %d by %q)",
		e.Op, e.Key, e.Token, e.Owner, ErrStaleToken, e.CurrentToken, e.CurrentOwner)
}

// Unwrap returns ErrStaleToken.
func (e *StaleError) Unwrap() error { return ErrStaleToken }

// accepts reports whether a fenced resource whose fence is cur (set: false
// when it accepted nothing yet) accepts an op with token and owner. It is
// the rule the Redis scripts implement too.
func accepts(cur Value, set bool, token uint64, owner string) bool {
	if !set {
		return true
	}
	if token != cur.Token {
		return token > cur.Token
	}
	return owner == cur.Owner
}

// checkWrite validates the input of a write.
func checkWrite(key string, w Write, fenced bool) error {
	if key == "" {
		return fmt.Errorf("write: key is empty: %w", ErrInvalid)
	}
	if !fenced {
		return nil
	}
	if w.NoToken {
		return fmt.Errorf("write %q: Write.NoToken set but a fenced resource needs a token: %w", key, ErrInvalid)
	}
	if w.Owner == "" {
		return fmt.Errorf("write %q: Write.Owner is empty: %w", key, ErrInvalid)
	}
	return nil
}

func checkRead(key string) error {
	if key == "" {
		return fmt.Errorf("read: key is empty: %w", ErrInvalid)
	}
	return nil
}

// checkReadFenced validates the input of a fenced read.
func checkReadFenced(key, owner string, fenced bool) error {
	if err := checkRead(key); err != nil {
		return err
	}
	if fenced && owner == "" {
		return fmt.Errorf("read %q: owner is empty: %w", key, ErrInvalid)
	}
	return nil
}
