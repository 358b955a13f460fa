package env

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/internal/redisproc"
)

// ErrNotCluster: the topology has no Redis Cluster (Topology.Cluster).
var ErrNotCluster = errors.New("not a cluster topology")

// ClusterView is one node's view of the cluster (CLUSTER NODES), by the
// topology's node IDs.
type ClusterView struct {
	// From is the ID of the node that answered.
	From string
	// Masters maps each master's node ID to the slot ranges it serves
	// ([lo, hi] pairs); a master with no slots is in it with none.
	Masters map[string][][2]int
	// ReplicaOf maps each replica's node ID to its master's.
	ReplicaOf map[string]string
	// Failed are the nodes flagged fail: failed by a majority of the
	// masters. A node's own suspicion (pfail, "fail?") is left out: on a
	// loaded machine it comes and goes with a late pong, and a view that
	// counted it would seldom agree with another.
	Failed []string
	// RedisIDs maps each node's topology ID to its cluster node ID.
	RedisIDs map[string]string
}

// Owner returns the node ID of the master serving slot, or "".
func (v ClusterView) Owner(slot int) string {
	for id, ranges := range v.Masters {
		for _, r := range ranges {
			if r[0] <= slot && slot <= r[1] {
				return id
			}
		}
	}
	return ""
}

