package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// restartFault: Redis forgets every lock at once, the master crashed and
// restarted without persistence (same address, empty data set; on Docker,
// the container killed and started again), while a client works under its
// lock; for Redlock, the one of its masters found holding the lock. It
// acts on servers every scenario shares, so it runs alone; the window is
// the restart.
func restartFault() Fault {
	return Fault{Name: contract.FaultRestart,
		NotSimulated: "a master that restarts empty: not simulated yet (key-loss and failover cover its losses separately)",
		Topologies:   everywhere, Doc: "the master (for redlock, one of its masters) crashes and restarts without persistence while a client holds (Redis forgets every lock); a consensus store's leader crashes and comes back with its data wiped",
		Scope: ScopeServers, Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second,
		Needs: needsOwnServers("crash and restart its master"),
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				// The leader, while a client holds: killed, and after 3
				// TTLs (the others elect meanwhile) back with no data, a
				// new member that syncs from the new leader.
				if _, err := s.firstHolder(s.outer); err != nil {
					return armed{}, fmt.Errorf("restart: %w", err)
				}
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderWipe, Label: contract.FaultRestart}, window: 3 * s.sc.TTL}, nil
			}
			for {
				kl, nodes, err := holderKeys(s)
				if err != nil {
					return armed{}, fmt.Errorf("restart: %w", err)
				}
				// The node to restart: the first that holds the lock's keys
				// (the master, or for Redlock one of its masters).
				for _, n := range nodes {
					one := &nemesis.KeyLoss{Client: kl.Client, Key: kl.Key, Nodes: []string{n.Upstream}, Auth: kl.Auth}
					if ok, err := one.Present(s.ctx); err != nil {
						return armed{}, fmt.Errorf("restart: %w", err)
					} else if ok {
						return armed{fault: &nemesis.Restart{Lock: one, Env: s.env, NodeID: n.ID}}, nil
					}
				}
				// The holder released between the two looks (a loaded
				// machine, a brief hold): find a holder again, until the
				// strike's time runs out (holderKeys then says so).
			}
		}}
}
