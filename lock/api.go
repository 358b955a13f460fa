package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// RenewFor extends the lease to ttl from now and makes ttl its TTL (the
// watchdog renews by it from then on). Like every renewal it never
// shortens the lock: a shorter ttl than the lock has left keeps the lock's
// expiry (another hold may need it), and only the lease's own ValidUntil
// is counted from ttl. Errors as Renew's; ttl must be at least MinTTL.
func (l *Lease) RenewFor(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return fmt.Errorf("renew: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("renew %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	if err := checkTTL("RenewFor ttl", ttl); err != nil {
		return fmt.Errorf("renew %q: %w", l.key, err)
	}
	return l.renew(ctx, ttl)
}

// TTLLeft returns how long the lock has left in Redis (PTTL), as long as
// this lease's own hold stands (its record, under its owner and fence);
// ErrNotHeld otherwise: also when the lease was released while another
// hold of its owner (an outer or nested one, a newer lease) stands. It is Redis's view,
// which can be longer than ValidUntil (ValidUntil allows for clock drift
// and counts from the acquire's start) but never describes a lock held by
// someone else.
func (l *Lease) TTLLeft(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, fmt.Errorf("ttl: lease is nil: %w", ErrInvalid)
	}
	if ctx == nil {
		return 0, fmt.Errorf("ttl %q: ctx is nil: %w", l.key, ErrInvalid)
	}
	reply, err := l.c.run(ctx, l.proto.ttl, []string{l.keys.Lock}, l.owner, strconv.FormatUint(l.fence, 10), l.id)
	if err != nil {
		return 0, fmt.Errorf("ttl %q: %w", l.key, err)
	}
	ms, _ := reply.(int64)
	if ms < 0 {
		return 0, fmt.Errorf("ttl %q: expired or taken by another owner: %w", l.key, ErrNotHeld)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// reportRelease calls Hooks.OnRelease for a Release that ended the lease
// and returns how long the lease was held.
func (l *Lease) reportRelease(err error) time.Duration {
	held := time.Since(l.born)
	if h := l.c.opts.Hooks.OnRelease; h != nil {
		h(l.key, held, err)
	}
	return held
}

// Info is what Inspect sees of a lock.
type Info struct {
	// Held: someone holds the lock; Owner, Holds and Fence describe the
	// holder, TTL how long the lock has left in Redis. Owner is the token
	// as Redis stores it: "<Client.ID>/<token>" unless the holder's
	// Client shares owners (Options.SharedOwners).
	Held  bool
	Owner string
	Holds int64
	Fence uint64
	TTL   time.Duration
	// Waiting is how many waiters are in line (dead ones not yet dropped
	// included).
	Waiting int64
	// Metadata is what the holder stored WithMetadata ("" for none, and
	// while a hand-off is not yet picked up).
	Metadata string
}

// HoldsOf returns how many holds owner (a WithOwner token, of this Client
// unless Options.SharedOwners) has on key's lock: 0 when another owner
// holds it, nobody does, or it was handed to owner and not yet picked up. It is an owner-checked "is it held by me"
// and hold count without a Lease (Redisson's isHeldByThread and
// getHoldCount), read atomically; it changes nothing.
func (c *Client) HoldsOf(ctx context.Context, key, owner string) (int64, error) {
	if c == nil || ctx == nil || key == "" || owner == "" {
		return 0, fmt.Errorf("holds %q: client, ctx, key and owner are required: %w", key, ErrInvalid)
	}
	reply, err := c.run(ctx, holdsScript, []string{RedisKeys(key).Lock}, c.token(owner))
	if err != nil {
		return 0, fmt.Errorf("holds %q: %w", key, err)
	}
	n, ok := reply.(int64)
	if !ok {
		return 0, fmt.Errorf("holds %q: unexpected reply %v", key, reply)
	}
	return n, nil
}

// Inspect returns the state of key's lock, read atomically: its holder,
// hold count, fence, time left, and the length of its queue. It changes
// nothing.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	if c == nil || ctx == nil || key == "" {
		return Info{}, fmt.Errorf("inspect %q: client, ctx and key are required: %w", key, ErrInvalid)
	}
	k := RedisKeys(key)
	reply, err := c.run(ctx, inspectScript, []string{k.Lock, k.Queue})
	if err != nil {
		return Info{}, fmt.Errorf("inspect %q: %w", key, err)
	}
	vals, _ := reply.([]any)
	if len(vals) != 6 {
		return Info{}, fmt.Errorf("inspect %q: unexpected reply %v", key, reply)
	}
	var in Info
	in.Metadata, _ = vals[5].(string)
	in.Owner, _ = vals[0].(string)
	in.Held = in.Owner != ""
	in.Holds, _ = vals[1].(int64)
	if f, _ := vals[2].(string); f != "" {
		_, _ = fmt.Sscan(f, &in.Fence)
	}
	if ms, _ := vals[3].(int64); ms > 0 {
		in.TTL = time.Duration(ms) * time.Millisecond
	}
	in.Waiting, _ = vals[4].(int64)
	return in, nil
}

// ForceUnlock frees key's lock whoever holds it, for an operator clearing a
// lock whose holder is known to be gone: the lock passes to the first
// waiter (hand-off lease, as a release), or is deleted. The fence counter
// is kept, so fences stay monotonic: the holder's lease is lost (at its
// next renewal, or its validity deadline), and its late writes are
// refused by fenced resources. It reports whether it freed a lock. It
// reads the holder's fence, then frees the lock held under that fence
// (two round trips), so that its request landing late (after a lost
// reply: ErrUnknownOutcome) or twice never frees a later holder's lock.
func (c *Client) ForceUnlock(ctx context.Context, key string) (bool, error) {
	if c == nil || ctx == nil || key == "" {
		return false, fmt.Errorf("force-unlock %q: client, ctx and key are required: %w", key, ErrInvalid)
	}
	k := RedisKeys(key)
	keys := []string{k.Lock, k.Fence, k.Queue, k.QueueDeadlines}
	// First the fence of the hold to free (a read), then the free of that
	// hold: a request of this call that lands late or twice frees nothing
	// but the lock it saw.
	reply, err := c.run(ctx, forceUnlockScript, keys, k.Channel, "", c.boxed.handoff)
	if err != nil {
		return false, fmt.Errorf("force-unlock %q: %w", key, err)
	}
	vals, _ := reply.([]any)
	if len(vals) < 2 {
		return false, fmt.Errorf("force-unlock %q: unexpected reply %v", key, reply)
	}
	fence, _ := vals[1].(string)
	if fence == "" {
		return false, nil // nobody holds it
	}
	reply, err = c.run(ctx, forceUnlockScript, keys, k.Channel, fence, c.boxed.handoff)
	if err != nil {
		if outcomeUnknown(err) {
			return false, unknown(ctx, "force-unlock", key, err)
		}
		return false, fmt.Errorf("force-unlock %q: %w", key, err)
	}
	vals, _ = reply.([]any)
	if len(vals) == 0 {
		return false, fmt.Errorf("force-unlock %q: unexpected reply %v", key, reply)
	}
	held, _ := vals[0].(int64)
	if len(vals) > 1 {
		if msg, _ := vals[1].(string); msg != "" {
			c.notes.deliverLocal(k.Channel, msg)
		}
	}
	return held == 1, nil
}
