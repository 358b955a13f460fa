package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The modes of a hold (Lease.Mode).
const (
	// ModeExclusive is a hold of the mutex (Client.Acquire).
	ModeExclusive = "exclusive"
	// ModeRead is a read hold of a read-write lock (RWLock.RLock).
	ModeRead = "read"
	// ModeWrite is a write hold of a read-write lock (RWLock.Lock).
	ModeWrite = "write"
	// ModePermits is a semaphore's permits (Semaphore.Acquire).
	ModePermits = "permits"
)

// modePermits is the script's mode of a semaphore's hold ("p").
const modePermits = "p"

// Mode returns the kind of hold the lease is: ModeExclusive (the mutex),
// ModeRead, ModeWrite or ModePermits.
func (l *Lease) Mode() string {
	if l == nil {
		return ""
	}
	switch l.mode {
	case "r":
		return ModeRead
	case "w":
		return ModeWrite
	case modePermits:
		return ModePermits
	}
	return ModeExclusive
}

// Permits returns how many permits of a semaphore the lease holds (1 for
// any other hold).
func (l *Lease) Permits() int {
	if l == nil {
		return 0
	}
	return max(l.permits, 1)
}

// RWLock is a fenced read-write lock on one key: any number of read holds,
// or one write hold. Every hold is a Lease (TTL, watchdog, fence, Lost,
// Context, Release) with an expiry of its own: a crashed reader's hold ends
// within its TTL and ends nothing else.
//
// Fences come from one counter per key, as the mutex's do: a write hold's
// fence is above every fence handed out before it (reads included), so a
// fencing resource refuses a stale writer's write and a stale reader's
// alike. Nested holds (Lease.Reenter, or an acquire WithOwner by an owner
// that holds the lock) share the fence of the owner's write hold (or of
// its newest read hold).
//
// Waiters queue in one FIFO line across modes: a reader that arrives while
// a writer waits queues behind it, so a stream of readers does not starve
// a writer; readers at the front of the line are admitted together.
// Reentry is immediate and skips the line: write then write, write then
// read (a downgrade: release the write hold after and the read one stays),
// read then read. Read then write is refused with ErrUpgrade.
//
// A read-write lock's keys are apart from every mutex's and semaphore's
// (Keys: "{key}:rw", ...).
type RWLock struct {
	c    *Client
	key  string
	keys Keys
}

// RWLock returns the read-write lock on key.
func (c *Client) RWLock(key string) *RWLock {
	return &RWLock{c: c, key: key, keys: keysOf(key, ":rw")}
}

// Keys returns the Redis names the lock uses.
func (rw *RWLock) Keys() Keys { return rw.keys }

// Key returns the lock's key, as given.
func (rw *RWLock) Key() string { return rw.key }

// Lock waits in line for a write hold, as Client.Acquire waits for the
// mutex (options, errors and unknown outcomes alike).
func (rw *RWLock) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.c.acquireShared(ctx, rw.key, rw.keys, "w", 1, 0, true, opts)
}

// TryLock makes one attempt at a write hold: ErrNotAcquired (a
// *TakenError) when any hold stands or anybody waits.
func (rw *RWLock) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.c.acquireShared(ctx, rw.key, rw.keys, "w", 1, 0, false, opts)
}

// RLock waits in line for a read hold: it is admitted when no write hold
// stands and no writer waits ahead of it.
func (rw *RWLock) RLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.c.acquireShared(ctx, rw.key, rw.keys, "r", 1, 0, true, opts)
}

// TryRLock makes one attempt at a read hold: ErrNotAcquired (a
// *TakenError) when a write hold stands or a writer waits.
func (rw *RWLock) TryRLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.c.acquireShared(ctx, rw.key, rw.keys, "r", 1, 0, false, opts)
}

// Inspect returns the live holds and the length of the line.
func (rw *RWLock) Inspect(ctx context.Context) (SharedInfo, error) {
	return rw.c.inspectShared(ctx, rw.key, rw.keys)
}

// HoldsOf counts owner's live holds (read and write).
func (rw *RWLock) HoldsOf(ctx context.Context, owner string) (int64, error) {
	return rw.c.sharedHolds(ctx, rw.key, rw.keys, owner)
}

// Semaphore is N permits on one key. Each acquire takes k permits as one
// hold, a Lease with its own TTL, watchdog, fence and loss notice, so a
// crashed holder's permits come back within its TTL. Waiters queue FIFO: a
// waiter asking for k permits is admitted when the permits out, those
// asked for by the waiters ahead of it, and k fit in N; a later waiter
// asking for fewer does not overtake it.
//
// N belongs to the Semaphore value, not to Redis: every call is judged by
// its own N. Changing N while permits are out (a Semaphore with another N
// on the same key) is defined so: no permit out is revoked; a call under
// the new N is admitted only when the permits out, those ahead of it and
// its own fit in the new N. Lowering N therefore admits nobody until
// enough permits come back; raising it admits at once. Processes that
// disagree on N each get their own bound, so give every process the same.
//
// Permits are not reentrant (Lease.Reenter refuses a permit lease), and
// every hold has a fence of its own, above all fences handed out before it.
// A semaphore's keys are apart from every mutex's and read-write lock's
// (Keys: "{key}:sem", ...).
type Semaphore struct {
	c    *Client
	key  string
	keys Keys
	n    int
}

