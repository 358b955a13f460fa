package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// shardOutageFault: the whole shard of a held lock goes down, master and
// replicas (no failover can help), for 2 TTLs, and comes back without
// persistence: the shard's locks are forgotten. Shorter than the shared
// cluster's node timeout, so that the restarted master keeps its slots.
func shardOutageFault() Fault {
	return Fault{Name: contract.FaultShardOutage,
		NotSimulated: "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		Topologies:   clusterOnly, Matrix: true,
		Doc:   "the lock's shard, master and replicas, killed while a client holds, and restarted without persistence 2 TTLs later (Redis forgets the shard's locks)",
		Scope: ScopeServers, Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second,
		Needs: needsOwnServers("stop a shard's master and its replica"),
		strike: func(s *striking) (armed, error) {
			o, err := heldShard(s)
			if err != nil {
				return armed{}, fmt.Errorf("shard-outage: %w", err)
			}
			return armed{fault: o, window: 2 * s.sc.TTL}, nil
		}}
}

// heldShard is the outage of the shard where a holder's lock keys are,
// found within lockSlotWait; a lock that keeps none on the cluster
// (Redlock's are on its own masters) gets the outage of the shard of its
// first client's key name, with nothing of its own there.
func heldShard(s *striking) (*nemesis.ShardOutage, error) {
	topo := s.env.Topology()
	ctx, cancel := context.WithTimeout(s.ctx, lockSlotWait)
	defer cancel()
	outage := func(ctx context.Context, n env.Node, kl *nemesis.KeyLoss) (*nemesis.ShardOutage, error) {
		v, err := env.View(ctx, topo, n.ID)
		if err != nil {
			return nil, err
		}
		one := &nemesis.KeyLoss{Client: kl.Client, Key: kl.Key, Nodes: []string{n.Upstream}, Auth: kl.Auth}
		return &nemesis.ShardOutage{Lock: one, Env: s.env, Master: n.ID, Replicas: v.Replicas(n.ID)}, nil
	}
	for ctx.Err() == nil {
		kl, nodes, err := holderKeys(&striking{ctx: ctx, env: s.env, wl: s.wl})
		if err != nil {
			break
		}
		for _, n := range nodes {
			if n.Role != env.RoleCluster {
				continue
			}
			one := &nemesis.KeyLoss{Client: kl.Client, Key: kl.Key, Nodes: []string{n.Upstream}, Auth: kl.Auth}
			if ok, err := one.Present(ctx); err == nil && ok {
				return outage(s.ctx, n, kl)
			}
		}
	}
	c := s.wl.Clients[0]
	slot, err := env.KeySlot(s.ctx, topo, c.Key)
	if err != nil {
		return nil, err
	}
	v, err := env.WaitClusterAgreed(s.ctx, topo)
	if err != nil {
		return nil, err
	}
	n, err := topo.Node(v.Owner(slot))
	if err != nil {
		return nil, err
	}
	return outage(s.ctx, n, &nemesis.KeyLoss{Client: c.Name, Key: c.Key, Auth: topo.Auth})
}
