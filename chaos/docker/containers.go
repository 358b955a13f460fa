package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redisproc"
)

// Containers: starting Redis and Sentinel nodes, waiting for them, admin commands.

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

// startRedis starts one redis-server container. A data node gets its
// replication proxy first and announces it; a cluster node (the i-th of
// the cluster) gets a bus proxy too, and announces both (clusterArgs).
func (e *Env) startRedis(ctx context.Context, id string, role env.Role, i int) (*node, error) {
	port, err := redisproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	n := &node{Node: env.Node{ID: id, Role: role, Upstream: net.JoinHostPort(loopback, strconv.Itoa(port))}, hostPort: port}
	n.Addr = n.Upstream
	// The file first: redis-server reads a configuration file only as
	// its first argument.
	args := append([]string{"redis-server", authConf}, nodeArgs...)
	if role == env.RoleData || role == env.RoleCluster {
		px, err := e.gatewayProxy(id, "repl-"+id, n.Upstream)
		if err != nil {
			return nil, err
		}
		n.Addr, n.ReplProxy = px.Listen, px.Name
		if role == env.RoleCluster {
			more, err := e.clusterArgs(n, i)
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		} else {
			host, pport, _ := net.SplitHostPort(px.Listen)
			args = append(args, "--replica-announce-ip", host, "--replica-announce-port", pport)
		}
	}
	pw := string(e.topo.Auth.Password)
	files := []testcontainers.ContainerFile{{
		Reader: strings.NewReader("requirepass " + pw + "\nmasterauth " + pw + "\n"), ContainerFilePath: authConf, FileMode: 0o600,
	}}
	if err := e.run(ctx, n, args, redisPort, files); err != nil {
		return nil, err
	}
	if n.hostPort != port { // a port clash moved it
		if err := e.retarget(n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// gatewayProxy creates the proxy name to upstream, listening on the
// network's gateway (where the containers reach the host), for node id.
func (e *Env) gatewayProxy(id, name, upstream string) (*toxiclient.Proxy, error) {
	px, err := e.toxi.API.CreateProxy(name, net.JoinHostPort(e.gateway, "0"), upstream)
	if err != nil {
		return nil, fmt.Errorf("%s: create proxy %s: %w", id, name, err)
	}
	if _, _, err := net.SplitHostPort(px.Listen); err != nil {
		return nil, fmt.Errorf("%s: proxy %s listens on %q: %w", id, name, px.Listen, err)
	}
	return px, nil
}

// retarget points the node's proxies at its current published ports.
func (e *Env) retarget(n *node) error {
	for name, upstream := range map[string]string{
		n.ReplProxy: n.Upstream,
		n.BusProxy:  net.JoinHostPort(loopback, strconv.Itoa(n.busPort)),
	} {
		if name == "" {
			continue
		}
		px, err := e.toxi.API.Proxy(name)
		if err != nil {
			return fmt.Errorf("%s: proxy %s: %w", n.ID, name, err)
		}
		px.Upstream = upstream
		if err := px.Save(); err != nil {
			return fmt.Errorf("%s: retarget proxy %s to %s: %w", n.ID, name, upstream, err)
		}
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
		// Sentinel rewrites its file, as root (the image's only user
		// that runs): the file is root's alone, for it holds the password.
		Reader: strings.NewReader(conf), ContainerFilePath: "/data/sentinel.conf", FileMode: 0o600,
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
	bus, err := network.ParsePort(clusterBusPort)
	if err != nil {
		return fmt.Errorf("%s: port %q: %w", n.ID, clusterBusPort, err)
	}
	sentinel := strings.HasPrefix(n.ID, string(env.RoleSentinel)+"-")
	data := !sentinel && !n.keep // Redis servers keep their data in a tmpfs: empty after a restart
	image := e.image.Ref
	if n.image != "" {
		image = n.image
	}
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
			if n.busPort != 0 {
				if n.busPort, err = redisproc.FreePort(); err != nil {
					return fmt.Errorf("%s: %w", n.ID, err)
				}
			}
		}
		hostPort := strconv.Itoa(n.hostPort)
		exposed := []string{port}
		bindings := network.PortMap{p: {{HostIP: netip.MustParseAddr(loopback), HostPort: hostPort}}}
		if n.busPort != 0 { // a cluster node's bus, for its bus proxy
			exposed = append(exposed, clusterBusPort)
			bindings[bus] = []network.PortBinding{{HostIP: netip.MustParseAddr(loopback), HostPort: strconv.Itoa(n.busPort)}}
		}
		for cp, hp := range n.more { // a store member's peer ports, for its peers' proxies
			pp, err := network.ParsePort(cp)
			if err != nil {
				return fmt.Errorf("%s: port %q: %w", n.ID, cp, err)
			}
			exposed = append(exposed, cp)
			bindings[pp] = []network.PortBinding{{HostIP: netip.MustParseAddr(loopback), HostPort: strconv.Itoa(hp)}}
		}
		req := testcontainers.ContainerRequest{
			Image:          image,
			Name:           "lockproof-" + e.ID + "-" + n.ID,
			Cmd:            cmd,
			ExposedPorts:   exposed,
			Labels:         e.labels(n.ID),
			Networks:       []string{e.net.Name},
			NetworkAliases: map[string][]string{e.net.Name: {n.ID}},
			Files:          files,
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = bindings
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
			if sentinel {
				e.sentinels = append(e.sentinels, n)
			} else {
				e.nodes[n.ID] = n
			}
			e.mu.Unlock()
		}
		if err == nil {
			return e.waitReady(ctx, n)
		}
		last = fmt.Errorf("start %s on 127.0.0.1:%s: %w", n.ID, hostPort, err)
		if !strings.Contains(err.Error(), "allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return last
}

// waitReady waits (at most 30s) until the node serves: its own ready (a
// store's member), else PING on its published port.
func (e *Env) waitReady(ctx context.Context, n *node) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ready := n.ready
	if ready == nil {
		c := env.AdminClient(e.topo.Auth, n.Upstream)
		defer c.Close()
		ready = func(ctx context.Context) error { return c.Ping(ctx).Err() }
	}
	for {
		err := ready(wctx)
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s at %s: not serving: %w (last: %v)%s", n.ID, n.Upstream, wctx.Err(), err, e.logTail(n))
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

// admin runs one command on the node at addr (its published port).
func (e *Env) admin(ctx context.Context, addr string, args ...any) error {
	return env.Admin(ctx, e.topo.Auth, addr, args...)
}

// waitReplicas waits until the master at addr reports want replicas online.
func (e *Env) waitReplicas(ctx context.Context, addr string, want int) error {
	if err := env.WaitReplicas(ctx, e.topo.Auth, addr, want); err != nil {
		return fmt.Errorf("%w; the containers must reach the replication proxies on the host at the network gateway %s: does a host firewall block it?", err, e.gateway)
	}
	return nil
}
