// Package history records and reads the operations of a lockproof run.
//
// A history is a JSON Lines file, one operation per line, in the format that
// docs/DESIGN.md fixes as a contract: other tools read and write it.
package history

// Kind is what an operation did: the "op" field of a history line.
type Kind string

// The operation kinds of the history contract.
const (
	Acquire Kind = "acquire"
	Release Kind = "release"
	Renew   Kind = "renew"
	Write   Kind = "write"
	Read    Kind = "read"
	// Fault is a fault window (with Name); it is shown, never checked.
	Fault Kind = "fault"
	// Lost is a lease's loss notice: the instant the lock told its user
	// (locker.Lease.Lost closed) that the lease is gone. Its call is that
	// instant; it carries the lease it speaks of (Lease) when known. The
	// claims property reads it; the models never see it.
	Lost Kind = "lost"
	// Close is a client closing its lock handle (locker.Locker's Close):
	// from its return on, the handle grants no lease, and the call itself
	// returns within its context (Deadline). A client name is one handle:
	// a client that closed does not open again under the same name. The
	// calls property reads it; the models never see it.
	Close Kind = "close"
	// Inspect is a client asking the lock who holds the key
	// (locker.Inspector's Inspect, package lock's Inspect): Held when the
	// lock said someone holds it, Holder the client it named (absent when
	// it named none), Token the holder's fence, HoldCount the holder's
	// holds. Holds is a client asking the lock how many holds it has on
	// the key itself (HoldsOf): HoldCount. Both change nothing; the lease
	// property holds the answers to the history (rules inspect-holder,
	// inspect-free, hold-count); the models never see them.
	Inspect Kind = "inspect"
	Holds   Kind = "holds"
	// Footprint is a client's sample of what the lock keeps in Redis for
	// the key (locker.Footprinter): Records, the hash fields, set members
	// and string keys of the lock's keys, and Bytes, their length. It
	// changes nothing; the footprint property holds it to the bound the
	// lock states for what is alive (holds, waiters, calls of unknown
	// outcome); the models never see it.
	Footprint Kind = "footprint"
	// TTL is a client asking its lock's server how long the lease it names
	// (Lease) is still valid (locker.ServerClaimer, package lock's
	// TTLLeft): ValidUntil, on an ok ttl op, is its call plus the time the
	// server said was left (absent: it said none). A fail is the server
	// saying the lease is not held. It changes nothing; the claims
	// property holds the answer as a claim (rules claim-overlap and
	// released-claim); the models never see it.
	TTL Kind = "ttl"
)

// opKinds are the contract's ops, in its order: the one list the
// decoder (kindOf) and the validation (kindBit, kindList) read.
func opKinds() [12]Kind {
	return [12]Kind{Acquire, Release, Renew, Write, Read, Fault, Lost, Close, Inspect, Holds, Footprint, TTL}
}

// Mode is the kind of hold of a lease op (the "mode" field).
type Mode string

// The modes of the history contract.
const (
	// ModeRead is a read hold of a read-write lock: read holds may
	// overlap each other, never a write hold.
	ModeRead Mode = "read"
	// ModeWrite is a write hold of a read-write lock: it overlaps no other
	// client's hold.
	ModeWrite Mode = "write"
	// ModePermits is a semaphore's hold of Permits permits: at no instant
	// more than Capacity permits are surely held.
	ModePermits Mode = "permits"
)

// Result is the outcome of an operation: the "result" field.
type Result string

// The results of the history contract.
const (
	// OK: the operation took effect (a lock op succeeded, a resource op was accepted).
	OK Result = "ok"
	// Fail: a lock operation that surely did not take effect.
	Fail Result = "fail"
	// Rejected: a resource operation refused (a stale fencing token).
	Rejected Result = "rejected"
	// Unknown: the operation may or may not have taken effect.
	Unknown Result = "unknown"
)

