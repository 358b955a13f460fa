package chaos

import (
	"fmt"
	"slices"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

// replicaPauseFault freezes the replicas of the lock's master while the
// master serves on. Only a lock that asks replicas to acknowledge its
// writes (package lock's ReplicaAcks: WAIT after each acquire) notices:
// its acquires time out waiting, and it gives each one back. A give-back
// is a request like any other: lost, or landing late (late-delivery in the
// same run), it must end that acquire's hold and no other, not its
// owner's next lease.
func replicaPauseFault() Fault {
	return Fault{Name: contract.FaultReplicaPause,
		Doc:        "every replica of the lock's master frozen (SIGSTOP, docker pause) for 3 TTLs while the master serves on: a WAIT for a replica's acknowledgement times out",
		Topologies: both,
		Scope:      ScopeServers,
		Needs:      needsOwnServers("pause its replicas"),
		strike: func(s *striking) (armed, error) {
			ids, err := lockReplicas(s)
			if err != nil {
				return armed{}, fmt.Errorf("%s: %w", contract.FaultReplicaPause, err)
			}
			return armed{fault: &nemesis.PauseServers{Env: s.env, NodeIDs: ids, Label: contract.FaultReplicaPause}, window: 3 * s.sc.TTL}, nil
		},
		Simulate: simReplicaPause, SimDoc: "the lock's node's replica stops for 3 TTLs while the node serves on: a WAIT for its acknowledgement waits out its timeout and counts none"}
}

// lockReplicas are the IDs of the replicas of the node a server fault
// strikes (lockServer's): Sentinel's data nodes but the master, or on a
// cluster the replicas of the lock's slot's master, read from the one
// view that names that master.
func lockReplicas(s *striking) ([]string, error) {
	topo := s.env.Topology()
	var ids []string
	if len(topo.Cluster) == 0 {
		m, err := env.Master(s.ctx, topo)
		if err != nil {
			return nil, err
		}
		for _, n := range topo.Data {
			if n.ID != m.ID {
				ids = append(ids, n.ID)
			}
		}
	} else {
		slot, err := lockSlot(s)
		if err != nil {
			return nil, err
		}
		v, err := env.WaitClusterAgreed(s.ctx, topo)
		if err != nil {
			return nil, err
		}
		ids = v.Replicas(v.Owner(slot))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the lock's master has no replica: %w", env.ErrUnsupported)
	}
	slices.Sort(ids)
	return ids, nil
}

func simReplicaPause(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	name := contract.FaultReplicaPause + " " + addr
	return s.onNet(name, func() { s.Net.PauseReplicas(addr, true) }, func() { s.Net.PauseReplicas(addr, false) },
		func(b, a simnet.Counts) string {
			return fmt.Sprintf("%s: %d WAITs counted fewer replicas than they asked", name, a.WaitsShort-b.WaitsShort)
		})
}
