package env

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/proc"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/zkproc"
)

// The roles of a consensus store's members (Spec.Store).
const (
	// RoleEtcd is a member of the etcd cluster (contract.TopologyEtcd).
	RoleEtcd Role = "etcd"
	// RoleZooKeeper is a server of the ZooKeeper ensemble
	// (contract.TopologyZooKeeper).
	RoleZooKeeper Role = "zookeeper"
)

// StoreEnv is the process environment of a consensus store
// (Spec.Store): an etcd cluster of 3 members (etcdproc) or a ZooKeeper
// ensemble of 3 servers (zkproc), the fenced Redis that holds the
// resources, and a Toxiproxy server.
//
// Every link passes a proxy:
//
//   - Client links: each member's client port, as for a Redis node: a
//     client's own proxies (Links) map the member's address (Node.Addr,
//     an endpoint of the store's client) to that client's proxy.
//   - Peer links: etcd members announce an inbound peer proxy each
//     (its raft streams and pipeline reach it there); each ZooKeeper
//     server reaches each other one through a quorum and an election
//     proxy of that ordered pair. Node.PeerProxies are the proxies of
//     every peer link of a member, in or out, so that blackholing them
//     all cuts it off from the others (a leader in a minority) while
//     its clients still reach it.
//
// Pause, Resume and Kill act on a member's process; Restart starts a
// killed member again on its ports with its data (a member wiped of its
// data needs a reconfiguration of the cluster: not done here).
type StoreEnv struct {
	spec Spec
	log  *slog.Logger
	root string
	local

	fenced *redisproc.Process
	etcd   *etcdproc.Cluster
	zk     *zkproc.Cluster

	// peerPorts release the ports of ZooKeeper's peer proxies
	// (reservePeerPort), once the proxies are gone.
	peerPorts []func() error

	mu      sync.Mutex
	members map[string]*proc.Member
	closed  bool
}

// ErrNotStore: the environment runs no consensus store.
var ErrNotStore = errors.New("not a consensus store's environment")

// NewStore starts the consensus store of spec (Spec.Store) as processes.
// On error everything started so far is stopped. Close stops it all.
func NewStore(ctx context.Context, spec Spec, log *slog.Logger) (*StoreEnv, error) {
	if !contract.IsStore(spec.Store) {
		return nil, fmt.Errorf("store environment: Spec.Store %q: want one of %v", spec.Store, contract.StoreTopologies())
	}
	if err := StoreMissing(spec.Store); err != nil {
		return nil, fmt.Errorf("store environment: %w: %w", ErrUnavailable, err)
	}
	if log == nil {
		log = slog.Default()
	}
	root, secret, err := newLocal("lockproof-store-*")
	if err != nil {
		return nil, fmt.Errorf("store environment: %w", err)
	}
	e := &StoreEnv{spec: spec, log: log, root: root, members: map[string]*proc.Member{}}
	// The store asks a login of its own (issue 62, item 9): its members
	// listen on loopback, where any local user could otherwise read or
	// write the locks' keys and nodes in the middle of a run.
	storeSecret, err := NewSecret()
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("store environment: %w", err)
	}
	e.topo.Auth = Auth{Password: secret, StoreUsername: StoreUser(spec.Store), StorePassword: storeSecret}
	e.topo.StoreKind = spec.Store
	if err := e.start(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = e.Close(cctx)
		return nil, fmt.Errorf("store environment (%s): %w", spec.Store, err)
	}
	return e, nil
}

// StoreUser is the user the process and Docker environments' store of
// topology logs in as: etcd's root (etcd enables its authentication
// only once a user root exists: the one user), ZooKeeper's digest
// identity lockproof.
func StoreUser(topology string) string {
	if topology == contract.TopologyZooKeeper {
		return "lockproof"
	}
	return "root"
}

// StoreBcryptCost is the work factor of the etcd password hashes of
// the environments' own stores (etcd's --bcrypt-cost): bcrypt's least,
// for a password that is a random 128-bit secret (NewSecret), so that a
// client's re-authentications do not cost the members tens of
// milliseconds each (etcdproc.ClusterConfig.BcryptCost).
const StoreBcryptCost = 4