// Semaphore returns the semaphore of n permits on key; n must be at least 1.
func (c *Client) Semaphore(key string, n int) (*Semaphore, error) {
	if n < 1 {
		return nil, fmt.Errorf("semaphore %q: n = %d permits, want at least 1: %w", key, n, ErrInvalid)
	}
	return &Semaphore{c: c, key: key, keys: keysOf(key, ":sem"), n: n}, nil
}

// Keys returns the Redis names the semaphore uses.
func (s *Semaphore) Keys() Keys { return s.keys }

// Key returns the semaphore's key, as given.
func (s *Semaphore) Key() string { return s.key }

// N returns the semaphore's capacity.
func (s *Semaphore) N() int { return s.n }

// Acquire waits in line for k permits (1 <= k <= N), as Client.Acquire
// waits for the mutex.
func (s *Semaphore) Acquire(ctx context.Context, k int, opts ...AcquireOption) (*Lease, error) {
	if k < 1 || k > s.n {
		return nil, fmt.Errorf("semaphore %q: acquire %d permits of %d: %w", s.key, k, s.n, ErrInvalid)
	}
	return s.c.acquireShared(ctx, s.key, s.keys, modePermits, k, s.n, true, opts)
}

// TryAcquire makes one attempt at k permits: ErrNotAcquired (a
// *TakenError) when they do not fit or anybody waits ahead.
func (s *Semaphore) TryAcquire(ctx context.Context, k int, opts ...AcquireOption) (*Lease, error) {
	if k < 1 || k > s.n {
		return nil, fmt.Errorf("semaphore %q: try-acquire %d permits of %d: %w", s.key, k, s.n, ErrInvalid)
	}
	return s.c.acquireShared(ctx, s.key, s.keys, modePermits, k, s.n, false, opts)
}

// Inspect returns the live holds and the length of the line.
func (s *Semaphore) Inspect(ctx context.Context) (SharedInfo, error) {
	return s.c.inspectShared(ctx, s.key, s.keys)
}

// SharedInfo is what Inspect sees of a read-write lock or a semaphore.
type SharedInfo struct {
	// Holds are the live holds, ordered by id.
	Holds []HoldInfo
	// Waiting is how many calls are in line.
	Waiting int64
}

// Permits returns the permits (or holds) out: the sum of Holds' permits.
func (i SharedInfo) Permits() int {
	n := 0
	for _, h := range i.Holds {
		n += h.Permits
	}
	return n
}

// HoldInfo is one live hold of a read-write lock or a semaphore.
type HoldInfo struct {
	Owner    string        // as Redis stores it ("<Client.ID>/<token>")
	Mode     string        // ModeRead, ModeWrite or ModePermits
	Permits  int           // 1 but for a semaphore
	Fence    uint64        // the hold's fence
	TTL      time.Duration // how long it has left in Redis
	Metadata string        // WithMetadata's
}

// acquireShared is a shared kind's acquire: mode "r", "w" or "p", k
// permits of n (a semaphore's), waiting in line (wait) or not.
func (c *Client) acquireShared(ctx context.Context, key string, keys Keys, mode string, k, n int, wait bool, opts []AcquireOption) (*Lease, error) {
	return c.acquireKind(ctx, key, keys, &sharedProto, mode, k, n, wait, opts)
}

// inspectShared reads a shared kind's holds.
func (c *Client) inspectShared(ctx context.Context, key string, keys Keys) (SharedInfo, error) {
	if ctx == nil {
		return SharedInfo{}, fmt.Errorf("inspect %q: ctx is nil: %w", key, ErrInvalid)
	}
	reply, err := c.run(ctx, sharedInspectScript, []string{keys.Lock, keys.Queue})
	if err != nil {
		return SharedInfo{}, fmt.Errorf("inspect %q: %w", key, err)
	}
	vals, _ := reply.([]any)
	if len(vals) < 1 || (len(vals)-1)%7 != 0 {
		return SharedInfo{}, fmt.Errorf("inspect %q: unexpected reply %v", key, reply)
	}
	var info SharedInfo
	info.Waiting, _ = vals[0].(int64)
	for i := 1; i+7 <= len(vals); i += 7 {
		var h HoldInfo
		h.Owner, _ = vals[i+1].(string)
		m, _ := vals[i+2].(string)
		h.Mode = (&Lease{mode: m}).Mode()
		k, _ := vals[i+3].(int64)
		h.Permits = int(k)
		fs, _ := vals[i+4].(string)
		h.Fence, _ = strconv.ParseUint(fs, 10, 64)
		ms, _ := vals[i+5].(int64)
		h.TTL = time.Duration(ms) * time.Millisecond
		h.Metadata, _ = vals[i+6].(string)
		info.Holds = append(info.Holds, h)
	}
	return info, nil
}

// sharedHolds counts owner's live holds of a shared kind.
func (c *Client) sharedHolds(ctx context.Context, key string, keys Keys, owner string) (int64, error) {
	if ctx == nil {
		return 0, fmt.Errorf("holds %q: ctx is nil: %w", key, ErrInvalid)
	}
	reply, err := c.run(ctx, sharedHoldsScript, []string{keys.Lock}, c.token(owner))
	if err != nil {
		return 0, fmt.Errorf("holds %q: %w", key, err)
	}
	n, _ := reply.(int64)
	return n, nil
}
