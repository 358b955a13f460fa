package locker

import (
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/fencing"
)

// Opener builds one Locker for one workload client from its Deps.
type Opener func(d Deps) (Locker, error)

// Profile names the guarantees a lock claims. The matrix derives from it
// what each fault should do to the lock (docs/DESIGN.md, G1–G3), so that a
// lock that breaks a claim is reported "not as expected".
type Profile string

// The profiles a lock can claim.
const (
	// ProfileFenced: an owner-checked lease with fencing tokens. G1 holds on
	// one master under pauses, latency and partitions (a failover may lose
	// the lock); G2 holds under every fault, because the resource refuses
	// stale tokens; G3 holds (a crashed holder's lease expires).
	ProfileFenced Profile = "fenced"
	// ProfileLease: an owner-checked lease without fencing tokens (Redlock,
	// redsync, redislock, Redisson without fencing). G1 and G3 as for
	// ProfileFenced; G2 breaks when a paused holder wakes after its lease
	// passed on, because its late write is accepted.
	ProfileLease Profile = "lease"
	// ProfileNone: no claim; every verdict is reported, none is judged.
	ProfileNone Profile = "none"
)

// Needs is what a lock needs of the environment beyond Deps.Redis.
type Needs struct {
	// Redlock: the lock runs on independent masters (Deps.Redlock, 3 of them).
	Redlock bool
	// Store: the lock runs on a consensus store, not on Redis
	// (contract.TopologyEtcd, contract.TopologyZooKeeper; Deps.Store): it
	// runs on that topology alone, and Deps.Redis is nil. "" for Redis.
	Store string
	// Replicas: the lock asks this many replicas of its master to
	// acknowledge its writes (Redis's WAIT, as package lock's
	// ReplicaAcks), so it runs only on a master with at least that many
	// (every topology lockproof starts has one or more; the simulation
	// models one). 0 for a lock that asks none.
	Replicas int
}

// Entry is a lock the harness can run: its name (a directory and
// summary.json name), how to open it for one client, and what it claims.
type Entry struct {
	// Name is lowercase letters, digits and dashes, starting with a letter.
	Name string
	// Open builds the Locker of one workload client; required.
	Open Opener
	// Profile is what the lock claims; "" means ProfileFenced, the strongest
	// claim: a user lock is held to the guarantees until it says otherwise.
	Profile Profile
	// Needs is what the lock needs of the environment.
	Needs Needs
	// WaitBound is what the lock promises waiters (locker.Waiter): once no
	// other client may hold a key, a blocking acquire gets it within
	// WaitBound, with one waiter that died in line ahead of it, as the
	// lock states it (lock.Options.WaitBound for lockproof's). The checker
	// holds the lock to it (waiter liveness, docs/DESIGN.md); 0 promises
	// nothing and leaves waiters unchecked.
	WaitBound time.Duration
	// LossBound is what the lock promises about its loss notice
	// (Lease.Lost) for leases of ttl: once another client took the key, or
	// Redis lost it, a live holder's Lost closes within LossBound(ttl) (a
	// watchdog's next refused renewal, a validity deadline). The checker
	// holds the lock to it (claims, rule loss-notice). nil promises
	// nothing: a lock without a watchdog never learns of a loss.
	LossBound func(ttl time.Duration) time.Duration
	// Fair is what the lock promises about the order of its waiters
	// (locker.Waiter): nil promises none. The checker holds the lock to it
	// (the fairness property, and waiter liveness counting only the holds
	// ahead of a waiter).
	Fair *FairQueue
	// NotReentrant says the lock refuses its holder's acquire while the
	// holder's lease stands (a plain SET NX does: the key exists), so
	// that such an acquire is never a nested hold. The checker's lease
	// model then takes it for a new lease, which needs the holder's lease
	// to have possibly expired (checker.Options.NotReentrant). false: the
	// holder's acquire may nest, as a reentrant lock's does. A lock whose
	// leases are locker.Reentrant must leave it false.
	NotReentrant bool
	// Doc is one line saying what the lock is (shown by the CLI and reports).
	Doc string
	// Predict states what the lock is known to do under fault, beyond
	// what its Profile claims: it gets the prediction the matrix makes
	// from the profile (for a built-in lock, lockproof's expectation
	// table) and returns it amended. A variant known to break its lease
	// under pause-client says so (p.Set(contract.WantViolated,
	// contract.PropLease); p.Because("...")): the break is then "as
	// expected" in its cell, instead of failing the whole run. Nil keeps
	// the profile's prediction.
	Predict func(fault string, p Prediction) Prediction
	// FaultPoint is where a client fault (pause-client, crash-client)
	// strikes the lock in the matrix: right after the reply to one of its
	// commands (After "get"), right before one is sent (Before
	// "pexpire"), or at a point of the workload (contract.LeaseCheckPoint).
	// Nil, or the zero Point for a fault, takes the profile's: a pause
	// right after the holder's lease check for a lock without fencing
	// (where its late write is stale), the fault's own moment for a fenced
	// one (its late write is refused wherever the pause lands).
	FaultPoint func(fault string) contract.Point
	// Decisive is the cheapest scenario that shows what the lock is
	// known for: the fault under which the property breaks (or, for a
	// correct lock, holds where the others break). The detection run
	// (lockproof detect) measures it over seeds. Nil: none.
	Decisive *Decisive
	// Calls is what the lock promises its callers about the calls
	// themselves: that each returns within its context, and that a
	// closed Locker grants nothing. The checker holds the lock to it (the
	// calls property); nil promises nothing and leaves the property n/a.
	Calls *CallContract
	// Footprint is what the lock promises about what it keeps in Redis
	// (Footprinter): nil promises nothing, the harness samples nothing,
	// and the footprint property is n/a.
	Footprint *FootprintBound
	// Handoff is what a lock that hands itself to its head of line
	// promises about how soon: with no fault under way, a live waiter
	// in line when a release freed the lock is granted within
	// Handoff.Within of the release's return (the promptness property,
	// docs/DESIGN.md). A lock whose waiters are served by their own polls
	// states none (nil): the property is n/a.
	Handoff *HandoffBound
	// Resources, when set, builds the resources a workload client reads
	// and writes through on the resource Redis rdb, every key under
	// prefix: fenced for leases with a fencing token, unfenced for leases
	// without (a lock shipped with a fencing store of its own, or an old
	// version of one). Nil: package fencing's NewRedis and
	// NewUnfencedRedis.
	Resources func(rdb redis.UniversalClient, prefix string) (fenced, unfenced fencing.Resource, err error)

	_ struct{} // entries are built with field names
}