// StoreMissing says what the process environment of the store named
// topology lacks on this machine (its binaries), or nil.
func StoreMissing(topology string) error {
	var errs []error
	if _, err := redisproc.Binary(false); err != nil {
		errs = append(errs, fmt.Errorf("the fenced resources' Redis: %w", err))
	}
	switch topology {
	case contract.TopologyEtcd:
		if _, err := etcdproc.Binary(); err != nil {
			errs = append(errs, err)
		}
	case contract.TopologyZooKeeper:
		if _, err := zkproc.Java(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StoreInstallHint says how to get what the store environments need.
const StoreInstallHint = "apt-get install -y redis-server etcd-server zookeeper"

func (e *StoreEnv) start(ctx context.Context) error {
	toxi, err := StartToxiproxy(ctx)
	if err != nil {
		return err
	}
	e.toxi = toxi
	dir := filepath.Join(e.root, string(RoleFenced))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p, err := redisproc.Start(ctx, redisproc.Config{Dir: dir, Extra: nodeConf, Password: string(e.topo.Auth.Password)})
	if err != nil {
		return fmt.Errorf("start %s: %w", RoleFenced, err)
	}
	e.fenced = p
	e.topo.Fenced = Node{ID: NodeID(RoleFenced, 0), Role: RoleFenced, Addr: p.Addr, Upstream: p.Addr}
	if e.spec.Store == contract.TopologyZooKeeper {
		return e.startZooKeeper(ctx)
	}
	return e.startEtcd(ctx)
}

// startEtcd starts the etcd cluster, each member announcing an inbound
// peer proxy of its own.
func (e *StoreEnv) startEtcd(ctx context.Context) error {
	peers := make([]string, 3)
	c, err := etcdproc.StartCluster(ctx, etcdproc.ClusterConfig{
		Members: 3,
		// A quick election (5 heartbeats): a leader killed or cut off is
		// replaced within a second, and the shortest lease etcd grants
		// (1.5 election timeouts, rounded up to a second) is 1s.
		HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		// The login's password is a random 128-bit secret: the cheapest
		// hash (etcdproc says why it matters).
		BcryptCost: StoreBcryptCost,
		Advertise: func(i int, peer, client string) (string, string, error) {
			px, err := e.toxi.API.CreateProxy("peer-"+NodeID(RoleEtcd, i), "127.0.0.1:0", peer)
			if err != nil {
				return "", "", fmt.Errorf("create peer proxy: %w", err)
			}
			peers[i] = px.Name
			return px.Listen, client, nil
		},
	})
	if err != nil {
		return err
	}
	e.etcd = c
	// etcd's authentication on: a client with no login, or another's,
	// is refused every request; the env's own (Wipe's member changes)
	// log in as root. Its status (Leader) asks none.
	if err := c.EnableAuth(ctx, 0, string(e.topo.Auth.StorePassword)); err != nil {
		return err
	}
	for i, m := range c.Members {
		id := NodeID(RoleEtcd, i)
		e.members[id] = &m.Member
		e.topo.Store = append(e.topo.Store, Node{ID: id, Role: RoleEtcd, Addr: m.ClientAddr, Upstream: m.ClientAddr, PeerProxies: []string{peers[i]}})
	}
	e.log.Debug("etcd environment up", "members", e.topo.StoreAddrs(), "root", e.root)
	return nil
}

// startZooKeeper starts the ZooKeeper ensemble, each server reaching each
// other one through a quorum and an election proxy of that ordered pair.
func (e *StoreEnv) startZooKeeper(ctx context.Context) error {
	peers := make([][]string, 3)
	c, err := zkproc.StartCluster(ctx, zkproc.ClusterConfig{
		Servers: 3,
		// A client must log in (digest) before its first request, and
		// the tree's root admits the env's identity alone (LockRoot
		// below): the lock's nodes carry its ACL.
		EnforceAuth: true,
		Route: func(from, to int, quorum, election string) (string, string, error) {
			var out []string
			for _, up := range []struct{ kind, addr string }{{"q", quorum}, {"e", election}} {
				port, release, err := proc.ReservePort(0)
				if err != nil {
					return "", "", fmt.Errorf("create peer proxy: %w", err)
				}
				e.peerPorts = append(e.peerPorts, release)
				px, err := e.toxi.API.CreateProxy(fmt.Sprintf("peer-%s-%d-%d-%s", RoleZooKeeper, from, to, up.kind), net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), up.addr)
				if err != nil {
					return "", "", fmt.Errorf("create peer proxy: %w", err)
				}
				peers[from] = append(peers[from], px.Name)
				peers[to] = append(peers[to], px.Name)
				out = append(out, px.Listen)
			}
			return out[0], out[1], nil
		},
	})
	if err != nil {
		return err
	}
	e.zk = c
	if err := zkproc.LockRoot(ctx, c.Servers[0].ClientAddr, e.topo.Auth.StoreUsername, string(e.topo.Auth.StorePassword)); err != nil {
		return err
	}
	for i, s := range c.Servers {
		id := NodeID(RoleZooKeeper, i)
		e.members[id] = &s.Member
		e.topo.Store = append(e.topo.Store, Node{ID: id, Role: RoleZooKeeper, Addr: s.ClientAddr, Upstream: s.ClientAddr, PeerProxies: peers[i]})
	}
	e.log.Debug("zookeeper environment up", "servers", e.topo.StoreAddrs(), "root", e.root)
	return nil
}

// Leader implements Leaderer: it waits, within ctx, until the members
// that run, but those named in skip, agree on a leader among them, and
// returns its node.
func (e *StoreEnv) Leader(ctx context.Context, skip ...string) (Node, error) {
	var skipped []int
	for i, n := range e.topo.Store {
		if m := e.member(n.ID); m == nil || !m.Running() || slices.Contains(skip, n.ID) {
			skipped = append(skipped, i)
		}
	}
	var i int
	var err error
	if e.zk != nil {
		i, err = e.zk.WaitLeader(ctx, skipped)
	} else {
		i, err = e.etcd.WaitLeader(ctx, skipped)
	}
	if err != nil {
		return Node{}, fmt.Errorf("%s leader: %w", e.topo.StoreKind, err)
	}
	return e.topo.Store[i], nil
}

func (e *StoreEnv) member(id string) *proc.Member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.members[id]
}

// node returns the member id names, or an error naming what it is.
func (e *StoreEnv) node(op, id string) (*proc.Member, error) {
	if id == e.topo.Fenced.ID {
		return nil, fmt.Errorf("%s %s: the fenced resources' Redis is not the lock's deployment: %w", op, id, ErrUnsupported)
	}
	m := e.member(id)
	if m == nil {
		return nil, fmt.Errorf("%s: node %q: %w", op, id, ErrNoNode)
	}
	return m, nil
}

// Pause implements Env: SIGSTOP to the member's process.
func (e *StoreEnv) Pause(ctx context.Context, nodeID string) error {
	m, err := e.node("pause", nodeID)
	if err != nil {
		return err
	}
	return m.Pause()
}

// Resume implements Env: SIGCONT.
func (e *StoreEnv) Resume(ctx context.Context, nodeID string) error {
	m, err := e.node("resume", nodeID)
	if err != nil {
		return err
	}
	return m.Resume()
}

// Kill implements Env: SIGKILL, and waits for the process to end.
func (e *StoreEnv) Kill(ctx context.Context, nodeID string) error {
	m, err := e.node("kill", nodeID)
	if err != nil {
		return err
	}
	return m.Kill()
}

// Restart implements Env: the killed member starts again on its ports
// and its data (its log and snapshot: a store's member that lost them
// must be removed and added again, which this environment does not do),
// and rejoins the cluster.
func (e *StoreEnv) Restart(ctx context.Context, nodeID string) error {
	m, err := e.node("restart", nodeID)
	if err != nil {
		return err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return fmt.Errorf("restart %s: environment closed", nodeID)
	}
	if m.Running() {
		return fmt.Errorf("restart %s: still running (kill it first)", nodeID)
	}
	return m.Launch()
}

// Wipe starts the killed member nodeID again with its data deleted: an
// etcd member is removed from the cluster and added again as a new
// member, as etcd replaces a member that lost its disk; a ZooKeeper
// server comes back with no log and no snapshot and syncs from the
// leader.
func (e *StoreEnv) Wipe(ctx context.Context, nodeID string) error {
	if _, err := e.node("wipe", nodeID); err != nil {
		return err
	}
	i := slices.IndexFunc(e.topo.Store, func(n Node) bool { return n.ID == nodeID })
	if e.zk != nil {
		return e.zk.Wipe(i)
	}
	return e.etcd.Wipe(ctx, i)
}

// Close implements Env: it stops the store's members, the fenced Redis
// and the Toxiproxy server, and removes the temporary root.
func (e *StoreEnv) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	var errs []error
	if e.etcd != nil {
		errs = append(errs, e.etcd.Stop())
	}
	if e.zk != nil {
		errs = append(errs, e.zk.Stop())
	}
	if e.fenced != nil {
		errs = append(errs, e.fenced.Stop())
	}
	if e.toxi != nil {
		errs = append(errs, e.toxi.Close(ctx))
	}
	for _, release := range e.peerPorts {
		errs = append(errs, release())
	}
	e.peerPorts = nil
	if err := os.RemoveAll(e.root); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", e.root, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store environment: %w", err)
	}
	return nil
}

