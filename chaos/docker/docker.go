// Package docker is the Docker chaos environment of lockproof: the topology of
// package env (a Redis master with replicas watched by Sentinels, a separate
// Redis for fenced resources, optional independent Redlock masters) run as
// containers through testcontainers-go, every link to a Redis server passing a
// real Toxiproxy proxy.
//
// Layout. All containers join one private bridge network made for the
// environment. Each Redis and Sentinel container publishes its port on
// 127.0.0.1 only, at a host port chosen once (so a restarted container keeps
// its address). The Toxiproxy server runs in this process (env.StartToxiproxy):
//
//   - client proxies (made by env.NewLinks) listen on 127.0.0.1 and forward
//     to a node's published port (Node.Upstream);
//   - each data node's replication proxy ("repl-<id>") listens on the
//     network's gateway IP, the host's address on that network, so that the
//     containers reach it; the node announces that address
//     (replica-announce-ip/port), replicas replicate through it and the
//     Sentinels monitor through it (Node.Addr).
//
// Why Toxiproxy runs on the host and not in a container: env.NewLinks makes
// client proxies at any time on port 0, which a container could not publish
// after its start; on the host every proxy is reachable at once, there is no
// second image to build, and containers reach host proxies through the
// network gateway. The price: the host must accept connections from the
// network to the gateway IP (true for a default Docker engine on Linux).
//
// Images. The Redis image is, in this order: Options.Image, the environment
// variable LOCKPROOF_REDIS_IMAGE (e.g. "redis:7", pulled when missing), or a
// local image built FROM scratch out of the host's redis-server and its
// libraries (BuildRedisImage; nothing is pulled). When a named image can be
// neither found nor pulled, the local one is built instead and a warning is
// logged.
//
// Cleanup. No Ryuk reaper is used (its image cannot be pulled offline):
// TESTCONTAINERS_RYUK_DISABLED is set to "true" unless it is already set, and
// Close removes every container and the network itself; tests call Close from
// t.Cleanup. Every container carries the label LabelEnv (value: Env.ID), so
// leftovers can be found (Leftovers), and LabelOwner, so that PruneStale can
// remove what a test binary killed by a panic or a timeout left behind.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/internal/proc"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redisproc"
)

// Names of labels and environment variables.
const (
	// LabelEnv is set on every container and network of an environment; its value is Env.ID.
	LabelEnv = "org.lockproof.chaos.env"
	// LabelNode names the node (data-0, sentinel-1, fenced, ...) a container runs.
	LabelNode = "org.lockproof.chaos.node"
	// LabelOwner is "hostname/pid" of the process that made a container or network (see PruneStale).
	LabelOwner = "org.lockproof.chaos.owner"
	// ImageEnvVar names the Redis image to run instead of the locally built one.
	ImageEnvVar = "LOCKPROOF_REDIS_IMAGE"
	// RyukEnvVar is testcontainers' switch for its reaper, set to "true" when unset.
	RyukEnvVar = "TESTCONTAINERS_RYUK_DISABLED"
)

const (
	redisPort    = "6379/tcp"
	sentinelPort = "26379/tcp"
	loopback     = "127.0.0.1"
	// cleanupTimeout bounds the cleanup after a failed start.
	cleanupTimeout = 60 * time.Second
)

// nodeArgs are the command-line options of every Redis server: fast
// replication, no persistence, quick detection of a dead link (the same
// configuration as the process environment).
var nodeArgs = []string{
	"--port", "6379",
	"--protected-mode", "no",
	"--save", "",
	"--appendonly", "no",
	"--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0",
	"--repl-ping-replica-period", "1",
	"--repl-timeout", "5",
}

// Options tune a Docker environment beyond its env.Spec.
type Options struct {
	// Image is the Redis image; "" reads LOCKPROOF_REDIS_IMAGE, and when
	// that is empty too, builds (or reuses) the local image.
	Image string
	// Logger receives progress at Debug and fallbacks at Warn; nil uses slog.Default().
	Logger *slog.Logger
}

