// Package env provides the chaos environments of lockproof: one topology of
// real Redis servers behind real Toxiproxy proxies, behind one interface.
//
// The topology (see Spec):
//
//   - Data nodes: a Redis master and its replicas (Spec.Replicas, default 2),
//     watched by Sentinels (Spec.Sentinels, default 3) under Spec.MasterName.
//   - Fenced: a separate Redis that holds the fenced resources.
//   - Redlock: independent masters for Redlock (Spec.Redlock: 0, 3 or 5).
//   - Or, with Spec.Cluster, a Redis Cluster instead of the data nodes and
//     Sentinels: masters each serving an equal range of the hash slots,
//     each with its replicas (ClusterSpec). The fenced and Redlock nodes
//     stay as they are: the resources live apart from the lock, so that
//     a fault of the lock's deployment is the lock's alone.
//
// Every link to a Redis server passes a Toxiproxy proxy, so any one link can be
// slowed or cut:
//
//   - Replication links. Each data node has one inbound proxy, its
//     "replication proxy" (Node.ReplProxy). Each node announces that proxy's
//     address as its own (replica-announce-ip/port) and the Sentinels monitor
//     the master through it, so replicas reach their master, and Sentinels
//     reach every data node, through the node's replication proxy, also after
//     a failover. Node.Addr is that announced address: the address Sentinel
//     reports for the node. Slowing the master's replication proxy widens the
//     window in which an acknowledged write is not yet replicated; cutting it
//     isolates the master from replicas and Sentinels (they fail over) while
//     clients still reach it through their own proxies (a split brain).
//   - Client links. Each client gets its own proxy per node (Links, made by
//     NewLinks): go-redis clients dial through Links.Dial
//     (redis.Options.Dialer / redis.FailoverOptions.Dialer), which maps the
//     address of a node (as Sentinel reports it) to that client's proxy for
//     that node. A fault can so target one client, or a group of clients, and
//     a client follows a failover through its own proxies. Addresses the
//     dialer does not know (the Sentinels) are dialled directly: the Sentinel
//     connections of clients are not proxied.
//
// A cluster node (Topology.Cluster) has two inbound proxies: its
// replication proxy, for its data port, and its bus proxy (Node.BusProxy),
// for its cluster bus port. It announces both as its own
// (cluster-announce-ip, -port, -bus-port), so that replicas replicate,
// nodes gossip and vote, and clients are redirected (CLUSTER SLOTS,
// MOVED, ASK) through them. Cutting both isolates the node from every
// other node (a minority partition: the others fail it over while
// clients still reach it through their own proxies); a client's own
// proxies (Links) map a node's announced address to the client's proxy,
// as for the Sentinel topology.
//
// Implementations: the process environment (NewProcess: redis-server and
// redis-sentinel processes plus a Toxiproxy server process), bring your own
// (NewBYO: an existing deployment plus a Toxiproxy URL), and a Docker
// environment plugged in through Options.Docker (a Constructor; package env
// keeps no registry). Open picks one per Options.Kind (the CLI and the tests
// take it from LOCKPROOF_ENV, EnvVar).
package env

import (
	"context"
	"errors"
	"fmt"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/contract"
)

// Kind names an environment implementation; LOCKPROOF_ENV takes the same values.
type Kind string

// The environment kinds.
const (
	// Process runs redis-server and redis-sentinel as child processes.
	Process Kind = "process"
	// Docker runs them in containers (its constructor comes from Options.Docker).
	Docker Kind = "docker"
	// BYO uses an existing deployment (Options.BYO).
	BYO Kind = "byo"
)

// Role says what a node is for.
type Role string

// The node roles.
const (
	// RoleData is a Sentinel-managed node: the master or one of its replicas.
	RoleData Role = "data"
	// RoleFenced is the separate Redis that holds the fenced resources.
	RoleFenced Role = "fenced"
	// RoleRedlock is one of the independent Redlock masters.
	RoleRedlock Role = "redlock"
	// RoleCluster is a node of a Redis Cluster (Spec.Cluster): a shard's
	// master or one of its replicas.
	RoleCluster Role = "cluster"
	// RoleSentinel is a Sentinel (not a Node of Topology: the sentinels'
	// addresses are Topology.Sentinels).
	RoleSentinel Role = "sentinel"
)

// NodeID is the ID every environment gives the i-th node of role r:
// "data-0" (the initial master), "data-1", "redlock-0", "sentinel-2"; the
// one fenced node's is "fenced".
func NodeID(r Role, i int) string {
	if r == RoleFenced {
		return string(r)
	}
	return fmt.Sprintf("%s-%d", r, i)
}

