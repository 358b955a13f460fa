// Package docker is the Docker chaos environment of lockproof: the topology of
// package env (a Redis master with replicas watched by Sentinels, or a Redis
// Cluster (env.Spec.Cluster, see cluster.go); a separate Redis for fenced
// resources, optional independent Redlock masters) run as containers through
// testcontainers-go, every link to a Redis server passing a real Toxiproxy
// proxy.
//
// Layout. All containers join one private bridge network made for the
// environment. Each Redis and Sentinel container publishes its port on
// 127.0.0.1 only, at a host port chosen once (so a restarted container keeps
// its address). The Toxiproxy server runs on the host (env.StartToxiproxy):
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
// Images. The Redis image is Options.Image (e.g. "redis:7", pulled when
// missing; the CLI and the tests take it from LOCKPROOF_REDIS_IMAGE,
// ImageEnvVar), else a local image built FROM scratch out of the host's
// redis-server and its libraries (BuildRedisImage; nothing is pulled). When a named image can be
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
	stdlog "log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/lockproof/lockproof/chaos/env"
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

// authConf is where a Redis server's container holds the configuration
// file with its password (requirepass, and masterauth for a replica):
// outside /data, a tmpfs that a restart empties, so a restarted server
// asks the same password.
const authConf = "/etc/lockproof-auth.conf"

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
	// Image is the Redis image; "" builds (or reuses) the local image. The
	// CLI and the tests take it from LOCKPROOF_REDIS_IMAGE (ImageEnvVar):
	// this package reads no variable of its own.
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
	// busPort is the host port a cluster node's bus (clusterBusPort) is
	// published on; 0 for other nodes.
	busPort int
	// meet is "host port bus", where a cluster node announces its data
	// port and its bus: where the others meet it (redisproc.FormCluster).
	meet string
	ctr  testcontainers.Container
	// image, when set, is the node's image (a consensus store's member);
	// "" is the environment's Redis image.
	image string
	// more are further container ports published on loopback (a ZooKeeper
	// server's quorum and election ports), by the host port each gets.
	more map[string]int
	// keep: the node's /data is the container's own, kept across a
	// restart (a store's member), not a tmpfs emptied by it (Redis's).
	keep bool
	// ready, when set, says the node serves (a store's member); nil
	// waits for PING.
	ready func(ctx context.Context) error
}

var _ env.Env = (*Env)(nil)

// New starts a Docker environment with default Options; it is an env.Constructor.
func New(ctx context.Context, spec env.Spec) (env.Env, error) { return With(Options{})(ctx, spec) }

// With is the env.Constructor of Docker environments with Options o (for
// example the Redis image the user named).
func With(o Options) env.Constructor {
	return func(ctx context.Context, spec env.Spec) (env.Env, error) {
		e, err := Start(ctx, spec, o)
		if err != nil {
			return nil, err
		}
		return e, nil
	}
}

// Check returns an env.Options DockerCheck for environments With(o): it
// says what is missing, a Docker engine that answers (Available) or an
// image to start (o.Image, else a redis-server on PATH to build the local
// image from: nothing is pulled).
func Check(o Options) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var missing []string
		if !Available(ctx) {
			missing = append(missing, "no Docker engine answers (is the daemon running, and DOCKER_HOST right?)")
		}
		if _, err := exec.LookPath("redis-server"); err != nil && o.Image == "" {
			missing = append(missing, fmt.Sprintf("a redis-server on PATH to build the local Redis image from (apt-get install -y redis-server), or %s naming an image", ImageEnvVar))
		}
		if len(missing) > 0 {
			return errors.New(strings.Join(missing, "; "))
		}
		return nil
	}
}