// Op is one operation of a history. It is a flat value (no pointers) so that
// histories of millions of operations stay cheap; the Has* fields and
// Completed say whether an optional field of the contract was present.
type Op struct {
	Client string // "client"
	Kind   Kind   // "op"
	Key    string // "key": the lock key; resource ops name the key of their lock
	Name   string // "name": fault ops only
	// Evidence ("evidence"): fault ops only: what the fault did, in one
	// sentence (a paused client's calls held, the node promoted, the
	// process killed), so that a history shows that its fault bit.
	Evidence string

	Call      int64 // "call": invocation time, ns on the history's one monotonic clock
	Return    int64 // "return": completion time, meaningful only when Completed
	Completed bool  // false: "return" absent or null, the op never completed

	Result    Result // "result"
	TTLMillis int64  // "ttl_ms": lease length asked for; 0: no expiry

	Token    uint64 // "token": fencing token, meaningful only when HasToken
	HasToken bool

	Value    string // "value": written value (write) or observed value (read)
	HasValue bool
	Prev     string // "prev": on a write, the value its writer read under the same lease
	HasPrev  bool

	// Wait ("wait": true) marks a blocking acquire: it waited in line until
	// it got the lock or gave up, rather than making one attempt. Only
	// acquire ops carry it; the waiter-liveness rule reads it.
	Wait bool

	// ValidUntil ("valid_until"), meaningful only when HasValid: the
	// instant, on the history's clock, until which the lock told its user
	// the lease is valid (locker.Claimer), as read right after an ok
	// acquire or renew, after a release that did not surely end the lease,
	// or by the check before a write; on an ok ttl op, its call plus the
	// time the lock's server said was left (locker.ServerClaimer). The
	// claims property holds the lock to it.
	ValidUntil int64
	HasValid   bool

	// Hold ("lease"): which hold of its client the op is about, a number
	// >= 1 unique per client (an acquire's own, and that of the hold a
	// renew, release, write, read or loss notice acts on); 0: not said.
	// A client's nested holds have numbers of their own, so a release of
	// one is not taken for a release of another.
	Hold uint64

	// InLine ("in_line"), meaningful only when HasInLine: on a blocking
	// acquire, the instant (history clock) by which the waiter was surely
	// in line, as its lock said (locker.InLine). The fairness property
	// judges a waiter only when it has one.
	InLine    int64
	HasInLine bool

	// Checked ("checked": true), on a write: its client checked right
	// before it that the lock still said the lease was valid (not lost,
	// before its claimed validity), as users without fencing do.
	Checked bool

	// Deadline ("deadline"), meaningful only when HasDeadline: the instant,
	// on the history's clock, at which the op's context expired (its
	// deadline, or the instant it was canceled). The calls property holds
	// a lock that promises to honour contexts to return by it.
	Deadline    int64
	HasDeadline bool
	// Held ("held": true), Holder ("holder") and HoldCount ("holds",
	// meaningful only when HasHolds): what an inspect or holds op was told
	// (see Inspect).
	Held      bool
	Holder    string
	HoldCount int64
	HasHolds  bool

	// Records ("records", meaningful only when HasRecords) and Bytes
	// ("bytes", meaningful only when HasBytes): what a footprint op
	// measured of the lock's keys (see Footprint).
	Records    int64
	HasRecords bool
	Bytes      int64
	HasBytes   bool

	// Mode ("mode"): the kind of hold an acquire asks for, and that a
	// release, renew or loss notice speaks of, on a lock that has more
	// than one: ModeRead or ModeWrite (a read-write lock), ModePermits (a
	// semaphore). Absent: an exclusive hold (a mutex). A key's lease ops
	// either all carry a mode or none do. Permits ("permits", >= 1, only
	// with ModePermits) is how many permits the hold is; Capacity
	// ("capacity", >= 1, only with ModePermits, on acquires) the
	// semaphore's N as the call knew it. The lease property judges a
	// key with modes by the rules rw-exclusion and permits.
	Mode     Mode
	Permits  int64
	Capacity int64

	// Line is the 1-based line the op was read from; 0 when not read from a file.
	Line int
}

// OpenEnded reports whether the op may take effect after its return, so
// that its window of effect has no end (docs/DESIGN.md, "Ops that count"):
// an op that never returned, and a release of unknown outcome. Its request
// may still be on its way when its caller gives up (a paused server runs
// it when it resumes, a slow link delivers it late), and a lock may make
// sure of it in the background (package lock undoes an owner's hold whose
// release was lost; the owner's later acquires re-enter that hold
// meanwhile, which a window ending at the release's return cannot
// explain). Other unknown ops keep their window, as the contract had it:
// a wider one only admits more orders, and no lock is known to need it.
func (o *Op) OpenEnded() bool {
	return !o.Completed || (o.Kind == Release && o.Result == Unknown)
}