// Errors of environments, usable with errors.Is.
var (
	// ErrUnsupported: the environment cannot do this (e.g. pause a server in BYO).
	ErrUnsupported = errors.New("not supported by this environment")
	// ErrNoNode: no node has the given ID.
	ErrNoNode = errors.New("no such node")
	// ErrUnavailable: the environment cannot run here (no redis-server, no Docker).
	ErrUnavailable = errors.New("environment unavailable")
)

// Spec is the topology asked for. Zero fields take the defaults named.
type Spec struct {
	// MasterName is the Sentinel master name; default "lockproof".
	MasterName string
	// Replicas of the master; default 2. Use -1 for none.
	Replicas int
	// Sentinels watching the master; default 3. Quorum is a majority.
	Sentinels int
	// Redlock independent masters; 0 (default) for none, else usually 3 or 5.
	Redlock int
	// DownAfter is Sentinel's down-after-milliseconds; default 1s.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout; default 3s.
	FailoverTimeout time.Duration
	// Cluster, when set, makes the lock's deployment a Redis Cluster
	// (Topology.Cluster) instead of a master watched by Sentinels:
	// MasterName, Replicas, Sentinels, DownAfter and FailoverTimeout are
	// then unused.
	Cluster *ClusterSpec
	// ReplicaClockBehind sets the wall clocks of the master's replicas this
	// far behind the master's (and the host's), in whole seconds: a promoted
	// replica then issues clock-based fences below the old master's. Only the
	// process environment can (it starts redis-server under datefudge,
	// redisproc.ClockBehind); others refuse a Spec that asks (ErrUnavailable).
	ReplicaClockBehind time.Duration
	// Store, when set, makes the lock's deployment a consensus store
	// instead of Redis (contract.TopologyEtcd: an etcd cluster of 3
	// members; contract.TopologyZooKeeper: a ZooKeeper ensemble of 3
	// servers; Topology.Store); the fenced node stays, and everything
	// else is unused. Only the process environment runs one (NewStore).
	Store string
}

// ClusterSpec is the shape of a Redis Cluster. Zero fields take the
// defaults named.
type ClusterSpec struct {
	// Masters is the number of shards; default 3 (the fewest that can
	// vote a failover).
	Masters int
	// Replicas of each master; default 1. Use -1 for none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before the others fail it (and how long a master cut
	// off from the majority keeps accepting writes); default 2s.
	NodeTimeout time.Duration
}

// Topology names the spec's shape: its Store, contract.TopologyCluster
// with a Cluster, else contract.TopologySentinel.
func (s Spec) Topology() string {
	if s.Store != "" {
		return s.Store
	}
	if s.Cluster != nil {
		return contract.TopologyCluster
	}
	return contract.TopologySentinel
}

// WithDefaults returns s with the defaults filled in.
func (s Spec) WithDefaults() Spec {
	if s.Cluster != nil {
		c := *s.Cluster
		if c.Masters <= 0 {
			c.Masters = 3
		}
		switch {
		case c.Replicas == 0:
			c.Replicas = 1
		case c.Replicas < 0:
			c.Replicas = 0
		}
		if c.NodeTimeout <= 0 {
			c.NodeTimeout = 2 * time.Second
		}
		s.Cluster = &c
	}
	if s.MasterName == "" {
		s.MasterName = "lockproof"
	}
	switch {
	case s.Replicas == 0:
		s.Replicas = 2
	case s.Replicas < 0:
		s.Replicas = 0
	}
	if s.Sentinels <= 0 {
		s.Sentinels = 3
	}
	if s.DownAfter <= 0 {
		s.DownAfter = time.Second
	}
	if s.FailoverTimeout <= 0 {
		s.FailoverTimeout = 3 * time.Second
	}
	return s
}

// Quorum is the Sentinel quorum for n Sentinels: a majority.
func Quorum(n int) int { return n/2 + 1 }

// Node is one Redis server of the topology.
type Node struct {
	// ID names the node: "data-0" (the initial master), "data-1", ...,
	// "fenced", "redlock-0", ...
	ID   string
	Role Role
	// Addr is host:port under which the node is known: the address Sentinel
	// reports and replicas dial (for data nodes, the listen address of its
	// replication proxy). Links.Dial maps Addr to a client's own proxy.
	Addr string
	// Upstream is host:port at which the Toxiproxy server reaches the server
	// itself (the upstream of every proxy in front of it).
	Upstream string
	// ReplProxy names the node's inbound replication proxy on the Toxiproxy
	// server; "" when the replication links are not proxied (BYO).
	ReplProxy string
	// BusProxy names a cluster node's inbound cluster-bus proxy; "" for
	// other nodes, and when the bus is not proxied (BYO).
	BusProxy string
	// Shard is a cluster node's shard at start: the index of the master
	// it was or replicated (its master can change; ask the cluster,
	// ClusterMasters). 0 for other nodes.
	Shard int
	// PeerProxies are the proxies of a consensus store member's links
	// with its peers (StoreEnv): cutting them all cuts it off from the
	// others. Nil for Redis nodes.
	PeerProxies []string
}