// Replicas returns the node IDs of master's replicas, sorted.
func (v ClusterView) Replicas(master string) []string {
	var out []string
	for r, m := range v.ReplicaOf {
		if m == master {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// View asks the cluster node id (directly, not through a proxy) for its
// view of the cluster.
func View(ctx context.Context, t Topology, id string) (ClusterView, error) {
	n, err := t.Node(id)
	if err != nil {
		return ClusterView{}, err
	}
	if n.Role != RoleCluster {
		return ClusterView{}, fmt.Errorf("node %s: %w", id, ErrNotCluster)
	}
	c := AdminClient(t.Auth, n.Upstream)
	defer c.Close()
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return ClusterView{}, fmt.Errorf("CLUSTER NODES on %s: %w", id, err)
	}
	v, err := parseView(t, text)
	if err != nil {
		return ClusterView{}, fmt.Errorf("CLUSTER NODES on %s: %w", id, err)
	}
	v.From = id
	return v, nil
}

// parseView reads CLUSTER NODES's text, naming each node by the
// topology's ID for its announced address.
func parseView(t Topology, text string) (ClusterView, error) {
	byAddr := map[string]string{}
	for _, n := range t.Cluster {
		byAddr[n.Addr] = n.ID
	}
	v := ClusterView{Masters: map[string][][2]int{}, ReplicaOf: map[string]string{}, RedisIDs: map[string]string{}}
	lines, err := redisproc.ParseClusterNodes(text)
	if err != nil {
		return v, err
	}
	byRedisID := map[string]string{}
	for _, l := range lines {
		id, ok := byAddr[l.Addr]
		if !ok {
			return v, fmt.Errorf("node %s at %s: no node of the topology is announced there", l.ID, l.Addr)
		}
		byRedisID[l.ID] = id
		v.RedisIDs[id] = l.ID
		if slices.Contains(l.Flags, "fail") {
			v.Failed = append(v.Failed, id)
		}
		if l.IsMaster() {
			v.Masters[id] = l.Slots
		}
	}
	for _, l := range lines {
		if l.Master != "-" {
			if m, ok := byRedisID[l.Master]; ok {
				v.ReplicaOf[byAddr[l.Addr]] = m
			}
		}
	}
	slices.Sort(v.Failed)
	return v, nil
}

// DiscoverCluster asks the first of seeds (host:port) that answers for
// the nodes of its Redis Cluster (CLUSTER NODES) and returns them as a
// Topology's Cluster: the masters that serve slots, in the order of
// their first slot, then shard by shard their replicas, in the order of
// their addresses; IDs "cluster-0", ... Addr and Upstream are the
// addresses the cluster announces (a bring-your-own deployment's
// replication and bus links are its own: no proxies). A node flagged
// fail or noaddr, or a master with no slot, is refused: the harness
// starts from a healthy cluster. A view that is not is asked again for
// up to discoverWait (within ctx): news of a node's role takes a few
// gossip rounds to reach every node, as after a cluster is formed.
func DiscoverCluster(ctx context.Context, a Auth, seeds []string) ([]Node, error) {
	ctx, cancel := context.WithTimeout(ctx, discoverWait)
	defer cancel()
	for {
		var errs []error
		for _, seed := range seeds {
			c := AdminClient(a, seed)
			text, err := c.ClusterNodes(ctx).Result()
			c.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("CLUSTER NODES on %s: %w", seed, err))
				continue
			}
			nodes, err := clusterNodes(text)
			if err == nil {
				return nodes, nil
			}
			errs = append(errs, fmt.Errorf("CLUSTER NODES on %s: %w", seed, err))
			break // the seed answered: ask it again
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(errs...)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// discoverWait bounds how long DiscoverCluster waits for a healthy view.
const discoverWait = 10 * time.Second

// clusterNodes orders the lines of CLUSTER NODES as DiscoverCluster says.
func clusterNodes(text string) ([]Node, error) {
	lines, err := redisproc.ParseClusterNodes(text)
	if err != nil {
		return nil, err
	}
	var masters, replicas []redisproc.ClusterNode
	for _, l := range lines {
		for _, bad := range []string{"fail", "fail?", "noaddr", "handshake"} {
			if slices.Contains(l.Flags, bad) {
				return nil, fmt.Errorf("node %s at %s is %s: start from a healthy cluster", l.ID, l.Addr, bad)
			}
		}
		switch {
		case l.IsMaster() && len(l.Slots) == 0:
			return nil, fmt.Errorf("master %s at %s serves no slot: every master is to be a shard", l.ID, l.Addr)
		case l.IsMaster():
			masters = append(masters, l)
		default:
			replicas = append(replicas, l)
		}
	}
	if len(masters) == 0 {
		return nil, errors.New("no master serves a slot")
	}
	slices.SortFunc(masters, func(a, b redisproc.ClusterNode) int { return a.Slots[0][0] - b.Slots[0][0] })
	slices.SortFunc(replicas, func(a, b redisproc.ClusterNode) int { return strings.Compare(a.Addr, b.Addr) })
	shard := map[string]int{}
	var out []Node
	add := func(l redisproc.ClusterNode, s int) {
		out = append(out, Node{ID: NodeID(RoleCluster, len(out)), Role: RoleCluster, Addr: l.Addr, Upstream: l.Addr, Shard: s})
	}
	for i, m := range masters {
		shard[m.ID] = i
		add(m, i)
	}
	for i := range masters {
		for _, r := range replicas {
			if s, ok := shard[r.Master]; ok && s == i {
				add(r, i)
			}
		}
	}
	if len(out) != len(lines) {
		return nil, fmt.Errorf("%d of %d nodes are neither a master with slots nor one's replica", len(lines)-len(out), len(lines))
	}
	return out, nil
}

// KeySlot is the hash slot of key (CLUSTER KEYSLOT, asked of the first
// cluster node that answers).
func KeySlot(ctx context.Context, t Topology, key string) (int, error) {
	if len(t.Cluster) == 0 {
		return 0, ErrNotCluster
	}
	var errs []error
	for _, n := range t.Cluster {
		c := AdminClient(t.Auth, n.Upstream)
		s, err := c.ClusterKeySlot(ctx, key).Result()
		c.Close()
		if err == nil {
			return int(s), nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.ID, err))
	}
	return 0, fmt.Errorf("CLUSTER KEYSLOT %q: %w", key, errors.Join(errs...))
}

// Agreed returns the view every node in ids agrees on (the same master
// for every slot, and every master up), or an error saying where they
// differ.
func Agreed(ctx context.Context, t Topology, ids []string) (ClusterView, error) {
	var first ClusterView
	for i, id := range ids {
		v, err := View(ctx, t, id)
		if err != nil {
			return first, err
		}
		for m := range v.Masters {
			if slices.Contains(v.Failed, m) && len(v.Masters[m]) > 0 {
				return first, fmt.Errorf("%s sees master %s failing", id, m)
			}
		}
		if i == 0 {
			first = v
			continue
		}
		for slot := 0; slot < 16384; slot += 97 {
			if a, b := first.Owner(slot), v.Owner(slot); a != b {
				return first, fmt.Errorf("slot %d: %s says %s serves it, %s says %s", slot, first.From, a, id, b)
			}
		}
	}
	return first, nil
}

// WaitClusterOK waits, within ctx, until each cluster node in ids says
// cluster_state:ok (a restarted node serves nothing, CLUSTERDOWN, until it
// has heard from the others).
func WaitClusterOK(ctx context.Context, t Topology, ids ...string) error {
	for _, id := range ids {
		n, err := t.Node(id)
		if err != nil {
			return err
		}
		c := AdminClient(t.Auth, n.Upstream)
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			select {
			case <-ctx.Done():
				c.Close()
				return fmt.Errorf("wait for %s's cluster state ok: %w (last: %v)", id, ctx.Err(), err)
			case <-time.After(20 * time.Millisecond):
			}
		}
		c.Close()
	}
	return nil
}

// WaitClusterAgreed waits, within ctx, until the cluster nodes in ids
// (every cluster node when ids is empty) agree on who serves each slot
// and see no master failing, and returns that view.
func WaitClusterAgreed(ctx context.Context, t Topology, ids ...string) (ClusterView, error) {
	if len(t.Cluster) == 0 {
		return ClusterView{}, ErrNotCluster
	}
	if len(ids) == 0 {
		for _, n := range t.Cluster {
			ids = append(ids, n.ID)
		}
	}
	for {
		v, err := Agreed(ctx, t, ids)
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("wait for the cluster to agree: %w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CutClusterNode cuts what reaches the cluster node id from the other
// nodes: its replication and bus proxies are disabled (their connections
// closed), while clients still reach it through their own proxies. Its
// replicas stop replicating it, and the others' links to it fail.
//
// What the node itself sends is not cut: Redis dials each peer at the one
// address that peer announces, so no proxy can tell the node's own
// outgoing links from the others', and Redis binds its outgoing links on
// a best-effort basis only. The node's pings therefore still reach the
// others, which never fail it over on their own; a partition's nemesis
// promotes the replica itself (Takeover) when the node timeout would
// have. The returned heal enables the proxies again; call it even when
// the run fails.
func CutClusterNode(ctx context.Context, e Env, id string) (heal func(context.Context) error, err error) {
	n, err := e.Topology().Node(id)
	if err != nil {
		return nil, err
	}
	if n.Role != RoleCluster || n.BusProxy == "" {
		return nil, fmt.Errorf("cut %s: a cluster node behind its proxies: %w", id, ErrUnsupported)
	}
	api := e.Proxies().API
	var cut []string
	heal = func(context.Context) error {
		if err := enableAll(api, cut); err != nil {
			return fmt.Errorf("heal cut %s: %w", id, err)
		}
		return nil
	}
	for _, name := range []string{n.ReplProxy, n.BusProxy} {
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(fmt.Errorf("cut %s: %w", id, err), heal(context.WithoutCancel(ctx)))
		}
		if err := setProxyEnabled(api, name, false); err != nil {
			return nil, errors.Join(fmt.Errorf("cut %s: %w", id, err), heal(context.WithoutCancel(ctx)))
		}
		cut = append(cut, name)
	}
	return heal, nil
}

// Takeover makes the cluster replica id the master of its master's slots
// at once, without the other masters' votes (CLUSTER FAILOVER TAKEOVER):
// what an operator does when a master is lost with the majority, and
// what the partition nemeses do when the node timeout would have failed
// a cut master over. Writes the replica had not yet received are lost.
func Takeover(ctx context.Context, t Topology, id string) error {
	return clusterFailover(ctx, t, id, "TAKEOVER")
}

// ClusterFailover makes the cluster replica id the master of its master's
// slots the operator's way (CLUSTER FAILOVER): the master stops its
// clients, the replica catches up with it, then takes over. Nothing
// acknowledged is lost; the faults use it where the servers are not
// lockproof's to kill (bring your own).
func ClusterFailover(ctx context.Context, t Topology, id string) error {
	return clusterFailover(ctx, t, id)
}

// clusterFailover runs CLUSTER FAILOVER with opts on the cluster replica id.
func clusterFailover(ctx context.Context, t Topology, id string, opts ...any) error {
	n, err := t.Node(id)
	if err != nil {
		return err
	}
	if n.Role != RoleCluster {
		return fmt.Errorf("cluster failover on %s: %w", id, ErrNotCluster)
	}
	return Admin(ctx, t.Auth, n.Upstream, append([]any{"CLUSTER", "FAILOVER"}, opts...)...)
}

// enableAll enables the proxies named names (the heal of a cut or a
// refusal), every one of them whatever the others' errors.
func enableAll(api *toxiclient.Client, names []string) error {
	var errs []error
	for _, name := range names {
		if err := setProxyEnabled(api, name, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setProxyEnabled enables or disables (closing its connections) the
// proxy named name.
func setProxyEnabled(api *toxiclient.Client, name string, on bool) error {
	p, err := api.Proxy(name)
	if err != nil {
		return fmt.Errorf("proxy %s: %w", name, err)
	}
	p.Enabled = on
	if err := p.Save(); err != nil {
		return fmt.Errorf("proxy %s: enabled=%v: %w", name, on, err)
	}
	return nil
}

// InFront returns every proxy in front of node id (the clients' own, and
// a cluster node's replication and bus proxies), ordered by name.
func InFront(e Env, id string) ([]*toxiclient.Proxy, error) {
	n, err := e.Topology().Node(id)
	if err != nil {
		return nil, err
	}
	all, err := e.Proxies().API.Proxies()
	if err != nil {
		return nil, fmt.Errorf("proxies in front of %s: %w", id, err)
	}
	bus := ""
	if p, ok := all[n.BusProxy]; ok && n.BusProxy != "" {
		bus = p.Upstream
	}
	names := make([]string, 0, len(all))
	for name, p := range all {
		if p.Upstream == n.Upstream || (bus != "" && p.Upstream == bus) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]*toxiclient.Proxy, len(names))
	for i, name := range names {
		out[i] = all[name]
	}
	return out, nil
}

// RefuseNode disables every proxy in front of node id (InFront) until
// the returned undo enables them again: while the node is down, a dial
// through any of them is refused, as a dial of a killed process's port
// is. A nemesis that kills a node does it, because through an enabled
// proxy a dead process would accept each connection and drop it once the
// request is sent (the proxy's own dial of the dead upstream fails): an
// answer no dead process gives, whose outcome its client cannot know, so
// that clients spin on unknown outcomes (seen: 1,367 in one 4s failover)
// where a refused dial tells them the command was never sent. Call undo
// when the node accepts again (Crash does both in order).
func RefuseNode(ctx context.Context, e Env, id string) (undo func(context.Context) error, err error) {
	front, err := InFront(e, id)
	if err != nil {
		return nil, err
	}
	api := e.Proxies().API
	var off []string
	undo = func(context.Context) error {
		err := enableAll(api, off)
		off = nil
		if err != nil {
			return fmt.Errorf("accept %s again: %w", id, err)
		}
		return nil
	}
	for _, p := range front {
		if !p.Enabled {
			continue
		}
		if err := setProxyEnabled(api, p.Name, false); err != nil {
			return nil, errors.Join(fmt.Errorf("refuse %s: %w", id, err), undo(context.WithoutCancel(ctx)))
		}
		off = append(off, p.Name)
	}
	return undo, nil
}

// Crash crashes node id as a process crash looks from outside: the
// proxies in front of it refuse (RefuseNode), then the node is killed.
// The returned restart starts it again and, once it answers, lets its
// proxies accept again. In that order no dial is accepted and dropped
// while the node is down: between a kill and a refusal that follows it,
// and between an accepting proxy and a node not yet listening (a
// container's published port accepts before its server listens), each
// such dial would be an outcome its client cannot know (seen on Docker:
// 118 unknown acquires in one failover, where processes gave 3).
func Crash(ctx context.Context, e Env, id string) (restart func(context.Context) error, err error) {
	undo, err := RefuseNode(ctx, e, id)
	if err != nil {
		return nil, err
	}
	if err := e.Kill(ctx, id); err != nil {
		return nil, errors.Join(err, undo(context.WithoutCancel(ctx)))
	}
	return func(ctx context.Context) error {
		if err := e.Restart(ctx, id); err != nil {
			return err
		}
		return undo(ctx)
	}, nil
}
