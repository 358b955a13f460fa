package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterConfig says how to start a Redis Cluster of processes.
type ClusterConfig struct {
	// Masters is the number of shards; 0 means 3 (the fewest Redis
	// Cluster accepts to vote a failover).
	Masters int
	// Replicas is the number of replicas of each master; 0 means none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before it is failing; 0 means 2s.
	NodeTimeout time.Duration
	// Extra lines for every node's configuration.
	Extra []string
	// Password is every node's (Config.Password): clients, replicas and
	// the formation log in with it.
	Password string
	// Dir, when set, gives node i its working directory (nodes.conf
	// lives there, so that a restart keeps the node's identity); nil or
	// "" makes a temporary one.
	Dir func(i int) string
	// Env, when set, gives node i extra environment variables (a clock
	// behind the host's, ClockBehind).
	Env func(i int) []string
	// Announce, when set, is asked once node i is up, listening on addr
	// with its cluster bus on port bus, for the address the node is to
	// announce for both (cluster-announce-ip, -port and -bus-port): a
	// proxy in front of each, say. The nodes then meet, replicate and
	// are found by clients at the announced addresses.
	Announce func(ctx context.Context, i int, addr string, bus int) (host string, port, busPort int, err error)
}

// Cluster is a Redis Cluster of redis-server processes: Nodes[i] for i
// below Masters was the master of shard i at start, and the replicas of
// shard i follow (Nodes[Masters+i*Replicas+j]).
type Cluster struct {
	Nodes   []*Process
	Masters int
	// Configs are what each node was started with, its announce lines
	// included: Start with Configs[i] (and Nodes[i].Port) brings node i
	// back as it was, nodes.conf and all.
	Configs []Config
	// Announced are the addresses the cluster knows its nodes by (the
	// nodes' own addresses when nothing is announced).
	Announced []string
}

// Addrs returns every node's address (a ClusterClient's seeds).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Stop stops every node.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop())
	}
	return errors.Join(errs...)
}

// ShardOf is the shard of the i-th node of a cluster of masters, each
// with replicas (the order StartCluster and FormCluster use: the masters
// first, then shard by shard their replicas).
func ShardOf(i, masters, replicas int) int {
	if i < masters {
		return i
	}
	return (i - masters) / max(replicas, 1)
}

// SplitHostPort splits host:port into its host and port number (a
// proxy's listen address, to announce).
func SplitHostPort(hostport string) (string, int, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", hostport, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port: %w", hostport, err)
	}
	return host, n, nil
}

// ClusterConf are the configuration lines of a cluster node whose
// identity (its node ID, its peers, its epoch) lives in file, whose
// cluster bus listens on port bus, and which fails an unreachable peer
// after nodeTimeout. A shard with no live node leaves its slots
// unserved, not the whole cluster (cluster-require-full-coverage no):
// a shard's outage is the fault, not all of them.
func ClusterConf(file string, bus int, nodeTimeout time.Duration) []string {
	return []string{
		"cluster-enabled yes",
		"cluster-config-file " + file,
		"cluster-node-timeout " + strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		"cluster-port " + strconv.Itoa(bus),
		"cluster-require-full-coverage no",
	}
}

// AnnounceConf are the configuration lines with which a cluster node
// announces host:port for its clients and replicas and host:bus for its
// cluster bus (a proxy in front of each, say).
func AnnounceConf(host string, port, bus int) []string {
	return []string{"cluster-announce-ip " + host, "cluster-announce-port " + strconv.Itoa(port), "cluster-announce-bus-port " + strconv.Itoa(bus)}
}

