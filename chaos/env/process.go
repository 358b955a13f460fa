package env

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
)

// ProcessEnv is the process environment: redis-server and redis-sentinel
// child processes on free loopback ports, each in a directory of its own
// under one temporary root, and a Toxiproxy server (StartToxiproxy).
type ProcessEnv struct {
	spec Spec
	// replicaVars are the replicas' extra environment variables (a clock
	// behind the master's, Spec.ReplicaClockBehind).
	replicaVars []string
	log         *slog.Logger
	root        string
	local

	mu        sync.Mutex
	nodes     map[string]*procNode
	sentinels []*redisproc.Process
	closed    bool
}

type procNode struct {
	node  Node
	port  int
	dir   string
	extra []string // config lines for a restart
	env   []string // environment variables, for a restart too (a skewed clock)
	proc  *redisproc.Process
}

// nodeConf are the config lines of every Redis server of the environment:
// fast replication, no persistence, quick detection of a dead link.
var nodeConf = []string{
	"repl-diskless-sync yes",
	"repl-diskless-sync-delay 0",
	"repl-ping-replica-period 1",
	"repl-timeout 5",
	"save \"\"",
	"appendonly no",
}

// NewProcess starts the topology of spec as processes. On error everything
// started so far is stopped. Close stops it all.
func NewProcess(ctx context.Context, spec Spec, log *slog.Logger) (*ProcessEnv, error) {
	if _, err := redisproc.Binary(false); err != nil {
		return nil, fmt.Errorf("process environment: %w: %w", ErrUnavailable, err)
	}
	if _, err := redisproc.Binary(true); err != nil {
		return nil, fmt.Errorf("process environment: %w: %w", ErrUnavailable, err)
	}
	if log == nil {
		log = slog.Default()
	}
	spec = spec.WithDefaults()
	var replicaVars []string
	if spec.ReplicaClockBehind != 0 {
		var err error
		if replicaVars, err = redisproc.ClockBehind(spec.ReplicaClockBehind); err != nil {
			return nil, fmt.Errorf("process environment: replicas' clocks: %w: %w", ErrUnavailable, err)
		}
	}
	root, secret, err := newLocal("lockproof-env-*")
	if err != nil {
		return nil, fmt.Errorf("process environment: %w", err)
	}
	e := &ProcessEnv{spec: spec, replicaVars: replicaVars, log: log, root: root, nodes: map[string]*procNode{}}
	e.topo.Auth = Auth{Password: secret, SentinelPassword: secret}
	if err := e.start(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = e.Close(cctx)
		return nil, fmt.Errorf("process environment: %w", err)
	}
	return e, nil
}

// password is the environment's servers' and Sentinels' (Topology.Auth).
func (e *ProcessEnv) password() string { return string(e.topo.Auth.Password) }