// Isolate cuts member nodeID off from its peers, its clients still
// reaching it, until the heal it returns. The way differs by store:
//
//   - etcd: a blackhole (Toxiproxy's timeout toxic, timeout 0, both ways,
//     on its inbound peer proxy): the bytes are taken and held, so no
//     connection breaks. A refused or reset connection is not enough:
//     etcd's peers then fall back to a pipeline of POSTs to each other's
//     own addresses, and the member keeps leading (etcdproc says more).
//   - ZooKeeper: every proxy of a link to or from it disabled (refused,
//     and the open connections closed). A blackhole is not enough: the
//     others' election connections to it hang in their handshake, and
//     they do not elect among themselves within 15s.
func (e *StoreEnv) Isolate(ctx context.Context, nodeID string) (heal func(context.Context) error, err error) {
	for _, m := range e.topo.Store {
		if m.ID == nodeID {
			return CutOff(ctx, e.toxi.API, e.topo.StoreKind, m)
		}
	}
	return nil, fmt.Errorf("isolate: node %q: %w", nodeID, ErrNoNode)
}

// CutOff cuts the store member n off from its peers through its peer
// proxies on api, each store its own way (StoreEnv.Isolate says which),
// until the heal it returns.
func CutOff(ctx context.Context, api *toxiclient.Client, store string, n Node) (heal func(context.Context) error, err error) {
	var undo []func() error
	heal = func(context.Context) error {
		var errs []error
		for _, u := range undo {
			errs = append(errs, u())
		}
		undo = nil
		return errors.Join(errs...)
	}
	for _, name := range n.PeerProxies {
		if err := ctx.Err(); err != nil {
			return heal, err
		}
		p, err := api.Proxy(name)
		if err != nil {
			return heal, fmt.Errorf("isolate %s: proxy %s: %w", n.ID, name, err)
		}
		if store == contract.TopologyZooKeeper {
			// A disabled proxy closes its listener: ZooKeeper's peers
			// see a refused connection at once, as a cut-off server's do
			// (a black hole stalls their elections past the fault). Its
			// port is reserved (startZooKeeper), so Enable binds it again.
			if err := p.Disable(); err != nil {
				return heal, fmt.Errorf("isolate %s: disable %s: %w", n.ID, name, err)
			}
			undo = append(undo, p.Enable)
			continue
		}
		for _, stream := range []string{"upstream", "downstream"} {
			tox := "lp-blackhole-" + stream
			if _, err := p.AddToxic(tox, "timeout", stream, 1, toxiclient.Attributes{"timeout": 0}); err != nil {
				return heal, fmt.Errorf("isolate %s: blackhole %s: %w", n.ID, name, err)
			}
			undo = append(undo, func() error { return p.RemoveToxic(tox) })
		}
	}
	return heal, nil
}