// StartCluster starts the nodes of cfg with cluster-enabled, gives each
// master an equal range of the 16384 slots, joins them (CLUSTER MEET),
// makes the replicas replicate their masters, and waits, bounded by ctx,
// until every node sees the cluster ok and every replica in sync. On
// error every node started is stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (c *Cluster, err error) {
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 2 * time.Second
	}
	c = &Cluster{Masters: cfg.Masters}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	total := cfg.Masters * (1 + cfg.Replicas)
	buses := make([]int, total)
	meet := make([]string, total) // host:port:bus each node is met at
	for i := range total {
		// The bus port is said, not left at port+10000: that one may be
		// another process's.
		if buses[i], err = FreePort(); err != nil {
			return c, err
		}
		pc := Config{Extra: append(ClusterConf("nodes.conf", buses[i], cfg.NodeTimeout), cfg.Extra...), Password: cfg.Password}
		if cfg.Dir != nil {
			pc.Dir = cfg.Dir(i)
		}
		if cfg.Env != nil {
			pc.Env = cfg.Env(i)
		}
		p, err := Start(ctx, pc)
		if err != nil {
			return c, fmt.Errorf("cluster node %d: %w", i, err)
		}
		c.Nodes = append(c.Nodes, p)
		host, port, bus := "127.0.0.1", p.Port, buses[i]
		if cfg.Announce != nil {
			if host, port, bus, err = cfg.Announce(ctx, i, p.Addr, buses[i]); err != nil {
				return c, fmt.Errorf("cluster node %d (%s): announce: %w", i, p.Addr, err)
			}
			lines := AnnounceConf(host, port, bus)
			for _, l := range lines {
				f := strings.Fields(l)
				if err := configSet(ctx, p.Addr, cfg.Password, f[0], f[1]); err != nil {
					return c, fmt.Errorf("cluster node %d (%s): %w", i, p.Addr, err)
				}
			}
			pc.Extra = append(pc.Extra, lines...)
		}
		c.Configs = append(c.Configs, pc)
		c.Announced = append(c.Announced, net.JoinHostPort(host, strconv.Itoa(port)))
		meet[i] = host + " " + strconv.Itoa(port) + " " + strconv.Itoa(bus)
	}
	if err := FormCluster(ctx, c.Addrs(), meet, cfg.Masters, cfg.Replicas, cfg.Password); err != nil {
		return c, err
	}
	return c, nil
}

