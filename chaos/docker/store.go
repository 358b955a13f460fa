package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/redisproc"
)

// The container ports of a store's member: an etcd member listens for
// its clients on the Redis image's port and for its peers on the cluster
// bus's, so that run publishes both as it does a cluster node's.
const (
	storeClientPort = redisPort
	storePeerPort   = clusterBusPort
)

// startStore starts the consensus store of the spec (env.Spec Store) in
// containers: an etcd cluster of 3 members, each a container of the local
// etcd image (BuildEtcdImage) with its client port published on 127.0.0.1
// (its Node.Upstream, where the clients' own proxies lead) and its peer
// port behind a proxy on the network's gateway (its Node.PeerProxies),
// which it announces to its peers, so that cutting the proxy cuts it off
// from them; and the fenced Redis beside it. ZooKeeper is not offered in
// containers yet (its image would carry a JVM).
func (e *Env) startStore(ctx context.Context, o Options) error {
	if e.spec.Store != contract.TopologyEtcd {
		return fmt.Errorf("the %s store in containers: %w (it runs as processes)", e.spec.Store, env.ErrUnavailable)
	}
	img, err := BuildEtcdImage(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", env.ErrUnavailable, err)
	}
	e.topo.StoreKind = e.spec.Store
	fenced, err := e.startRedis(ctx, env.NodeID(env.RoleFenced, 0), env.RoleFenced, 0)
	if err != nil {
		return err
	}
	e.topo.Fenced = fenced.Node
	const members = 3
	nodes := make([]*node, members)
	adv := make([]string, members) // each member's peer proxy, which it announces
	var initial []string
	for i := range nodes {
		id := env.NodeID(env.RoleEtcd, i)
		client, err := redisproc.FreePort()
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		peer, err := redisproc.FreePort()
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		n := &node{Node: env.Node{ID: id, Role: env.RoleEtcd, Upstream: net.JoinHostPort(loopback, strconv.Itoa(client))},
			hostPort: client, busPort: peer, image: img.Ref, keep: true}
		n.Addr = n.Upstream
		px, err := e.gatewayProxy(id, "peer-"+id, net.JoinHostPort(loopback, strconv.Itoa(peer)))
		if err != nil {
			return err
		}
		// The peer proxy is the node's bus proxy for run's retries (a
		// port clash moves its upstream: retarget).
		n.BusProxy, n.PeerProxies = px.Name, []string{px.Name}
		hc := &http.Client{Timeout: 2 * time.Second}
		n.ready = func(ctx context.Context) error {
			_, err := etcdproc.StatusAt(ctx, hc, n.Upstream)
			return err
		}
		nodes[i], adv[i] = n, px.Listen
		initial = append(initial, "m"+strconv.Itoa(i)+"=http://"+px.Listen)
	}
	_, err = parallel(members, func(i int) (*node, error) {
		n := nodes[i]
		cmd := []string{"etcd", "--name", "m" + strconv.Itoa(i), "--data-dir", "/data/etcd",
			"--listen-client-urls", "http://0.0.0.0:6379", "--advertise-client-urls", "http://" + n.Upstream,
			"--listen-peer-urls", "http://0.0.0.0:16379", "--initial-advertise-peer-urls", "http://" + adv[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", "lockproof-" + e.ID,
			"--heartbeat-interval", "100", "--election-timeout", "500", "--strict-reconfig-check=false"}
		if err := e.run(ctx, n, cmd, storeClientPort, nil); err != nil {
			return nil, err
		}
		// A port clash may have moved its published peer port.
		if err := e.retarget(n); err != nil {
			return nil, err
		}
		return n, nil
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		e.topo.Store = append(e.topo.Store, n.Node)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.Leader(wctx); err != nil {
		return err
	}
	e.log.Debug("docker environment up", "id", e.ID, "store", e.spec.Store, "members", e.topo.StoreAddrs())
	return nil
}

// Leader implements env.Leaderer: it waits, within ctx, until the members
// that run, but those in skip, agree on a leader among them.
func (e *Env) Leader(ctx context.Context, skip ...string) (env.Node, error) {
	if e.topo.StoreKind == "" {
		return env.Node{}, fmt.Errorf("leader: %w", env.ErrNotStore)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		addrs := make([]string, len(e.topo.Store))
		for i, m := range e.topo.Store {
			n, err := e.node(m.ID)
			if err != nil {
				return env.Node{}, err
			}
			if st, err := e.state(ctx, n); err == nil && st.Running && !st.Paused && !slices.Contains(skip, m.ID) {
				addrs[i] = m.Upstream
			}
		}
		i, err := etcdproc.LeaderAmong(ctx, hc, addrs)
		if err == nil {
			return e.topo.Store[i], nil
		}
		select {
		case <-ctx.Done():
			return env.Node{}, fmt.Errorf("%s leader: %w (last: %v)", e.topo.StoreKind, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Isolate implements env.Leaderer: the member's peer proxy blackholed
// (env.CutOff).
func (e *Env) Isolate(ctx context.Context, nodeID string) (func(context.Context) error, error) {
	for _, m := range e.topo.Store {
		if m.ID == nodeID {
			return env.CutOff(ctx, e.toxi.API, e.topo.StoreKind, m)
		}
	}
	return nil, fmt.Errorf("isolate: node %q: %w", nodeID, env.ErrNoNode)
}

// Wipe implements env.Leaderer: not in containers (a member replaced
// with its data wiped runs as processes, env.StoreEnv).
func (e *Env) Wipe(ctx context.Context, nodeID string) error {
	return fmt.Errorf("wipe %s: %w in containers (the process environment does it)", nodeID, env.ErrUnsupported)
}
