package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

func pauseServerFault() Fault {
	return Fault{Name: contract.FaultPauseServer,
		Simulate: simPauseServer, SimDoc: "the lock's node stops serving for 3 TTLs (requests held), then serves again",
		Topologies: everywhere, Doc: "the master frozen (SIGSTOP, docker pause) for 1.5 TTLs, shorter than Sentinel's down-after (a consensus store's leader: longer than its election timeout)", Matrix: true,
		Scope: ScopeServers,
		Needs: needsOwnServers("pause its master"),
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				// The store's leader, frozen past its election timeout:
				// the others elect a new one, and it wakes a follower.
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderPause, Label: contract.FaultPauseServer}, window: s.sc.TTL + s.sc.TTL/2}, nil
			}
			m, err := lockServer(s)
			if err != nil {
				return armed{}, fmt.Errorf("pause-server: %w", err)
			}
			return armed{fault: &nemesis.PauseServer{Env: s.env, NodeID: m.ID}, window: s.sc.TTL + s.sc.TTL/2}, nil
		}}
}

// lockServer is the node a server fault strikes: Sentinel's master, or
// on a cluster the master serving the lock's slot.
func lockServer(s *striking) (env.Node, error) {
	topo := s.env.Topology()
	if len(topo.Cluster) == 0 {
		return env.Master(s.ctx, topo)
	}
	slot, err := lockSlot(s)
	if err != nil {
		return env.Node{}, err
	}
	v, err := env.WaitClusterAgreed(s.ctx, topo)
	if err != nil {
		return env.Node{}, err
	}
	return topo.Node(v.Owner(slot))
}

func simPauseServer(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	name := contract.FaultPauseServer + " " + addr
	return s.onNet(name, func() { s.Net.Pause(addr) }, s.Net.Resume, func(b, a simnet.Counts) string {
		return fmt.Sprintf("%s: %d messages held", name, a.Held-b.Held)
	})
}