// FormCluster makes a Redis Cluster of fresh cluster-enabled nodes,
// reached at addrs (an admin's addresses, not through any proxy): the
// first masters nodes each get an equal range of the 16384 slots, node 0
// meets the others at meet[i] ("host port bus", the address node i
// announces), and node masters+s*replicas+j replicates master s. It
// waits, bounded by ctx, until every node sees the cluster ok, every
// replica in sync and known to every node as its master's, and every node
// maps every slot to the same master. The process and Docker
// environments both form their clusters so. password is the nodes'
// (Config.Password), or "".
func FormCluster(ctx context.Context, addrs, meet []string, masters, replicas int, password string) error {
	total := len(addrs)
	if total != masters*(1+replicas) || len(meet) != total {
		return fmt.Errorf("cluster: %d addresses and %d meet addresses for %d masters with %d replicas each", total, len(meet), masters, replicas)
	}
	clients := make([]*redis.Client, total)
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, Password: password, MaxRetries: -1})
		defer clients[i].Close()
	}
	ids := make([]string, total)
	for i, rdb := range clients {
		var err error
		if ids[i], err = rdb.ClusterMyID(ctx).Result(); err != nil {
			return fmt.Errorf("cluster node %s: CLUSTER MYID: %w", addrs[i], err)
		}
	}
	// Each node its own config epoch before it meets any other, as
	// redis-cli --cluster create does. Left at 0, the nodes bump theirs
	// on meeting until no two masters share one; a node that becomes a
	// replica stops taking part, and may keep its master's epoch. Its
	// CLUSTER FAILOVER TAKEOVER then claims the slots with an epoch no
	// greater than the master's, which the other masters ignore while
	// they still hear the master: a minority partition's replica never
	// took the slots (the clean-clone CI of e55388c).
	for i, rdb := range clients {
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("cluster node %s: SET-CONFIG-EPOCH %d: %w", addrs[i], i+1, err)
		}
	}
	per := 16384 / masters
	for i := range masters {
		lo, hi := i*per, (i+1)*per-1
		if i == masters-1 {
			hi = 16383
		}
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("cluster node %s: ADDSLOTSRANGE %d %d: %w", addrs[i], lo, hi, err)
		}
	}
	for i := 1; i < total; i++ {
		f := strings.Fields(meet[i])
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", f[0], f[1], f[2]).Err(); err != nil {
			return fmt.Errorf("cluster: MEET %s (node %s): %w", meet[i], addrs[i], err)
		}
	}
	// A replica can only replicate a master it knows.
	if err := waitAll(ctx, clients, func(rdb *redis.Client) (bool, error) {
		nodes, err := rdb.ClusterNodes(ctx).Result()
		return strings.Count(strings.TrimSpace(nodes), "\n")+1 == total, err
	}); err != nil {
		return fmt.Errorf("cluster: nodes meeting: %w", err)
	}
	for r := masters; r < total; r++ {
		s := ShardOf(r, masters, replicas)
		if err := clients[r].ClusterReplicate(ctx, ids[s]).Err(); err != nil {
			return fmt.Errorf("cluster node %s: REPLICATE %s: %w", addrs[r], addrs[s], err)
		}
	}
	if err := waitAll(ctx, clients, func(rdb *redis.Client) (bool, error) {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false, err
		}
		repl, err := rdb.Info(ctx, "replication").Result()
		return strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up"), err
	}); err != nil {
		return fmt.Errorf("cluster: waiting for state ok and replicas in sync: %w", err)
	}
	// Every node knows every replica's master (a failover right after
	// formation asks one node for the master's replicas) and maps every
	// slot to the same master, twice in a row: a command sent once right
	// after formation (the fencing resources' scripts) once got
	// CLUSTERDOWN Hash slot not served from a node of a cluster that had
	// just said cluster_state:ok on every node.
	for stable := 0; stable < 2; {
		same, err := agree(ctx, clients, ids, masters, replicas)
		switch {
		case err != nil:
			stable = 0
			if ctx.Err() != nil {
				return fmt.Errorf("cluster: waiting for every node to know every replica and map every slot alike: %w", err)
			}
		case same:
			stable++
		default:
			stable = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for every node to know every replica and map every slot alike: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// agree reports whether every client's node, in its CLUSTER NODES, lists
// every replica of ids (node masters+s*replicas+j) as a replica of its
// master ids[s], and all 16384 slots, each served by the same master as
// on the first node. (CLUSTER NODES, not CLUSTER SHARDS: any Redis with
// Cluster has it.)
func agree(ctx context.Context, clients []*redis.Client, ids []string, masters, replicas int) (bool, error) {
	var first []string
	for i, rdb := range clients {
		text, err := rdb.ClusterNodes(ctx).Result()
		if err != nil {
			return false, err
		}
		nodes, err := ParseClusterNodes(text)
		if err != nil {
			return false, fmt.Errorf("CLUSTER NODES: %w", err)
		}
		of := map[string]string{} // node ID -> the master it replicates
		owner := make([]string, 16384)
		for _, n := range nodes {
			if !n.IsMaster() {
				of[n.ID] = n.Master
				continue
			}
			for _, r := range n.Slots {
				for s := max(r[0], 0); s <= min(r[1], 16383); s++ {
					owner[s] = n.ID
				}
			}
		}
		for r := masters; r < len(ids); r++ {
			if of[ids[r]] != ids[ShardOf(r, masters, replicas)] {
				return false, nil
			}
		}
		if slices.Contains(owner, "") || (i > 0 && !slices.Equal(owner, first)) {
			return false, nil
		}
		first = owner
	}
	return true, nil
}

// ClusterNode is one line of CLUSTER NODES ("<id> <ip:port@cport>
// <flags> <master> <ping> <pong> <epoch> <link> <slot>...").
type ClusterNode struct {
	// ID is the node's cluster node ID.
	ID string
	// Addr is the node's announced ip:port (the bus port dropped).
	Addr string
	// Flags are its flags (myself, master, slave, fail?, fail, ...).
	Flags []string
	// Master is its master's cluster node ID, or "-".
	Master string
	// Slots are the ranges it serves ([lo, hi]); slots being migrated
	// or imported ("[...]") are left out.
	Slots [][2]int
}

// IsMaster reports whether the node's flags say master.
func (n ClusterNode) IsMaster() bool { return slices.Contains(n.Flags, "master") }

// ParseClusterNodes reads CLUSTER NODES's text.
func ParseClusterNodes(text string) ([]ClusterNode, error) {
	var out []ClusterNode
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) < 8 {
			return nil, fmt.Errorf("line %q: want 8 fields or more", l)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: addr, Flags: strings.Split(f[2], ","), Master: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("node %s: slots %q", f[0], s)
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// configSet runs CONFIG SET name value on the server at addr.
func configSet(ctx context.Context, addr, password, name, value string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.ConfigSet(ctx, name, value).Err(); err != nil {
		return fmt.Errorf("CONFIG SET %s %s: %w", name, value, err)
	}
	return nil
}

// waitAll polls ready on every client until all say true, bounded by ctx.
func waitAll(ctx context.Context, clients []*redis.Client, ready func(*redis.Client) (bool, error)) error {
	for {
		all, last := true, error(nil)
		for _, rdb := range clients {
			ok, err := ready(rdb)
			if err != nil {
				last = err
			}
			if !ok {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
