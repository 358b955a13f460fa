package chaos

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

// pubsubResetFault kills the subscriptions a waiter hears its hand-off
// on, and nothing else: the master drops its pub/sub connections while it
// refuses SUBSCRIBE (nemesis.PubSubReset), every half TTL for 3 TTLs.
// Unlike reset, the clients' commands pass, so a waiter that still
// believes in its dead subscription sleeps through its hand-off while it
// could poll. It acts on the master every
// scenario shares, so it runs alone; on a deployment lockproof does not
// run, it would change the operator's ACL.
func pubsubResetFault() Fault {
	return Fault{Name: contract.FaultPubSubReset,
		Simulate: simPubSubReset, SimDoc: "the lock's node drops its pub/sub connections while it refuses SUBSCRIBE, every TTL/2 for 3 TTLs, and the clients' connections dialed in the first TTL/10 after each drop open TTL/2 late (subscriptions die, commands pass)",
		Topologies: both, Doc: "the master drops its pub/sub connections while it refuses SUBSCRIBE, every TTL/2 for 3 TTLs, and the clients' reconnections in the first TTL/10 take TTL/2 to open (subscriptions die, commands pass)",
		Matrix: true, Scope: ScopeServers, Linger: true,
		// On a cluster nobody subscribes but a lock that does (on the
		// Sentinel topology the Sentinels' own subscriptions are on the
		// master), so for most locks it would strike nothing: it runs
		// there when named.
		MatrixOn: []string{contract.TopologySentinel},
		Needs: func(k env.Kind) error {
			if k == env.BYO {
				return ErrCannotChangeACL
			}
			return nil
		},
		strike: func(s *striking) (armed, error) {
			m, err := subscribedNode(s)
			if err != nil {
				return armed{}, fmt.Errorf("pubsub-reset: %w", err)
			}
			// Every client's reconnection right after the drop (the
			// first TTL/10) takes half a TTL (a lost SYN), longer than a
			// hand-off lease: a lock whose waiters sleep through
			// go-redis's re-dial misses its hand-offs. Later dials (a
			// command's) pass: a waiter that polls is served in turn.
			var links []*env.Links
			for _, c := range s.wl.Clients {
				links = append(links, c.Links)
			}
			return armed{fault: &nemesis.PubSubReset{Node: m.Upstream, Auth: s.env.Topology().Auth, Every: s.sc.TTL / 2, Refuse: s.sc.TTL / 5,
				Links: links, Stall: s.sc.TTL / 2, StallWithin: s.sc.TTL / 10}, window: 3 * s.sc.TTL}, nil
		}}
}

// ErrCannotChangeACL: lockproof does not change the ACL of a
// bring-your-own deployment (pubsub-reset refuses SUBSCRIBE through it).
var ErrCannotChangeACL = errors.New("lockproof does not change the ACL of a bring-your-own deployment, which pubsub-reset needs")

// subscribedNode is the node whose subscriptions pubsub-reset kills:
// Sentinel's master, or on a cluster the node with the most clients in
// pub/sub mode (a cluster client subscribes on the node of its channel's
// slot, which the harness does not know of a lock).
func subscribedNode(s *striking) (env.Node, error) {
	topo := s.env.Topology()
	if len(topo.Cluster) == 0 {
		return env.Master(s.ctx, topo)
	}
	best, most := topo.Cluster[0], int64(-1)
	for _, n := range topo.Cluster {
		k, err := nemesis.PubSubClients(s.ctx, topo.Auth, n.Upstream)
		if err != nil {
			return env.Node{}, err
		}
		if k > most {
			best, most = n, k
		}
	}
	return best, nil
}

// simPubSubReset is the real-time pubsub-reset (nemesis.PubSubReset,
// with the matrix's bounds) on the simulated network: every TTL/2 for 3
// TTLs the lock's node refuses SUBSCRIBE for TTL/5 and drops its pub/sub
// connections, and the connections dialed in the first TTL/10 after each
// drop (the clients' reconnections) have their requests held back TTL/2.
// Commands on open connections pass all along. It bites when it dropped
// a subscription.
func simPubSubReset(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	name := contract.FaultPubSubReset + " " + addr
	every, refuse := s.TTL/2, s.TTL/5
	stop, done := make(chan struct{}), make(chan struct{})
	// sleep waits d, false when the window closes first.
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	rounds := func() {
		defer close(done)
		for {
			s.Net.RefuseSubscribe(addr, true)
			s.Net.StallDials(s.TTL/10, s.TTL/2)
			s.Net.DropSubscribed(addr)
			ok := sleep(refuse)
			s.Net.RefuseSubscribe(addr, false)
			if !ok || !sleep(every-refuse) {
				return
			}
		}
	}
	return s.onNet(name, func() { go rounds() },
		func() { close(stop); <-done; s.Net.RefuseSubscribe(addr, false) },
		func(b, a simnet.Counts) string {
			return fmt.Sprintf("%s: %d pub/sub connections dropped, %d SUBSCRIBE refused, %d new connections held back %v", name,
				a.PubSubDropped-b.PubSubDropped, a.Refused-b.Refused, a.Stalled-b.Stalled, s.TTL/2)
		})
}