// CallContract is a lock's promise about its calls (Entry.Calls).
type CallContract struct {
	// Slack: every call, its Close through ContextCloser included,
	// returns within its context's deadline plus Slack (the rule
	// late-return); 0 promises nothing.
	Slack time.Duration
	// CloseRefuses: an acquire called after the Locker's Close returned is
	// refused (the rule closed-grant), rather than granting a lease whose
	// watchdog and hand-offs are gone with the Locker.
	CloseRefuses bool
}

// FootprintBound is a lock's promise about what it keeps in Redis for a
// key (Entry.Footprint): the records Footprinter.Footprint measures stay
// at most
//
//	Base + PerHold×holds + PerWaiter×waiters + PerUnknown×unknown
//
// where holds are the holds that may be alive, waiters the blocking
// acquires in line, and unknown the calls of unknown outcome (and the
// waiters that gave up in line) of the last BuriedFor, as the history
// shows them (docs/DESIGN.md, footprint). All terms >= 0.
type FootprintBound struct {
	Base, PerHold, PerWaiter, PerUnknown int
	// BuriedFor is how long an unknown call's records may stay (package
	// lock buries a call's id for an hour).
	BuriedFor time.Duration
}

// HandoffBound is a lock's promise of a prompt hand-off (Entry.Handoff):
// a release that frees the lock while waiters are in line passes it to
// the head, which is granted within Within of the release's return (a
// message and the head's pickup, a round trip or two), well before any
// waiter's own poll would come round.
type HandoffBound struct {
	Within time.Duration
}

// Decisive names a lock's decisive scenario (Entry.Decisive).
type Decisive struct {
	// Fault is the fault's name (contract.FaultPauseClient, ...).
	Fault string
	// Property is the property it decides (contract.PropLease, ...).
	Property string
}

// FairQueue is a lock's promise of a fair queue: a live waiter is served
// before everyone who joined the line after it, but for at most Bypass of
// them (0: strict FIFO).
type FairQueue struct {
	Bypass int
}

// validName reports whether name is lowercase letters, digits and dashes,
// starting with a letter: it names directories and summary.json rows.
func validName(name string) bool {
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return name != ""
}

// Registry is a set of locks by name. The zero value is empty and ready;
// it is not safe for concurrent Add.
type Registry struct {
	entries []Entry
}

