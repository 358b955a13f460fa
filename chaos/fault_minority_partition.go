package chaos

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// minorityPartitionFault: the lock's shard master cut off from every
// other node while clients still reach it (a split brain): it serves
// alone for the node timeout, its writes never replicated, then its
// replica is promoted, as the majority does at the node timeout (see
// env.CutClusterNode for why the nemesis promotes it).
func minorityPartitionFault() Fault {
	return Fault{Name: contract.FaultMinorityPartition,
		NotSimulated: "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		Topologies:   append([]string{contract.TopologyCluster}, contract.StoreTopologies()...), Matrix: true,
		Doc:   "the lock's shard master cut off from the other nodes, clients still reaching it, for the node timeout; then its replica is promoted and its writes since the cut are lost (a consensus store's leader cut off from its peers for 3 TTLs, its clients still reaching it)",
		Scope: ScopeFresh, Duration: 8 * time.Second, Needs: needsOwnLinks,
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderIsolate, Label: contract.FaultMinorityPartition}, window: 3 * s.sc.TTL}, nil
			}
			f, err := shardFailover(s, contract.FaultMinorityPartition, nemesis.FailoverPartition)
			if err != nil {
				return armed{}, fmt.Errorf("minority-partition: %w", err)
			}
			return armed{fault: f, window: s.sc.TTL, outer: true}, nil
		}}
}

// ErrCannotCutClusterLinks: a bring-your-own cluster's nodes reach one
// another directly, not through lockproof's proxies.
var ErrCannotCutClusterLinks = errors.New("the links between a bring-your-own cluster's nodes are its own, not through lockproof's proxies, so it cannot cut them")

// needsOwnLinks: the fault cuts the links between cluster nodes.
func needsOwnLinks(k env.Kind) error {
	if k == env.BYO {
		return ErrCannotCutClusterLinks
	}
	return nil
}
