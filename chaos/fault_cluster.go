package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// The faults of a Redis Cluster alone (Topologies: clusterOnly), and what
// the faults of both topologies strike on a cluster: the lock's shard,
// the master serving the hash slot of the scenario's lock keys, and its
// replicas. Redis Cluster's own failover, a shard's, is the failover
// fault there (the master killed, its replica elected); failover-skew
// promotes a replica whose clock is behind.

// takeoverFault: an operator's (or a manager's) forced failover of the
// lock's shard: its replica takes the slots at once, without an election,
// while the master still serves; the writes the replica had not received
// (a replication lag of one TTL first) are lost.
func takeoverFault() Fault {
	return Fault{Name: contract.FaultTakeover, Topologies: clusterOnly, Matrix: true,
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

// minorityPartitionFault: the lock's shard master cut off from every
// other node while clients still reach it (a split brain): it serves
// alone for the node timeout, its writes never replicated, then its
// replica is promoted, as the majority does at the node timeout (see
// env.CutClusterNode for why the nemesis promotes it).
func minorityPartitionFault() Fault {
	return Fault{Name: contract.FaultMinorityPartition, Topologies: append([]string{contract.TopologyCluster}, contract.StoreTopologies()...), Matrix: true,
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

// migrateFault: the lock's hash slot moves to another master while the
// workload runs: one key every TTL/5 for 3 TTLs, then the rest, and the
// slot changes hands. It changes servers every scenario uses (a slot of
// the shared cluster), so it runs alone.
func migrateFault() Fault {
	return Fault{Name: contract.FaultMigrate, Topologies: clusterOnly, Matrix: true,
		Doc:   "the lock's hash slot migrated to another master under load (MIGRATE key by key for 3 TTLs: ASK, TRYAGAIN, then MOVED)",
		Scope: ScopeServers, Needs: needsOwnServers("move its slots (CLUSTER SETSLOT)"),
		strike: func(s *striking) (armed, error) {
			slot, err := lockSlot(s)
			if err != nil {
				return armed{}, fmt.Errorf("migrate: %w", err)
			}
			return armed{fault: &nemesis.Migrate{Env: s.env, Slot: slot, Pace: s.sc.TTL / 5}, window: 3 * s.sc.TTL}, nil
		}}
}

// shardOutageFault: the whole shard of a held lock goes down, master and
// replicas (no failover can help), for 2 TTLs, and comes back without
// persistence: the shard's locks are forgotten. Shorter than the shared
// cluster's node timeout, so that the restarted master keeps its slots.
func shardOutageFault() Fault {
	return Fault{Name: contract.FaultShardOutage, Topologies: clusterOnly, Matrix: true,
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

// shardFailover is the failover of the lock's shard in mode (a window of
// kind): its replica promoted after a replication lag of one TTL, or, cut
// off (nemesis.FailoverPartition), after the node timeout. The election
// follows the node timeout, and on a loaded machine the failure reports
// take a while to reach a majority (seen past 5s on 2 busy cores): the
// promotion is waited for up to 20s, or the run's Duration if longer.
func shardFailover(s *striking, kind string, mode nemesis.FailoverMode) (*nemesis.Failover, error) {
	slot, err := lockSlot(s)
	if err != nil {
		return nil, err
	}
	f := &nemesis.Failover{Env: s.env, Kind: kind, Mode: mode, Slot: slot, Promote: max(s.sc.Duration, 20*time.Second)}
	switch {
	case mode == nemesis.FailoverPartition:
		f.NodeTimeout = s.env.Topology().NodeTimeout
	case s.env.Topology().Cluster[0].ReplProxy == "":
		// Bring your own: its servers are not lockproof's to kill, nor
		// its replication links to slow. The failover is the operator's
		// own (CLUSTER FAILOVER), and a takeover strikes with no lag.
		if mode == nemesis.FailoverKill {
			f.Mode = nemesis.FailoverCommand
		}
	default:
		f.ReplLatency, f.ReplLag = 20*time.Millisecond, s.sc.TTL
	}
	return f, nil
}

// onCluster reports whether the scenario runs on a Redis Cluster, whose
// failovers wait for the node timeout and an election: their windows
// count in the scenario's own context (armed.outer), not in the run's
// Duration, which a failover that struck late could outlast.
func onCluster(s *striking) bool { return len(s.env.Topology().Cluster) > 0 }

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

// lockNodes are the nodes a lock's keys may be on: Sentinel's master, or
// every master of the cluster as one node sees it now; then Redlock's
// masters.
func lockNodes(ctx context.Context, topo env.Topology) ([]env.Node, error) {
	if topo.StoreKind != "" {
		// A consensus store's lock keeps no key in Redis: its keys live
		// under the store's leases and sessions, and go with them.
		return append([]env.Node(nil), topo.Redlock...), nil
	}
	if len(topo.Cluster) == 0 {
		m, err := env.Master(ctx, topo)
		if err != nil {
			return nil, err
		}
		return append([]env.Node{m}, topo.Redlock...), nil
	}
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		return nil, err
	}
	var out []env.Node
	for _, n := range topo.Cluster {
		if len(v.Masters[n.ID]) > 0 {
			out = append(out, n)
		}
	}
	return append(out, topo.Redlock...), nil
}

// lockSlotWait bounds how long lockSlot looks for a lock's key on the
// cluster before it takes the slot of a client's key name.
const lockSlotWait = 2 * time.Second

// lockSlot is the hash slot of the scenario's lock on a cluster: that of
// the first key of a client's lock found on a master (the lock's key
// layout decides, hash tag and all), else, for a lock that keeps no key
// there (Redlock's are on its own masters) or none yet, that of the first
// client's key name.
func lockSlot(s *striking) (int, error) {
	topo := s.env.Topology()
	if len(topo.Cluster) == 0 {
		return 0, env.ErrNotCluster
	}
	ctx, cancel := context.WithTimeout(s.ctx, lockSlotWait)
	defer cancel()
	var key string
	_ = paced(ctx, func() (bool, error) { // its end: no key found, the key name decides
		nodes, err := lockNodes(ctx, topo)
		if err != nil {
			return false, err
		}
		var addrs []string
		for _, n := range nodes {
			if n.Role == env.RoleCluster {
				addrs = append(addrs, n.Upstream)
			}
		}
		for _, c := range s.wl.Clients {
			keys, err := (&nemesis.KeyLoss{Client: c.Name, Key: c.Key, Nodes: addrs, Auth: topo.Auth}).Keys(ctx)
			if err == nil && len(keys) > 0 {
				key = keys[0]
				return true, nil
			}
		}
		return false, nil
	})
	if key != "" {
		return env.KeySlot(s.ctx, topo, key)
	}
	return env.KeySlot(s.ctx, topo, s.wl.Clients[0].Key)
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