// NewRegistry returns a registry of the given entries (see Add).
func NewRegistry(entries ...Entry) (*Registry, error) {
	r := &Registry{}
	for _, e := range entries {
		if err := r.Add(e); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers e. It refuses a bad or taken name and a nil Open.
func (r *Registry) Add(e Entry) error {
	if !validName(e.Name) {
		return fmt.Errorf("register lock: Name %q: want lowercase letters, digits and dashes, starting with a letter: %w", e.Name, ErrInvalid)
	}
	if e.Open == nil {
		return fmt.Errorf("register lock %q: Open is nil: %w", e.Name, ErrInvalid)
	}
	switch e.Profile {
	case "":
		e.Profile = ProfileFenced
	case ProfileFenced, ProfileLease, ProfileNone:
	default:
		return fmt.Errorf("register lock %q: Profile %q: want %q, %q or %q: %w", e.Name, e.Profile, ProfileFenced, ProfileLease, ProfileNone, ErrInvalid)
	}
	if e.WaitBound < 0 {
		return fmt.Errorf("register lock %q: WaitBound %v: must be >= 0: %w", e.Name, e.WaitBound, ErrInvalid)
	}
	if e.Fair != nil && e.Fair.Bypass < 0 {
		return fmt.Errorf("register lock %q: Fair.Bypass %d: must be >= 0: %w", e.Name, e.Fair.Bypass, ErrInvalid)
	}
	if b := e.Footprint; b != nil && (b.Base < 0 || b.PerHold < 0 || b.PerWaiter < 0 || b.PerUnknown < 0 || b.BuriedFor < 0) {
		return fmt.Errorf("register lock %q: Footprint %+v: every term must be >= 0: %w", e.Name, *b, ErrInvalid)
	}
	if e.Handoff != nil && e.Handoff.Within <= 0 {
		return fmt.Errorf("register lock %q: Handoff.Within %v: must be > 0: %w", e.Name, e.Handoff.Within, ErrInvalid)
	}
	if e.Needs.Store != "" && !contract.IsStore(e.Needs.Store) {
		return fmt.Errorf("register lock %q: Needs.Store %q: want one of %v: %w", e.Name, e.Needs.Store, contract.StoreTopologies(), ErrInvalid)
	}
	if e.Needs.Replicas < 0 {
		return fmt.Errorf("register lock %q: Needs.Replicas %d: must be >= 0: %w", e.Name, e.Needs.Replicas, ErrInvalid)
	}
	if e.Needs.Store != "" && e.Needs.Redlock {
		return fmt.Errorf("register lock %q: Needs: a lock on a consensus store (Store %q) needs no Redlock masters: %w", e.Name, e.Needs.Store, ErrInvalid)
	}
	if d := e.Decisive; d != nil && (d.Fault == "" || !slices.Contains(contract.PropertyIDs(), d.Property)) {
		return fmt.Errorf("register lock %q: Decisive {Fault %q, Property %q}: want a fault and one of %v: %w", e.Name, d.Fault, d.Property, contract.PropertyIDs(), ErrInvalid)
	}
	if _, ok := r.Lookup(e.Name); ok {
		return fmt.Errorf("register lock %q: the name is taken: %w", e.Name, ErrInvalid)
	}
	r.entries = append(r.entries, e)
	return nil
}

// Lookup returns the entry named name.
func (r *Registry) Lookup(name string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	for _, e := range r.entries {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Names returns the registered names in registration order.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.Name
	}
	return out
}

// Open opens a Locker of the named lock for one client.
func (r *Registry) Open(name string, d Deps) (Locker, error) {
	e, ok := r.Lookup(name)
	if !ok {
		known := r.Names()
		slices.Sort(known)
		return nil, fmt.Errorf("open lock %q: unknown name (known: %v): %w", name, known, ErrInvalid)
	}
	if e.Needs.Redlock && len(d.Redlock) == 0 {
		return nil, fmt.Errorf("open lock %q: it needs independent masters (Deps.Redlock): %w", name, ErrInvalid)
	}
	if e.Needs.Store != d.Store.Kind {
		if e.Needs.Store == "" {
			return nil, fmt.Errorf("open lock %q: it runs on Redis, not on the %s store (Deps.Store): %w", name, d.Store.Kind, ErrInvalid)
		}
		return nil, fmt.Errorf("open lock %q: it needs the %s store (Deps.Store), got %q: %w", name, e.Needs.Store, d.Store.Kind, ErrInvalid)
	}
	if e.Needs.Store != "" && len(d.Store.Endpoints) == 0 {
		return nil, fmt.Errorf("open lock %q: Deps.Store.Endpoints is empty: %w", name, ErrInvalid)
	}
	l, err := e.Open(d.Normalize())
	if err != nil {
		return nil, fmt.Errorf("open lock %q: %w", name, err)
	}
	return l, nil
}