// Leaderer is an environment of a consensus store that can name its
// leader (StoreEnv): the faults that strike the leader ask it. Leader
// waits until the members but those in skip agree on a leader.
type Leaderer interface {
	Leader(ctx context.Context, skip ...string) (Node, error)
	Isolate(ctx context.Context, nodeID string) (heal func(context.Context) error, err error)
	Wipe(ctx context.Context, nodeID string) error
}

// StoreLeader returns the leader of e's consensus store that the members
// but those in skip agree on, or an error wrapping ErrNotStore or
// ErrUnsupported.
func StoreLeader(ctx context.Context, e Env, skip ...string) (Node, error) {
	if e.Topology().StoreKind == "" {
		return Node{}, fmt.Errorf("leader: %w", ErrNotStore)
	}
	l, ok := e.(Leaderer)
	if !ok {
		return Node{}, fmt.Errorf("leader of the %s environment: %w", e.Kind(), ErrUnsupported)
	}
	return l.Leader(ctx, skip...)
}

// StoreAddrs are the store members' client addresses (Node.Addr): the
// endpoints of a store's client, which Links.Dial maps to the client's
// proxies.
func (t Topology) StoreAddrs() []string {
	out := make([]string, len(t.Store))
	for i, n := range t.Store {
		out[i] = n.Addr
	}
	return out
}
