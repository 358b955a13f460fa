package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// takeoverFault: an operator's (or a manager's) forced failover of the
// lock's shard: its replica takes the slots at once, without an election,
// while the master still serves; the writes the replica had not received
// (a replication lag of one TTL first) are lost.
func takeoverFault() Fault {
	return Fault{Name: contract.FaultTakeover,
		NotSimulated: "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		Topologies:   clusterOnly, Matrix: true,
		Doc:   "the replica of the lock's shard master takes its slots at once (CLUSTER FAILOVER TAKEOVER) after a replication lag; writes in the gap are lost",
		Scope: ScopeFresh, Duration: 6 * time.Second, ChangesDeployment: true,
		Admin: func(string) []string {
			return []string{"CLUSTER FAILOVER TAKEOVER, once per scenario, to a replica of the master serving the scenario's lock key (without the other masters' votes: writes the replica had not received are lost, other tenants' too; it stays the master)"}
		},
		strike: func(s *striking) (armed, error) {
			f, err := shardFailover(s, contract.FaultTakeover, nemesis.FailoverTakeover)
			if err != nil {
				return armed{}, fmt.Errorf("takeover: %w", err)
			}
			return armed{fault: f, window: s.sc.TTL, outer: true}, nil
		}}
}