// Env is a running Docker environment. It implements env.Env and is safe
// for concurrent use.
type Env struct {
	// ID names this environment; it is the value of LabelEnv on its containers and network.
	ID string

	spec    env.Spec
	log     *slog.Logger
	cli     *testcontainers.DockerClient
	toxi    *env.ToxiServer
	net     *testcontainers.DockerNetwork
	gateway string
	image   Image
	topo    env.Topology

	mu        sync.Mutex
	nodes     map[string]*node // by node ID
	sentinels []*node
	closed    bool
}

// node is one container.
type node struct {
	env.Node
	hostPort int
	ctr      testcontainers.Container
}

var _ env.Env = (*Env)(nil)

// New starts a Docker environment with default Options; it is an env.Constructor.
func New(ctx context.Context, spec env.Spec) (env.Env, error) {
	e, err := Start(ctx, spec, Options{})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Available reports whether a Docker engine answers within 5 seconds.
func Available(ctx context.Context) bool {
	disableRyuk(nil)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return false
	}
	defer cli.Close()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err == nil
}

// disableRyuk turns testcontainers' reaper off unless the user chose.
func disableRyuk(log *slog.Logger) {
	if _, set := os.LookupEnv(RyukEnvVar); set {
		return
	}
	_ = os.Setenv(RyukEnvVar, "true")
	if log != nil {
		log.Debug("docker environment: set " + RyukEnvVar + "=true; Close removes all containers")
	}
}

// Start builds or finds the Redis image, starts the topology of spec and
// waits until every Sentinel sees the master, the other Sentinels and the
// replicas. On error everything started so far is removed. Close stops it all.
func Start(ctx context.Context, spec env.Spec, o Options) (*Env, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	disableRyuk(log)
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("docker environment: id: %w", err)
	}
	e := &Env{ID: hex.EncodeToString(id[:]), spec: spec.WithDefaults(), log: log, nodes: map[string]*node{}}
	if err := e.start(ctx, o); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := e.Close(cctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("docker environment: %w", err)
	}
	return e, nil
}

func (e *Env) start(ctx context.Context, o Options) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker client: %w: %w", env.ErrUnavailable, err)
	}
	e.cli = cli
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker engine: %w: %w", env.ErrUnavailable, err)
	}
	if e.image, err = RedisImage(ctx, o.Image, e.log); err != nil {
		return err
	}
	e.log.Debug("docker environment: image", "ref", e.image.Ref, "built", e.image.Built, "took", e.image.Took)

	if e.toxi, err = env.StartToxiproxy(ctx); err != nil {
		return err
	}
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(e.labels("network")))
	if err != nil {
		return fmt.Errorf("create network: %w", err)
	}
	e.mu.Lock()
	e.net = nw
	e.mu.Unlock()
	if e.gateway, err = e.gatewayIP(ctx); err != nil {
		return err
	}
	e.topo.MasterName = e.spec.MasterName

	// All Redis servers start at once; then the replicas follow the master.
	type want struct {
		id   string
		role env.Role
	}
	var servers []want
	for i := 0; i <= e.spec.Replicas; i++ {
		servers = append(servers, want{fmt.Sprintf("data-%d", i), env.RoleData})
	}
	servers = append(servers, want{"fenced", env.RoleFenced})
	for i := 0; i < e.spec.Redlock; i++ {
		servers = append(servers, want{fmt.Sprintf("redlock-%d", i), env.RoleRedlock})
	}
	started, err := parallel(len(servers), func(i int) (*node, error) {
		return e.startRedis(ctx, servers[i].id, servers[i].role)
	})
	if err != nil {
		return err
	}
	for _, n := range started {
		switch n.Role {
		case env.RoleData:
			e.topo.Data = append(e.topo.Data, n.Node)
		case env.RoleFenced:
			e.topo.Fenced = n.Node
		default:
			e.topo.Redlock = append(e.topo.Redlock, n.Node)
		}
	}
	master := e.topo.Data[0]
	mh, mp, _ := net.SplitHostPort(master.Addr)
	for _, n := range e.topo.Data[1:] {
		if err := e.admin(ctx, n.Upstream, "REPLICAOF", mh, mp); err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
	}
	if err := e.waitReplicas(ctx, master.Upstream, e.spec.Replicas); err != nil {
		return err
	}

	name := e.spec.MasterName
	conf := strings.Join([]string{
		"port 26379",
		"protected-mode no",
		"dir /data",
		fmt.Sprintf("sentinel monitor %s %s %s %d", name, mh, mp, env.Quorum(e.spec.Sentinels)),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, e.spec.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, e.spec.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
	}, "\n") + "\n"
	sentinels, err := parallel(e.spec.Sentinels, func(i int) (*node, error) {
		return e.startSentinel(ctx, fmt.Sprintf("sentinel-%d", i), conf)
	})
	if err != nil {
		return err
	}
	for _, n := range sentinels {
		e.topo.Sentinels = append(e.topo.Sentinels, n.Upstream)
	}
	if err := env.WaitSentinels(ctx, e.topo, e.spec.Replicas); err != nil {
		return err
	}
	e.log.Debug("docker environment up", "id", e.ID, "network", nw.Name, "gateway", e.gateway,
		"master", master.Addr, "sentinels", e.topo.Sentinels)
	return nil
}

