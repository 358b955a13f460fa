package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/zkproc"
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
// from them; and the fenced Redis beside it. Or a ZooKeeper ensemble of 3
// servers (startZooKeeper).
func (e *Env) startStore(ctx context.Context, o Options) error {
	e.topo.StoreKind = e.spec.Store
	// The store asks a login of its own (issue 62, item 9): its client
	// ports are published on loopback, where any local user could
	// otherwise read or write the locks' keys and nodes during a run.
	pw, err := env.NewSecret()
	if err != nil {
		return err
	}
	e.topo.Auth.StoreUsername, e.topo.Auth.StorePassword = env.StoreUser(e.spec.Store), pw
	fenced, err := e.startRedis(ctx, env.NodeID(env.RoleFenced, 0), env.RoleFenced, 0)
	if err != nil {
		return err
	}
	e.topo.Fenced = fenced.Node
	if e.spec.Store == contract.TopologyZooKeeper {
		err = e.startZooKeeper(ctx)
	} else {
		err = e.startEtcd(ctx)
	}
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := e.Leader(wctx); err != nil {
		return err
	}
	if err := e.lockStore(wctx); err != nil {
		return err
	}
	e.log.Debug("docker environment up", "id", e.ID, "store", e.spec.Store, "members", e.topo.StoreAddrs())
	return nil
}

// lockStore makes the running store ask its login (topo.Auth's Store
// fields), as env.StoreEnv's does: etcd's authentication on (user root),
// or the ZooKeeper root's ACL admitting the env's digest identity alone
// (its servers enforce a digest login: startZooKeeper).
func (e *Env) lockStore(ctx context.Context) error {
	a, addr := e.topo.Auth, e.topo.Store[0].Upstream
	if e.spec.Store == contract.TopologyZooKeeper {
		return zkproc.LockRoot(ctx, addr, a.StoreUsername, string(a.StorePassword))
	}
	return etcdproc.EnableAuthAt(ctx, &http.Client{Timeout: 5 * time.Second}, addr, string(a.StorePassword))
}

// startEtcd starts the etcd members.
func (e *Env) startEtcd(ctx context.Context) error {
	img, err := BuildEtcdImage(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", env.ErrUnavailable, err)
	}
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
			"--heartbeat-interval", "100", "--election-timeout", "500", "--strict-reconfig-check=false",
			// The login's password is a random secret: the cheapest hash.
			"--bcrypt-cost", strconv.Itoa(env.StoreBcryptCost)}
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
	return nil
}

// The container ports of a ZooKeeper server: its clients', and its
// peers' (quorum and election).
const (
	zkClientPort   = "2181/tcp"
	zkQuorumPort   = "2888/tcp"
	zkElectionPort = "3888/tcp"
)

// startZooKeeper starts the ZooKeeper servers, each in a container of the
// local ZooKeeper image (BuildZooKeeperImage), its client port published
// on loopback, and its quorum and election ports too, behind a proxy on
// the network's gateway per ordered pair of servers: server i reaches
// server j through its own pair of proxies (i to j), as zkproc routes
// the processes, so that cutting every proxy of a server cuts it off.
func (e *Env) startZooKeeper(ctx context.Context) error {
	img, err := BuildZooKeeperImage(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", env.ErrUnavailable, err)
	}
	const servers = 3
	nodes := make([]*node, servers)
	for i := range nodes {
		id := env.NodeID(env.RoleZooKeeper, i)
		var ports [3]int
		for k := range ports {
			if ports[k], err = redisproc.FreePort(); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		n := &node{Node: env.Node{ID: id, Role: env.RoleZooKeeper, Upstream: net.JoinHostPort(loopback, strconv.Itoa(ports[0]))},
			hostPort: ports[0], image: img.Ref, keep: true,
			more: map[string]int{zkQuorumPort: ports[1], zkElectionPort: ports[2]}}
		n.Addr = n.Upstream
		n.ready = func(ctx context.Context) error {
			_, err := zkproc.ModeAt(ctx, n.Upstream)
			if errors.Is(err, zkproc.ErrNotServing) {
				return nil // it answers; serving waits for a quorum
			}
			return err
		}
		nodes[i] = n
	}
	// route[i][j] is how server i reaches server j: "host:quorum:election".
	route := make([][]string, servers)
	for i := range route {
		route[i] = make([]string, servers)
		for j, to := range nodes {
			if i == j {
				route[i][j] = "0.0.0.0:2888:3888"
				continue
			}
			var listen []string
			for _, k := range []struct{ kind, port string }{{"q", zkQuorumPort}, {"e", zkElectionPort}} {
				name := fmt.Sprintf("peer-%s-%d-%d-%s", env.RoleZooKeeper, i, j, k.kind)
				px, err := e.gatewayProxy(nodes[i].ID, name, net.JoinHostPort(loopback, strconv.Itoa(to.more[k.port])))
				if err != nil {
					return err
				}
				nodes[i].PeerProxies = append(nodes[i].PeerProxies, px.Name)
				nodes[j].PeerProxies = append(nodes[j].PeerProxies, px.Name)
				_, p, _ := net.SplitHostPort(px.Listen)
				listen = append(listen, p)
			}
			route[i][j] = e.gateway + ":" + listen[0] + ":" + listen[1]
		}
	}
	// The image holds the host's java at its own path.
	java, err := exec.LookPath("java")
	if err == nil {
		java, err = filepath.EvalSymlinks(java)
	}
	if err != nil {
		return fmt.Errorf("java: %w", err)
	}
	_, err = parallel(servers, func(i int) (*node, error) {
		n := nodes[i]
		conf := []string{"tickTime=100", "initLimit=20", "syncLimit=10", "dataDir=/data/data", "clientPort=2181",
			"admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok", "quorumListenOnAllIPs=true"}
		for j := range nodes {
			conf = append(conf, fmt.Sprintf("server.%d=%s", j+1, route[i][j]))
		}
		files := []testcontainers.ContainerFile{
			{Reader: strings.NewReader(strings.Join(conf, "\n") + "\n"), ContainerFilePath: "/data/zoo.cfg", FileMode: 0o644},
			{Reader: strings.NewReader(strconv.Itoa(i+1) + "\n"), ContainerFilePath: "/data/data/myid", FileMode: 0o644},
		}
		// Every client must log in (digest) before its first request.
		args := append(zkproc.ClusterConfig{EnforceAuth: true}.JVMOptions(), zkproc.ServerArgs("/data", "/data/zoo.cfg")...)
		if err := e.run(ctx, n, append([]string{java}, args...), zkClientPort, files); err != nil {
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
		var i int
		var err error
		if e.topo.StoreKind == contract.TopologyZooKeeper {
			i, err = zkproc.LeaderAmong(ctx, addrs)
		} else {
			i, err = etcdproc.LeaderAmong(ctx, hc, addrs)
		}
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
