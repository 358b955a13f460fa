package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func failoverFault() Fault {
	return Fault{Name: contract.FaultFailover,
		Simulate: simFailover(0), SimDoc: "the lock's node fails over to a replica that was in sync one TTL before: the writes of that gap are lost, and every connection to the node is reset",
		Topologies: everywhere, Doc: "the master cut off from its replicas and Sentinels (split brain) until Sentinel promotes a replica; writes in the replication gap are lost (a consensus store's leader killed, a new one elected, and the old one restarted as a follower)", Matrix: true,
		Scope: ScopeFresh, Duration: 6 * time.Second, ChangesDeployment: true,
		Admin: func(topology string) []string {
			if contract.IsStore(topology) {
				return []string{"none: a consensus store runs as lockproof's processes only"}
			}
			if topology == contract.TopologyCluster {
				return []string{"CLUSTER FAILOVER, once per scenario, to a replica of the master serving the scenario's lock key (it stays the master)"}
			}
			return []string{"SENTINEL FAILOVER <master name>, once per scenario, to the first Sentinel that answers (the promoted replica stays the master)"}
		},
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				// 3 TTLs: the others elect a leader within an election
				// timeout, and the workload runs on the new one.
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderKill, Label: contract.FaultFailover}, window: 3 * s.sc.TTL}, nil
			}
			f, err := failover(s)
			if err != nil {
				return armed{}, fmt.Errorf("failover: %w", err)
			}
			return armed{fault: f, window: s.sc.TTL, outer: onCluster(s)}, nil
		}}
}