// parallel runs f(0..n-1) at once and returns the results in order, or all errors joined.
func parallel(n int, f func(i int) (*node, error)) ([]*node, error) {
	out := make([]*node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = f(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// RedisImage returns the Redis image to run: ref, else the image named by
// LOCKPROOF_REDIS_IMAGE, else the local image (BuildRedisImage). A named
// image missing locally is pulled (at most 2 minutes); when that fails the
// local image is built instead and log gets a warning.
func RedisImage(ctx context.Context, ref string, log *slog.Logger) (Image, error) {
	if log == nil {
		log = slog.Default()
	}
	if ref == "" {
		ref = os.Getenv(ImageEnvVar)
	}
	if ref == "" {
		return BuildRedisImage(ctx)
	}
	start := time.Now()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("image %s: docker client: %w", ref, err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return Image{Ref: ref, Took: time.Since(start)}, nil
	} else if !errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("image %s: inspect: %w", ref, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = pull(pctx, cli, ref)
	if err == nil {
		return Image{Ref: ref, Took: time.Since(start)}, nil
	}
	log.Warn("docker environment: cannot pull the Redis image; building the local one instead", "image", ref, "err", err)
	return BuildRedisImage(ctx)
}

func pull(ctx context.Context, cli *testcontainers.DockerClient, ref string) error {
	rc, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("pull %s: not present afterwards: %w", ref, err)
	}
	return nil
}

// gatewayIP returns the IPv4 gateway of the environment's network: the
// host's address on it.
func (e *Env) gatewayIP(ctx context.Context) (string, error) {
	res, err := e.cli.NetworkInspect(ctx, e.net.ID, client.NetworkInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", e.net.Name, err)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway.String(), nil
		}
	}
	return "", fmt.Errorf("network %s: no IPv4 gateway in %+v", e.net.Name, res.Network.IPAM.Config)
}

func (e *Env) labels(nodeID string) map[string]string {
	return map[string]string{LabelEnv: e.ID, LabelNode: nodeID, LabelOwner: owner()}
}

// owner is the value of LabelOwner for this process.
func owner() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// PruneStale removes the containers and networks of environments whose
// owning process (LabelOwner) ran on this host and is gone: what a test
// binary killed by a panic or a timeout left behind, as no reaper runs. It
// returns how many containers and networks it removed.
func PruneStale(ctx context.Context) (int, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune: docker client: %w", err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	stale := func(labels map[string]string) bool {
		h, pid, ok := strings.Cut(labels[LabelOwner], "/")
		if !ok || h != host {
			return false
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 || n == os.Getpid() {
			return false
		}
		return !proc.Alive(n)
	}
	f := make(client.Filters).Add("label", LabelEnv)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("prune: list containers: %w", err)
	}
	removed := 0
	var errs []error
	for _, c := range cs.Items {
		if !stale(c.Labels) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("prune: remove container %.12s: %w", c.ID, err))
			continue
		}
		removed++
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return removed, errors.Join(append(errs, fmt.Errorf("prune: list networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if !stale(n.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("prune: remove network %s: %w", n.Name, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// startRedis starts one redis-server container; a data node gets its
// replication proxy first and announces it.
func (e *Env) startRedis(ctx context.Context, id string, role env.Role) (*node, error) {
	port, err := redisproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	n := &node{Node: env.Node{ID: id, Role: role, Upstream: net.JoinHostPort(loopback, strconv.Itoa(port))}, hostPort: port}
	n.Addr = n.Upstream
	args := append([]string{"redis-server"}, nodeArgs...)
	if role == env.RoleData {
		name := "repl-" + id
		px, err := e.toxi.API.CreateProxy(name, net.JoinHostPort(e.gateway, "0"), n.Upstream)
		if err != nil {
			return nil, fmt.Errorf("%s: create replication proxy: %w", id, err)
		}
		host, pport, err := net.SplitHostPort(px.Listen)
		if err != nil {
			return nil, fmt.Errorf("%s: replication proxy listens on %q: %w", id, px.Listen, err)
		}
		n.Addr, n.ReplProxy = px.Listen, name
		args = append(args, "--replica-announce-ip", host, "--replica-announce-port", pport)
	}
	if err := e.run(ctx, n, args, redisPort, nil); err != nil {
		return nil, err
	}
	if role == env.RoleData && n.hostPort != port { // a port clash moved it
		if err := e.retarget(n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// retarget points the node's replication proxy at its current upstream.
func (e *Env) retarget(n *node) error {
	px, err := e.toxi.API.Proxy(n.ReplProxy)
	if err != nil {
		return fmt.Errorf("%s: replication proxy: %w", n.ID, err)
	}
	px.Upstream = n.Upstream
	if err := px.Save(); err != nil {
		return fmt.Errorf("%s: retarget replication proxy to %s: %w", n.ID, n.Upstream, err)
	}
	return nil
}

// startSentinel starts one Sentinel container with the given configuration.
func (e *Env) startSentinel(ctx context.Context, id, conf string) (*node, error) {
	port, err := redisproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	n := &node{Node: env.Node{ID: id, Upstream: net.JoinHostPort(loopback, strconv.Itoa(port))}, hostPort: port}
	n.Addr = n.Upstream
	files := []testcontainers.ContainerFile{{
		Reader: strings.NewReader(conf), ContainerFilePath: "/data/sentinel.conf", FileMode: 0o666,
	}}
	if err := e.run(ctx, n, []string{"redis-server", "/data/sentinel.conf", "--sentinel"}, sentinelPort, files); err != nil {
		return nil, err
	}
	return n, nil
}

// run creates and starts n's container with its port published on
// 127.0.0.1:n.hostPort (another free port if that one was taken meanwhile),
// records it for Close, and waits until it answers PING.
func (e *Env) run(ctx context.Context, n *node, cmd []string, port string, files []testcontainers.ContainerFile) error {
	p, err := network.ParsePort(port)
	if err != nil {
		return fmt.Errorf("%s: port %q: %w", n.ID, port, err)
	}
	data := len(files) == 0 // Redis servers keep their data in a tmpfs: empty after a restart
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			if n.hostPort, err = redisproc.FreePort(); err != nil {
				return fmt.Errorf("%s: %w", n.ID, err)
			}
			n.Upstream = net.JoinHostPort(loopback, strconv.Itoa(n.hostPort))
			if n.ReplProxy == "" {
				n.Addr = n.Upstream
			}
		}
		hostPort := strconv.Itoa(n.hostPort)
		req := testcontainers.ContainerRequest{
			Image:          e.image.Ref,
			Name:           "lockproof-" + e.ID + "-" + n.ID,
			Cmd:            cmd,
			ExposedPorts:   []string{port},
			Labels:         e.labels(n.ID),
			Networks:       []string{e.net.Name},
			NetworkAliases: map[string][]string{e.net.Name: {n.ID}},
			Files:          files,
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{p: {{HostIP: netip.MustParseAddr(loopback), HostPort: hostPort}}}
				if data {
					hc.Tmpfs = map[string]string{"/data": "rw,mode=1777"}
				}
			},
		}
		ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
			ContainerRequest: req, Started: true, Logger: printfLogger{e.log},
		})
		if ctr != nil && err != nil { // a failed start: remove it before retrying (Close would too)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = e.remove(rctx, ctr.GetContainerID())
			cancel()
		}
		if err == nil {
			n.ctr = ctr
			e.mu.Lock()
			if strings.HasPrefix(n.ID, "sentinel-") {
				e.sentinels = append(e.sentinels, n)
			} else {
				e.nodes[n.ID] = n
			}
			e.mu.Unlock()
		}
		if err == nil {
			return e.waitPing(ctx, n)
		}
		last = fmt.Errorf("start %s on 127.0.0.1:%s: %w", n.ID, hostPort, err)
		if !strings.Contains(err.Error(), "allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return last
}

// waitPing waits (at most 30s) until the node answers PING on its published port.
func (e *Env) waitPing(ctx context.Context, n *node) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: n.Upstream, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	for {
		err := c.Ping(wctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s at %s: no PONG: %w (last: %v)%s", n.ID, n.Upstream, wctx.Err(), err, e.logTail(n))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the end of a container's log, for error messages.
func (e *Env) logTail(n *node) string {
	if n.ctr == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := n.ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return "; log: " + strings.TrimSpace(tail(string(b), 1500))
}

// admin runs one command on a node directly (its published port, no proxy).
func (e *Env) admin(ctx context.Context, addr string, args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%v on %s: %w", args, addr, err)
	}
	return nil
}

// waitReplicas waits (at most 30s) until the master reports want replicas online.
func (e *Env) waitReplicas(ctx context.Context, addr string, want int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		info, err := c.Info(wctx, "replication").Result()
		if err == nil && strings.Count(info, "state=online") >= want {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("wait for %d replicas of %s: %w (last INFO: %q, %v); the containers must reach "+
				"the replication proxies on the host at the network gateway %s: does a host firewall block it?",
				want, addr, wctx.Err(), info, err, e.gateway)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kind implements env.Env.
func (e *Env) Kind() env.Kind { return env.Docker }

// Topology implements env.Env.
func (e *Env) Topology() env.Topology { return e.topo }

// Proxies implements env.Env: client proxies listen and are dialled on 127.0.0.1.
func (e *Env) Proxies() env.ProxyServer {
	return env.ProxyServer{API: e.toxi.API, URL: e.toxi.URL, ListenHost: loopback, DialHost: loopback}
}

// ProxyCount returns how many proxies the environment's Toxiproxy server holds.
func (e *Env) ProxyCount() int { return e.toxi.ProxyCount() }

// Image returns the Redis image the environment runs.
func (e *Env) Image() Image { return e.image }

// Gateway returns the host's IP on the environment's network, where the
// replication proxies listen.
func (e *Env) Gateway() string { return e.gateway }

// NetworkName returns the name of the environment's Docker network.
func (e *Env) NetworkName() string { return e.net.Name }

// ContainerID returns the Docker ID of the container that runs a node
// (data-N, fenced, redlock-N, sentinel-N), for faults beyond env.Env.
func (e *Env) ContainerID(nodeID string) (string, error) {
	n, err := e.node(nodeID)
	if err != nil {
		return "", err
	}
	return n.ctr.GetContainerID(), nil
}

func (e *Env) node(id string) (*node, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("node %q: %w", id, ErrClosed)
	}
	if n, ok := e.nodes[id]; ok {
		return n, nil
	}
	for _, n := range e.sentinels {
		if n.ID == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %q: %w", id, env.ErrNoNode)
}

// ErrClosed: the environment was closed.
var ErrClosed = errors.New("docker environment closed")

// state returns the container state of a node.
func (e *Env) state(ctx context.Context, n *node) (*container.State, error) {
	res, err := e.cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", n.ID, err)
	}
	if res.Container.State == nil {
		return nil, fmt.Errorf("inspect %s: no state", n.ID)
	}
	return res.Container.State, nil
}

// Pause implements env.Env: docker pause (the cgroup freezer) of the node's
// container: it keeps its connections but answers nothing until Resume.
func (e *Env) Pause(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if _, err := e.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", nodeID, err)
	}
	return nil
}

// Resume implements env.Env: docker unpause.
func (e *Env) Resume(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if _, err := e.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("resume %s: %w", nodeID, err)
	}
	return nil
}

// Kill implements env.Env: docker kill -s KILL (a paused container is
// unpaused first, as Docker refuses to kill it), then waits until the
// container has stopped.
func (e *Env) Kill(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	st, err := e.state(ctx, n)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if !st.Running {
		return fmt.Errorf("kill %s: not running (%s)", nodeID, st.Status)
	}
	if st.Paused {
		if err := e.Resume(ctx, nodeID); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
	}
	if _, err := e.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", nodeID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		st, err := e.state(wctx, n)
		if err == nil && !st.Running {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("kill %s: still running: %w (last: %v)", nodeID, wctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restart implements env.Env: docker start of the killed container, with the
// same command line (announce options included), the same published port
// and an empty tmpfs for data; it waits until the node answers PING.
func (e *Env) Restart(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	st, err := e.state(ctx, n)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if st.Running {
		return fmt.Errorf("restart %s: still running (kill it first)", nodeID)
	}
	if _, err := e.cli.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("restart %s: %w", nodeID, err)
	}
	if err := e.waitPing(ctx, n); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// remove force-removes one container (running, paused or stopped) with its volumes.
func (e *Env) remove(ctx context.Context, id string) error {
	_, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	return nil
}

// Close implements env.Env: it force-removes every container of the
// environment (also any that carries its label but was not recorded, as after
// a start that failed half-way), then its network, and stops the Toxiproxy
// server. It is safe to call more than once; later calls return nil.
func (e *Env) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	nw := e.net
	e.mu.Unlock()

	var errs []error
	if e.cli != nil {
		errs = append(errs, e.removeAll(ctx)...)
	}
	if nw != nil {
		if err := nw.Remove(ctx); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", nw.Name, err))
		}
	}
	if e.toxi != nil {
		if err := e.toxi.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.cli != nil {
		_ = e.cli.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close docker environment %s: %w", e.ID, err)
	}
	return nil
}

// removeAll removes the recorded and the labelled containers, then lists
// the labelled ones again a few times, removing any that appear late (a
// create request the daemon finished after a start was cancelled).
func (e *Env) removeAll(ctx context.Context) []error {
	var errs []error
	ids, err := e.containerIDs(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for pass := 0; ; pass++ {
		failed := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { failed[i] = e.remove(ctx, id) })
		}
		wg.Wait()
		if err := errors.Join(failed...); err != nil {
			failed = []error{err}
		} else {
			failed = nil
		}
		if pass == 4 || ctx.Err() != nil {
			return append(errs, failed...)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if ids, err = listContainers(ctx, e.cli, e.ID); err != nil {
			return append(errs, err)
		}
		if len(ids) == 0 {
			return errs
		}
	}
}

// containerIDs lists the containers labelled with this environment's ID,
// plus those recorded (should the listing miss one).
func (e *Env) containerIDs(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	e.mu.Lock()
	for _, n := range e.sentinels {
		add(n.ctr.GetContainerID())
	}
	for _, n := range e.nodes {
		add(n.ctr.GetContainerID())
	}
	e.mu.Unlock()
	list, err := listContainers(ctx, e.cli, e.ID)
	for _, c := range list {
		add(c)
	}
	return ids, err
}

// Leftovers lists the IDs of all containers (running or not) and networks
// that carry LabelEnv, with the value envID when envID is not "": what Close
// left behind, or what a crashed run did.
func Leftovers(ctx context.Context, envID string) (containers, networks []string, err error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("leftovers: docker client: %w", err)
	}
	defer cli.Close()
	if containers, err = listContainers(ctx, cli, envID); err != nil {
		return nil, nil, err
	}
	res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", labelFilter(envID))})
	if err != nil {
		return nil, nil, fmt.Errorf("list networks labelled %s: %w", labelFilter(envID), err)
	}
	for _, n := range res.Items {
		networks = append(networks, n.ID)
	}
	return containers, networks, nil
}

func labelFilter(envID string) string {
	if envID == "" {
		return LabelEnv
	}
	return LabelEnv + "=" + envID
}

func listContainers(ctx context.Context, cli *testcontainers.DockerClient, envID string) ([]string, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelFilter(envID))})
	if err != nil {
		return nil, fmt.Errorf("list containers labelled %s: %w", labelFilter(envID), err)
	}
	ids := make([]string, 0, len(res.Items))
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// printfLogger routes testcontainers' messages to slog at Debug.
type printfLogger struct{ l *slog.Logger }

// Printf implements testcontainers' log.Logger.
func (p printfLogger) Printf(format string, v ...any) {
	p.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}
