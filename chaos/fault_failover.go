package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func failoverFault() Fault {
	return Fault{Name: contract.FaultFailover, Topologies: everywhere, Doc: "the master cut off from its replicas and Sentinels (split brain) until Sentinel promotes a replica; writes in the replication gap are lost (a consensus store's leader killed, a new one elected, and the old one restarted as a follower)", Matrix: true,
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

// failover is the nemesis of a failover: it isolates the master from its
// replicas and Sentinels; clients keep using it until they follow
// Sentinel's switch, so leases taken there since the partition are lost.
// Without replication proxies (bring your own), it asks Sentinel.
//
// On a Redis Cluster, the master of the lock's slot is killed after the
// same replication lag: the other masters fail it at the node timeout and
// its replica is elected (Redis Cluster's own failover); the heal
// restarts it as the new master's replica.
func failover(s *striking) (*nemesis.Failover, error) {
	if onCluster(s) {
		return shardFailover(s, contract.FaultFailover, nemesis.FailoverKill)
	}
	mode := nemesis.FailoverPartition
	if m, err := env.Master(s.ctx, s.env.Topology()); err == nil && m.ReplProxy == "" {
		mode = nemesis.FailoverCommand
	}
	return &nemesis.Failover{Env: s.env, Mode: mode,
		ReplLatency: 20 * time.Millisecond, ReplLag: s.sc.TTL, Promote: s.sc.Duration}, nil
}