// Topology is the layout of a running environment.
type Topology struct {
	// MasterName is the Sentinel master name.
	MasterName string
	// Sentinels are host:port addresses clients dial to reach Sentinels (directly).
	Sentinels []string
	// Data are the Sentinel-managed nodes; Data[0] was the master at start.
	Data []Node
	// Fenced holds the fenced resources.
	Fenced Node
	// Redlock are the independent Redlock masters (may be empty).
	Redlock []Node
	// Cluster are the nodes of a Redis Cluster (Spec.Cluster), then
	// Data and Sentinels are empty: the masters first, shard by shard
	// (Cluster[i] was shard i's master at start), then shard by shard
	// their replicas.
	Cluster []Node
	// NodeTimeout is the cluster's cluster-node-timeout (0 without one).
	NodeTimeout time.Duration
	// Auth is how every client of these nodes logs in (AUTH, database,
	// TLS): a bring-your-own deployment's (BYOConfig), or none.
	Auth Auth
	// Store are the members of a consensus store (Spec.Store), whose
	// kind StoreKind names; then Data, Sentinels and Cluster are empty.
	Store     []Node
	StoreKind string
}

// Name is the topology's name: the store's (StoreKind) for a consensus
// store, contract.TopologyCluster for a cluster, else
// contract.TopologySentinel.
func (t Topology) Name() string {
	if t.StoreKind != "" {
		return t.StoreKind
	}
	if len(t.Cluster) > 0 {
		return contract.TopologyCluster
	}
	return contract.TopologySentinel
}

// ClusterAddrs are the announced addresses of the cluster's nodes: a
// cluster client's seeds.
func (t Topology) ClusterAddrs() []string {
	out := make([]string, len(t.Cluster))
	for i, n := range t.Cluster {
		out[i] = n.Addr
	}
	return out
}

// Nodes returns every node: data (or cluster, or store), fenced, then
// redlock.
func (t Topology) Nodes() []Node {
	out := append(append(append([]Node(nil), t.Data...), t.Cluster...), t.Store...)
	if t.Fenced.ID != "" {
		out = append(out, t.Fenced)
	}
	return append(out, t.Redlock...)
}

// Node returns the node with the given ID, or ErrNoNode.
func (t Topology) Node(id string) (Node, error) {
	for _, n := range t.Nodes() {
		if n.ID == id {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("node %q: %w", id, ErrNoNode)
}

// ProxyServer says how to reach the Toxiproxy server of an environment.
type ProxyServer struct {
	// API drives the server over HTTP. All proxy and toxic changes go through it.
	API *toxiclient.Client
	// URL is the API endpoint (http://host:port).
	URL string
	// ListenHost is the host new proxies listen on, as the Toxiproxy server
	// sees it (e.g. "127.0.0.1", or "0.0.0.0" for a remote server).
	ListenHost string
	// DialHost is the host clients dial to reach a proxy (e.g. "127.0.0.1",
	// or the remote server's host name).
	DialHost string
}

// Env is a running chaos environment.
//
// Implementations must be safe for concurrent use. Every method that waits
// takes a context and is bounded by it. Close must stop everything the
// environment started (processes, containers, networks, the proxies it
// created) even after a failed start or a failed test, and may be called more
// than once.
type Env interface {
	// Kind says which implementation this is.
	Kind() Kind
	// Topology returns the layout. It does not change over the life of the
	// environment (the master may: ask Sentinel, see Master).
	Topology() Topology
	// Proxies returns the Toxiproxy server all proxies of this environment live on.
	Proxies() ProxyServer

	// Pause freezes the Redis server of the node (SIGSTOP, docker pause):
	// it keeps its connections but answers nothing until Resume.
	Pause(ctx context.Context, nodeID string) error
	// Resume thaws a paused node.
	Resume(ctx context.Context, nodeID string) error
	// Kill ends the node's server at once (SIGKILL): a crash, no shutdown.
	Kill(ctx context.Context, nodeID string) error
	// Restart starts a killed node again at the same address with the same
	// configuration and an empty data set, and waits until it answers PING.
	Restart(ctx context.Context, nodeID string) error

	// Close stops everything the environment started.
	Close(ctx context.Context) error
}

// Constructor makes an environment for a Spec; Options.Docker has this type.
type Constructor func(ctx context.Context, spec Spec) (Env, error)