func (e *ProcessEnv) start(ctx context.Context) error {
	toxi, err := StartToxiproxy(ctx)
	if err != nil {
		return err
	}
	e.toxi = toxi
	if e.spec.Cluster != nil {
		if err := e.startCluster(ctx); err != nil {
			return err
		}
		return e.startOthers(ctx)
	}
	e.topo.MasterName = e.spec.MasterName

	// Data nodes: start each, put its replication proxy in front, announce the proxy.
	for i := 0; i <= e.spec.Replicas; i++ {
		var vars []string
		if i > 0 {
			vars = e.replicaVars
		}
		n, err := e.startNode(ctx, NodeID(RoleData, i), RoleData, vars...)
		if err != nil {
			return err
		}
		e.topo.Data = append(e.topo.Data, n.node)
	}
	master := e.topo.Data[0]
	mh, mp, _ := net.SplitHostPort(master.Addr)
	for _, n := range e.topo.Data[1:] {
		if err := e.admin(ctx, n.ID, "REPLICAOF", mh, mp); err != nil {
			return err
		}
	}
	if err := e.waitReplicas(ctx, master.ID, e.spec.Replicas); err != nil {
		return err
	}

	if err := e.startOthers(ctx); err != nil {
		return err
	}

	// Sentinels monitor the master through its replication proxy.
	name := e.spec.MasterName
	conf := []string{
		fmt.Sprintf("sentinel monitor %s %s %s %d", name, mh, mp, Quorum(e.spec.Sentinels)),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, e.spec.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, e.spec.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
		fmt.Sprintf("sentinel auth-pass %s %s", name, e.password()),
	}
	for i := 0; i < e.spec.Sentinels; i++ {
		dir := filepath.Join(e.root, NodeID(RoleSentinel, i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", NodeID(RoleSentinel, i), err)
		}
		p, err := redisproc.Start(ctx, redisproc.Config{Sentinel: true, Dir: dir, Extra: conf, Password: e.password()})
		if err != nil {
			return fmt.Errorf("start %s: %w", NodeID(RoleSentinel, i), err)
		}
		e.mu.Lock()
		e.sentinels = append(e.sentinels, p)
		e.mu.Unlock()
		e.topo.Sentinels = append(e.topo.Sentinels, p.Addr)
	}
	if err := WaitSentinels(ctx, e.topo, e.spec.Replicas); err != nil {
		return err
	}
	e.log.Debug("process environment up", "master", master.Addr, "sentinels", e.topo.Sentinels, "root", e.root)
	return nil
}

// startOthers starts the fenced node and the Redlock masters.
func (e *ProcessEnv) startOthers(ctx context.Context) error {
	fenced, err := e.startNode(ctx, NodeID(RoleFenced, 0), RoleFenced)
	if err != nil {
		return err
	}
	e.topo.Fenced = fenced.node
	for i := 0; i < e.spec.Redlock; i++ {
		n, err := e.startNode(ctx, NodeID(RoleRedlock, i), RoleRedlock)
		if err != nil {
			return err
		}
		e.topo.Redlock = append(e.topo.Redlock, n.node)
	}
	return nil
}

// startCluster starts the Redis Cluster of the spec (ClusterSpec): each
// node with a replication proxy in front of its data port and a bus
// proxy in front of its cluster bus, which it announces as its own.
// Replicas run with the replicas' clock (Spec.ReplicaClockBehind).
func (e *ProcessEnv) startCluster(ctx context.Context) error {
	cs := *e.spec.Cluster
	id := func(i int) string { return NodeID(RoleCluster, i) }
	proxies := make([][2]string, cs.Masters*(1+cs.Replicas)) // repl, bus proxy names
	c, err := redisproc.StartCluster(ctx, redisproc.ClusterConfig{
		Masters: cs.Masters, Replicas: cs.Replicas, NodeTimeout: cs.NodeTimeout, Extra: nodeConf, Password: e.password(),
		Dir: func(i int) string {
			d := filepath.Join(e.root, id(i))
			_ = os.MkdirAll(d, 0o755) // Start reports a directory it cannot use
			return d
		},
		Env: func(i int) []string {
			if i < cs.Masters {
				return nil
			}
			return e.replicaVars
		},
		Announce: func(ctx context.Context, i int, addr string, bus int) (string, int, int, error) {
			repl, err := e.toxi.API.CreateProxy("repl-"+id(i), "127.0.0.1:0", addr)
			if err != nil {
				return "", 0, 0, fmt.Errorf("%s: create replication proxy: %w", id(i), err)
			}
			busp, err := e.toxi.API.CreateProxy("bus-"+id(i), "127.0.0.1:0", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)))
			if err != nil {
				return "", 0, 0, fmt.Errorf("%s: create bus proxy: %w", id(i), err)
			}
			proxies[i] = [2]string{repl.Name, busp.Name}
			host, port, err := redisproc.SplitHostPort(repl.Listen)
			if err != nil {
				return "", 0, 0, err
			}
			_, bport, err := redisproc.SplitHostPort(busp.Listen)
			return host, port, bport, err
		},
	})
	if err != nil {
		return err
	}
	for i, p := range c.Nodes {
		n := &procNode{
			node: Node{ID: id(i), Role: RoleCluster, Addr: c.Announced[i], Upstream: p.Addr,
				ReplProxy: proxies[i][0], BusProxy: proxies[i][1], Shard: redisproc.ShardOf(i, cs.Masters, cs.Replicas)},
			port: p.Port, dir: p.Dir, extra: c.Configs[i].Extra, env: c.Configs[i].Env, proc: p,
		}
		e.mu.Lock()
		e.nodes[n.node.ID] = n
		e.mu.Unlock()
		e.topo.Cluster = append(e.topo.Cluster, n.node)
	}
	e.topo.NodeTimeout = cs.NodeTimeout
	e.log.Debug("process cluster up", "nodes", e.topo.ClusterAddrs(), "root", e.root)
	return nil
}

