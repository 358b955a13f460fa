package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

// The network faults act on the proxies of about half the scenario's
// clients (isolate: of one holder) (Toxiproxy toxics with toxicity 1): what they did to those
// clients' traffic is their evidence (networkBite).

func noneFault() Fault {
	return Fault{Name: contract.FaultNone, Topologies: everywhere, Doc: "no fault: the baseline", Matrix: true}
}

// crowdFault is no fault but a crowd: 32 clients churn on one key, with
// brief sections (holds ≤5 ms, no nested hold, long work or renewal) and
// hardly a pause between attempts, so that the line is never empty,
// every hand-off has waiters behind it, and hand-offs follow each other
// faster than a hand-off lease (starvation: a waiter whose refresh is
// put off by each hand-off to another drops from the line; waiters
// dropped from the line; every waiter woken per hand-off). Operations may
// take 5 s: a waiter stays in line past the lock's queue deadline (a
// line of 31 at ~50 ms a section is 1.5 s).
//
// Not in the default matrix: the checker's search on a key that 32
// clients share with unknown outcomes straddling every hand-off is what
// issue 27 ("crowded keys") is about; a run names it.
func crowdFault() Fault {
	return Fault{Name: contract.FaultCrowd, Topologies: both, Doc: "no fault: 32 clients churn on one key (brief sections, holds ≤5 ms, thinking ≤2 ms, waits up to 5 s)",
		Shape:    WorkloadShape{Clients: 32, Hold: 5 * time.Millisecond, Think: 2 * time.Millisecond, OpTimeout: 5 * time.Second, Brief: true},
		Duration: 6 * time.Second}
}

func latencyFault() Fault {
	return Fault{Name: contract.FaultLatency, Topologies: everywhere, Doc: "20±10 ms added each way to half the clients' traffic, for half the run", Matrix: true,
		strike: func(s *striking) (armed, error) {
			f := cut(nemesis.Latency(fmt.Sprintf("latency %v", s.names), s.proxies, 20*time.Millisecond, 10*time.Millisecond), s.names)
			return armed{fault: f, window: s.sc.Duration / 2}, nil
		}}
}

// lateDeliveryFault is the simulation's late-delivery in real time: for
// 3 TTLs a share of every client's connections (5–20%, drawn by
// Toxiproxy per connection) holds what the client sends for the op
// timeout and a fifth to a half TTL more, so a request lands after its
// sender gave up, while the sender's cleanup or retry runs on another
// connection (go-redis drops a connection whose command timed out). The
// window lasts until the last held request has landed.
func lateDeliveryFault() Fault {
	return Fault{Name: contract.FaultLateDelivery, Topologies: both,
		Doc: "for 3 TTLs, 5–20% of the clients' connections hold their requests for the op timeout and a fifth to a half TTL more: they land after their sender gave up, while its cleanup or retry runs",
		strike: func(s *striking) (armed, error) {
			share := 0.05 + 0.15*s.rng.Float64()
			ot := cmp.Or(s.sc.Workload.OpTimeout, defaultShape().OpTimeout)
			by := ot + s.sc.TTL/5 + time.Duration(s.rng.Int64N(int64(s.sc.TTL*3/10)+1))
			var names []string
			var links []*env.Links
			for _, c := range s.wl.Clients {
				names, links = append(names, c.Name), append(links, c.Links)
			}
			label := fmt.Sprintf("%s %.1f%% by %v", contract.FaultLateDelivery, 100*share, by.Round(time.Millisecond))
			f := cut(nemesis.Late(label, nemesis.ClientProxies(links...), float32(share), by), names)
			return armed{fault: f, window: 3 * s.sc.TTL}, nil
		}}
}

func partitionFault() Fault {
	return Fault{Name: contract.FaultPartition, Topologies: everywhere, Doc: "half the clients cut off from Redis (their traffic held) for 3 TTLs", Matrix: true,
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Partition(fmt.Sprintf("partition %v", s.names), s.proxies), s.names), window: 3 * s.sc.TTL}, nil
		}}
}

