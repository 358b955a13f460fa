// Package fencing provides resources that check fencing tokens, and unfenced
// ones for contrast.
//
// A fencing token is a number the lock service hands out with every lease,
// increasing from lease to lease (Kleppmann, "How to do distributed locking",
// 2016). A fenced resource remembers the token of the last write it accepted
// and refuses a write whose token is lower: a holder that was paused past its
// lease and wakes up with an old token cannot overwrite the work of the next
// holder. A write whose token equals the last accepted one is accepted only
// from the same owner: a failover that loses the lock's counter increment can
// hand one token to two owners, and the tie-break keeps them apart. Equal
// token and owner is accepted, so a retried write is idempotent.
//
// An unfenced resource accepts every write; it is what a lock without
// fencing protects, and the harness uses it to show what goes wrong.
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
	// ErrStaleToken: a fenced resource refused the write because it already
	// accepted a higher token, or the same token from another owner. The
	// write surely did not take effect (history result "rejected").
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

// Value is the state of a resource: the last accepted write.
type Value struct {
	// Value is the value written; "" when never written.
	Value string
	// Token and Owner are those of the last accepted write (0 and "" when
	// never written or written without a token).
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
// Read returns the last accepted write; its errors follow the same rules.
type Resource interface {
	Write(ctx context.Context, key string, w Write) error
	Read(ctx context.Context, key string) (Value, error)
}

// StaleError is the error of a refused write. It wraps ErrStaleToken.
type StaleError struct {
	Key string
	// Token and Owner of the refused write.
	Token uint64
	Owner string
	// CurrentToken and CurrentOwner are those of the last accepted write.
	CurrentToken uint64
	CurrentOwner string
}

// Error describes the refusal.
func (e *StaleError) Error() string {
	return fmt.Sprintf("write %q with token %d by %q: %v (accepted: token %d by %q)",
		e.Key, e.Token, e.Owner, ErrStaleToken, e.CurrentToken, e.CurrentOwner)
}

// Unwrap returns ErrStaleToken.
func (e *StaleError) Unwrap() error { return ErrStaleToken }

// accepts reports whether a fenced resource whose last accepted write is cur
// accepts w. It is the rule the Redis script implements too.
func accepts(cur Value, w Write) bool {
	if !cur.Written {
		return true
	}
	if w.Token != cur.Token {
		return w.Token > cur.Token
	}
	return w.Owner == cur.Owner
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