// startNode starts one redis-server with the given extra environment
// variables; a data node gets its replication proxy and announces it.
func (e *ProcessEnv) startNode(ctx context.Context, id string, role Role, vars ...string) (*procNode, error) {
	dir := filepath.Join(e.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	p, err := redisproc.Start(ctx, redisproc.Config{Dir: dir, Extra: nodeConf, Env: vars, Password: e.password()})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	n := &procNode{node: Node{ID: id, Role: role, Addr: p.Addr, Upstream: p.Addr}, port: p.Port, dir: dir, env: vars, proc: p}
	n.extra = append([]string(nil), nodeConf...)
	e.mu.Lock()
	e.nodes[id] = n
	e.mu.Unlock()
	if role != RoleData {
		return n, nil
	}
	name := "repl-" + id
	px, err := e.toxi.API.CreateProxy(name, "127.0.0.1:0", p.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: create replication proxy: %w", id, err)
	}
	host, port, err := net.SplitHostPort(px.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s: replication proxy listens on %q: %w", id, px.Listen, err)
	}
	n.node.Addr, n.node.ReplProxy = px.Listen, name
	announce := []string{"replica-announce-ip " + host, "replica-announce-port " + port}
	n.extra = append(n.extra, announce...)
	for _, l := range announce {
		f := strings.Fields(l)
		if err := e.admin(ctx, id, "CONFIG", "SET", f[0], f[1]); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// admin runs one command on a node directly (not through any proxy).
func (e *ProcessEnv) admin(ctx context.Context, id string, args ...any) error {
	e.mu.Lock()
	n, ok := e.nodes[id]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("node %q: %w", id, ErrNoNode)
	}
	if err := Admin(ctx, e.topo.Auth, n.node.Upstream, args...); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// waitReplicas waits until the master reports want connected replicas online.
func (e *ProcessEnv) waitReplicas(ctx context.Context, masterID string, want int) error {
	e.mu.Lock()
	addr := e.nodes[masterID].node.Upstream
	e.mu.Unlock()
	if err := WaitReplicas(ctx, e.topo.Auth, addr, want); err != nil {
		return fmt.Errorf("%s: %w", masterID, err)
	}
	return nil
}

// newLocal makes the temporary root of an environment of local
// processes, and the password of its own that every server and Sentinel
// of it asks (issue 47): they listen on loopback, where any local user
// could otherwise send them commands in the middle of a run.
func newLocal(pattern string) (root string, secret Secret, err error) {
	if secret, err = NewSecret(); err != nil {
		return "", "", err
	}
	if root, err = os.MkdirTemp("", pattern); err != nil {
		return "", "", fmt.Errorf("temp dir: %w", err)
	}
	return root, secret, nil
}

// NewSecret is a fresh random password (128 bits, in hex), for the
// servers an environment starts.
func NewSecret() (Secret, error) {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	return Secret(hex.EncodeToString(pw)), nil
}

// local is what the environments of local processes (ProcessEnv,
// StoreEnv) share: their Toxiproxy server and their layout.
type local struct {
	toxi *ToxiServer
	topo Topology
}

// Kind implements Env.
func (e *local) Kind() Kind { return Process }

// Topology implements Env.
func (e *local) Topology() Topology { return e.topo }

// Proxies implements Env.
func (e *local) Proxies() ProxyServer {
	return ProxyServer{API: e.toxi.API, URL: e.toxi.URL, ListenHost: "127.0.0.1", DialHost: "127.0.0.1"}
}

// ProxyCount returns how many proxies the environment's Toxiproxy server holds.
func (e *local) ProxyCount() int { return e.toxi.ProxyCount() }

// Process returns the running process of a node (nil after Kill), for
// signals beyond the Env interface.
func (e *ProcessEnv) Process(nodeID string) (*redisproc.Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.nodes[nodeID]
	if !ok {
		return nil, fmt.Errorf("node %q: %w", nodeID, ErrNoNode)
	}
	return n.proc, nil
}

func (e *ProcessEnv) running(nodeID string) (*redisproc.Process, error) {
	p, err := e.Process(nodeID)
	if err != nil {
		return nil, err
	}
	if p == nil || p.Exited() {
		return nil, fmt.Errorf("node %q is not running", nodeID)
	}
	return p, nil
}

// Pause implements Env: SIGSTOP to the node's redis-server.
func (e *ProcessEnv) Pause(ctx context.Context, nodeID string) error {
	p, err := e.running(nodeID)
	if err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return p.Pause()
}

// Resume implements Env: SIGCONT.
func (e *ProcessEnv) Resume(ctx context.Context, nodeID string) error {
	p, err := e.running(nodeID)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return p.Resume()
}

// Kill implements Env: SIGKILL, and waits for the process to end.
func (e *ProcessEnv) Kill(ctx context.Context, nodeID string) error {
	p, err := e.running(nodeID)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", nodeID, err)
	}
	return nil
}

// Restart implements Env: a new redis-server on the node's port and
// directory, with its configuration (announce lines included) and no data.
// A data node comes back as a replica of the master the Sentinels report
// (unless that is itself).
func (e *ProcessEnv) Restart(ctx context.Context, nodeID string) error {
	e.mu.Lock()
	n, ok := e.nodes[nodeID]
	closed := e.closed
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("restart: node %q: %w", nodeID, ErrNoNode)
	}
	if closed {
		return fmt.Errorf("restart %s: environment closed", nodeID)
	}
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("restart %s: still running (kill it first)", nodeID)
	}
	extra := n.extra
	if n.node.Role == RoleData {
		// Come back as a replica of the master Sentinel reports (as Sentinel
		// would make it, only sooner: Sentinel waits 8s or more, and never
		// while in TILT mode on a loaded machine).
		if m, err := MasterAddr(ctx, e.topo); err == nil && m != n.node.Addr {
			h, port, _ := net.SplitHostPort(m)
			extra = append(append([]string(nil), extra...), "replicaof "+h+" "+port)
		}
	}
	p, err := redisproc.Start(ctx, redisproc.Config{Port: n.port, Dir: n.dir, Extra: extra, Env: n.env, Password: e.password()})
	if err != nil {
		return fmt.Errorf("restart %s on port %s: %w", nodeID, strconv.Itoa(n.port), err)
	}
	e.mu.Lock()
	old := n.proc
	n.proc = p
	e.mu.Unlock()
	if old != nil {
		// The old process held the port's reservation while the node was
		// down (the new one holds its own now); its directory is the
		// node's and stays.
		if err := old.Stop(); err != nil {
			return fmt.Errorf("restart %s: release the old process: %w", nodeID, err)
		}
	}
	return nil
}

// Close implements Env: it stops every process and the Toxiproxy server and
// removes the temporary root.
func (e *ProcessEnv) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	procs := append([]*redisproc.Process(nil), e.sentinels...)
	for _, n := range e.nodes {
		if n.proc != nil {
			procs = append(procs, n.proc)
		}
	}
	e.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.toxi != nil {
		if err := e.toxi.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(e.root); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", e.root, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close process environment: %w", err)
	}
	return nil
}
