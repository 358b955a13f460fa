package docker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/lockproof/lockproof/internal/redisproc"
)

// The Redis Cluster topology (env.Spec.Cluster) on containers.
//
// Each cluster node is a container like a data node, with its cluster bus
// on clusterBusPort published on 127.0.0.1 too. Two proxies on the host,
// listening on the network's gateway, stand in front of it: its
// replication proxy (data port) and its bus proxy (cluster bus). The node
// announces both as its own (cluster-announce-ip, -port, -bus-port), so
// that gossip, votes, replication and the addresses clients are
// redirected to (CLUSTER SLOTS, MOVED, ASK) all cross a proxy, as on the
// process environment.

const (
	// clusterBus is a cluster node's bus port inside its container;
	// clusterBusPort names it for Docker.
	clusterBus     = 16379
	clusterBusPort = "16379/tcp"
	// nodesConf is where a cluster node keeps its identity (node ID,
	// peers, epochs). Not in /data: that is a tmpfs, emptied by a
	// restart, and a node that forgot its identity would come back a
	// stranger with no slots. The container's own layer survives docker
	// stop and start, so a restarted node keeps its place in the cluster
	// and loses its data, as a restarted process does.
	nodesConf = "/tmp/nodes.conf"
)

// clusterArgs makes node n (the i-th of the cluster) a cluster node
// behind its proxies: it creates its bus proxy and returns the
// command-line options that enable the cluster and announce both proxies.
func (e *Env) clusterArgs(n *node, i int) ([]string, error) {
	cs := e.spec.Cluster
	bus, err := redisproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	n.busPort = bus
	px, err := e.gatewayProxy(n.ID, "bus-"+n.ID, net.JoinHostPort(loopback, strconv.Itoa(bus)))
	if err != nil {
		return nil, err
	}
	n.BusProxy = px.Name
	n.Shard = redisproc.ShardOf(i, cs.Masters, cs.Replicas)
	host, port, err := redisproc.SplitHostPort(n.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	_, bport, err := redisproc.SplitHostPort(px.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	n.meet = fmt.Sprintf("%s %d %d", host, port, bport)
	conf := append(redisproc.ClusterConf(nodesConf, clusterBus, cs.NodeTimeout), redisproc.AnnounceConf(host, port, bport)...)
	return flags(conf), nil
}

// formCluster forms the started cluster nodes into one cluster
// (redisproc.FormCluster): slots to the masters, MEET at the announced
// addresses, the replicas to their masters.
func (e *Env) formCluster(ctx context.Context) error {
	cs := e.spec.Cluster
	addrs := make([]string, len(e.topo.Cluster))
	meet := make([]string, len(e.topo.Cluster))
	e.mu.Lock()
	for i, n := range e.topo.Cluster {
		addrs[i], meet[i] = n.Upstream, e.nodes[n.ID].meet
	}
	e.mu.Unlock()
	if err := redisproc.FormCluster(ctx, addrs, meet, cs.Masters, cs.Replicas, string(e.topo.Auth.Password)); err != nil {
		return fmt.Errorf("%w; the containers must reach the proxies on the host at the network gateway %s: does a host firewall block it?", err, e.gateway)
	}
	e.topo.NodeTimeout = cs.NodeTimeout
	e.log.Debug("docker cluster up", "id", e.ID, "network", e.net.Name, "gateway", e.gateway, "nodes", e.topo.ClusterAddrs())
	return nil
}

// flags turns configuration lines ("name value") into redis-server
// command-line options ("--name", "value").
func flags(lines []string) []string {
	var out []string
	for _, l := range lines {
		name, value, _ := strings.Cut(l, " ")
		out = append(out, "--"+name, value)
	}
	return out
}