// Available reports whether a Docker engine answers within 5 seconds.
func Available(ctx context.Context) bool {
	disableRyuk(nil)
	routeBanner(slog.Default()) // the first Docker call prints testcontainers' banner
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

// routeBanner sends testcontainers' process-wide messages (the "Connected
// to docker" banner its first Docker call prints to stderr) to log at
// Debug, as its per-container messages already go, unless the user chose
// a logger of their own: a run's output is lockproof's, and `lockproof
// run --env docker` printed the banner in the middle of its progress.
func routeBanner(log *slog.Logger) {
	if l, ok := tclog.Default().(*stdlog.Logger); ok && l.Writer() == os.Stderr {
		tclog.SetDefault(printfLogger{log})
	}
}

// Start builds or finds the Redis image, starts the topology of spec and
// waits until every Sentinel sees the master, the other Sentinels and the
// replicas. On error everything started so far is removed. Close stops it all.
func Start(ctx context.Context, spec env.Spec, o Options) (*Env, error) {
	if spec.ReplicaClockBehind != 0 {
		// The containers share the host's kernel clock, and the image has
		// no clock shim: only the process environment can skew a node.
		return nil, fmt.Errorf("docker environment: replicas' clocks behind the master's: %w (the process environment can)", env.ErrUnavailable)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	disableRyuk(log)
	routeBanner(log)
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
	// Every server and Sentinel asks a password of the environment's own:
	// their ports are published on 127.0.0.1, where
	// any local user could otherwise read or write them mid-run. It goes
	// to them in a file (authConf), never on a command line, which every
	// local user can read in the process list.
	pw, err := env.NewSecret()
	if err != nil {
		return err
	}
	e.topo.Auth = env.Auth{Password: pw, SentinelPassword: pw}
	if e.spec.Store != "" {
		return e.startStore(ctx, o)
	}
	e.topo.MasterName = e.spec.MasterName

	// All Redis servers start at once; then the replicas follow the
	// master, or the cluster forms.
	type want struct {
		role env.Role
		i    int
	}
	var servers []want
	if cs := e.spec.Cluster; cs != nil {
		for i := range cs.Masters * (1 + cs.Replicas) {
			servers = append(servers, want{env.RoleCluster, i})
		}
	} else {
		for i := 0; i <= e.spec.Replicas; i++ {
			servers = append(servers, want{env.RoleData, i})
		}
	}
	servers = append(servers, want{env.RoleFenced, 0})
	for i := 0; i < e.spec.Redlock; i++ {
		servers = append(servers, want{env.RoleRedlock, i})
	}
	started, err := parallel(len(servers), func(i int) (*node, error) {
		return e.startRedis(ctx, env.NodeID(servers[i].role, servers[i].i), servers[i].role, servers[i].i)
	})
	if err != nil {
		return err
	}
	for _, n := range started {
		switch n.Role {
		case env.RoleData:
			e.topo.Data = append(e.topo.Data, n.Node)
		case env.RoleCluster:
			e.topo.Cluster = append(e.topo.Cluster, n.Node)
		case env.RoleFenced:
			e.topo.Fenced = n.Node
		default:
			e.topo.Redlock = append(e.topo.Redlock, n.Node)
		}
	}
	if e.spec.Cluster != nil {
		return e.formCluster(ctx)
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
		"requirepass " + string(pw),
		"sentinel sentinel-pass " + string(pw), // the other Sentinels ask it too
		fmt.Sprintf("sentinel monitor %s %s %s %d", name, mh, mp, env.Quorum(e.spec.Sentinels)),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, e.spec.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, e.spec.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
		fmt.Sprintf("sentinel auth-pass %s %s", name, string(pw)),
	}, "\n") + "\n"
	sentinels, err := parallel(e.spec.Sentinels, func(i int) (*node, error) {
		return e.startSentinel(ctx, env.NodeID(env.RoleSentinel, i), conf)
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

// printfLogger routes testcontainers' messages to slog at Debug.
type printfLogger struct{ l *slog.Logger }

// Printf implements testcontainers' log.Logger.
func (p printfLogger) Printf(format string, v ...any) {
	p.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}