func isolateFault() Fault {
	return Fault{Name: contract.FaultIsolate, Topologies: both,
		Doc: "a holder with its write ahead cut off from every Redis (its traffic held) for 3 TTLs or three op timeouts: one whose go-redis ignores ctx deadlines, so that a call that does not honour its own ctx runs past it",
		// The holder may come late in the run: the window counts from the
		// strike and the workload lingers after it, so that the calls cut
		// off come back (or fail to) while the run still records.
		Linger: true, Duration: 6 * time.Second,
		strike: func(s *striking) (armed, error) {
			// A holder whose calls only their own ctx can bound: its lock's
			// and its resource's calls must return within their deadlines
			// (the calls property), and its write must not land late.
			var cs []*workload.Client
			for _, c := range s.wl.Clients {
				if !c.CtxTimeouts() {
					cs = append(cs, c)
				}
			}
			var victim *workload.Client
			if err := bounded(s.ctx, func(ctx context.Context) error {
				var err error
				victim, err = workload.FirstHolding(ctx, cs)
				return err
			}); err != nil {
				return armed{}, fmt.Errorf("isolate: %w", err)
			}
			names := []string{victim.Name}
			f := nemesis.Partition(fmt.Sprintf("isolate %v", names), nemesis.ClientProxies(victim.Links))
			// Three op timeouts: a call that does not honour its ctx
			// comes back when the cut heals or its client's read timeout
			// strikes (the workload's is three op timeouts), two op
			// timeouts past its deadline.
			window := max(3*s.sc.TTL, 3*cmp.Or(s.sc.Workload.OpTimeout, time.Second))
			return armed{fault: cut(f, names), window: window, outer: true}, nil
		}}
}

func resetFault() Fault {
	// In the default matrix: a reset also drops the pub/sub connection a
	// waiter hears its hand-off on.
	return Fault{Name: contract.FaultReset, Topologies: both, Doc: "half the clients' connections (pub/sub included) reset for 3 TTLs", Matrix: true,
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Reset(fmt.Sprintf("reset %v", s.names), s.proxies), s.names), window: 3 * s.sc.TTL}, nil
		}}
}

// ErrCannotChangeACL: lockproof does not change the ACL of a
// bring-your-own deployment (pubsub-reset refuses SUBSCRIBE through it).
var ErrCannotChangeACL = errors.New("lockproof does not change the ACL of a bring-your-own deployment, which pubsub-reset needs")

// pubsubResetFault kills the subscriptions a waiter hears its hand-off
// on, and nothing else: the master drops its pub/sub connections while it
// refuses SUBSCRIBE (nemesis.PubSubReset), every half TTL for 3 TTLs.
// Unlike reset, the clients' commands pass, so a waiter that still
// believes in its dead subscription sleeps through its hand-off while it
// could poll (package lock's review defect 3). It acts on the master every
// scenario shares, so it runs alone; on a deployment lockproof does not
// run, it would change the operator's ACL.
func pubsubResetFault() Fault {
	return Fault{Name: contract.FaultPubSubReset, Topologies: both, Doc: "the master drops its pub/sub connections while it refuses SUBSCRIBE, every TTL/2 for 3 TTLs, and the clients' reconnections in the first TTL/10 take TTL/2 to open (subscriptions die, commands pass)",
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

func bandwidthFault() Fault {
	return Fault{Name: contract.FaultBandwidth, Topologies: both, Doc: "half the clients' traffic throttled to 1 KB/s for 3 TTLs",
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Bandwidth(fmt.Sprintf("bandwidth %v", s.names), s.proxies, 1), s.names), window: 3 * s.sc.TTL}, nil
		}}
}

// cut records on n the clients whose proxies it acts on: what it did to
// their traffic is its evidence (see networkBite).
func cut(n *nemesis.Network, clients []string) *nemesis.Network {
	n.Clients = clients
	return n
}
