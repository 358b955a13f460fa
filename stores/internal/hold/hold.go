// Package hold is what the consensus stores' locks share: the two
// entries of a store's lock (as its users run it, and fenced), and one
// hold's lifetime: its end, its loss notice and its validity claim.
package hold

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// Pair describes a store's lock and its fenced variant.
type Pair struct {
	// Store is the lock's store (contract.TopologyEtcd, ...).
	Store string
	// Plain and Fenced name the two entries; PlainDoc and FencedDoc say
	// what each is.
	Plain, Fenced       string
	PlainDoc, FencedDoc string
	// Open opens a Locker of the lock, fenced or not.
	Open func(d locker.Deps, fenced bool) (locker.Locker, error)
	// Quorum says why every lease holds under the store's leader
	// faults (failover, minority-partition, pause-server, restart: the
	// leader back with its data wiped), and why liveness may break there.
	Quorum string
	// Lapse says why liveness may break once a holder stopped renewing
	// (pause-client, crash-client).
	Lapse string
}

// Entries are the pair's two entries: the lock as its users run it
// (ProfileLease: no fencing), decisive under pause-client, and fenced.
func (p Pair) Entries() []locker.Entry {
	return []locker.Entry{
		{Name: p.Plain, Profile: locker.ProfileLease, Needs: locker.Needs{Store: p.Store},
			Open: func(d locker.Deps) (locker.Locker, error) { return p.Open(d, false) },
			Doc:  p.PlainDoc, Predict: p.predict,
			Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource}},
		{Name: p.Fenced, Profile: locker.ProfileFenced, Needs: locker.Needs{Store: p.Store},
			Open: func(d locker.Deps) (locker.Locker, error) { return p.Open(d, true) },
			Doc:  p.FencedDoc, Predict: p.predict},
	}
}

// predict is what a store's locks are known to do beyond their profile's
// prediction: a consensus store commits on a quorum and keeps its leases
// across a change of leader, so its leader's faults break no lease; until
// a leader is elected nobody is served, and a lapsed lease outlives its
// TTL by the store's own granularity (liveness may break, by Quorum and
// Lapse).
//
// It reads the fault's traits (contract.Traits), not its name: a fault
// that takes the leader away (fails over, freezes or restarts it) is a
// leader's fault; one that stops a holder (pauses or kills its client)
// lets its lease lapse. A failover that also skews the promoted node's
// clock, and an outage that leaves a shard unserved, are Redis's alone
// and keep the profile's prediction.
func (p Pair) predict(fault string, pr locker.Prediction) locker.Prediction {
	t, _ := contract.Traits(fault)
	switch {
	case t.FailsOver && !t.SkewsPromoted, t.FreezesMaster, t.Restarts && !t.Unserved:
		q := locker.AllHold()
		q.Set(contract.WantMay, contract.PropLiveness)
		q.Because(p.Quorum)
		return q
	case t.PausesHolder, t.KillsClients:
		pr.Set(contract.WantMay, contract.PropLiveness)
		pr.Because(p.Lapse)
	}
	return pr
}

// Hold is one hold's lifetime: it ends when its caller gives it up (a
// release began, an acquire failed), is lost when the lock learns so (a
// refused renewal, a node gone), and is valid for its TTL from the last
// request answered.
type Hold struct {
	ttl      time.Duration
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	endOnce  sync.Once
	// from is when (the Locker's clock, UnixNano) the last grant or
	// renewal that was answered was sent: the store counted the TTL from
	// a later instant.
	from atomic.Int64
}

// New is a hold of ttl whose grant was sent at sent.
func New(ttl time.Duration, sent time.Time) *Hold {
	h := &Hold{ttl: ttl, lost: make(chan struct{}), stop: make(chan struct{})}
	h.from.Store(sent.UnixNano())
	return h
}

// Renewed notes a renewal sent at sent and answered.
func (h *Hold) Renewed(sent time.Time) { h.from.Store(sent.UnixNano()) }

// Lose closes Lost, unless the hold ended first: a hold its caller gave
// up is not lost, whatever a renewal says after.
func (h *Hold) Lose() {
	select {
	case <-h.stop:
		return
	default:
	}
	h.lostOnce.Do(func() { close(h.lost) })
}

// End ends the hold: its renewals stop, and from then on renew nothing
// the caller holds.
func (h *Hold) End() { h.endOnce.Do(func() { close(h.stop) }) }

// Ended is closed by End.
func (h *Hold) Ended() <-chan struct{} { return h.stop }

// Lost is closed by Lose.
func (h *Hold) Lost() <-chan struct{} { return h.lost }

// TTL is the hold's TTL.
func (h *Hold) TTL() time.Duration { return h.ttl }

// ValidUntil is the TTL from the last grant or renewal answered; zero
// once the hold ended or was lost.
func (h *Hold) ValidUntil() time.Time {
	select {
	case <-h.lost:
		return time.Time{}
	case <-h.stop:
		return time.Time{}
	default:
	}
	return time.Unix(0, h.from.Load()).Add(h.ttl)
}
