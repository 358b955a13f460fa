// Package zkproc starts and stops a real ZooKeeper ensemble as local
// processes (Debian's zookeeper package: its jar and the JVM), each server on
// reserved loopback ports in a temporary directory of its own, for the
// consensus-store environments of issue 45. It is the process layer only,
// as redisproc is for Redis and etcdproc for etcd.
//
// Unlike etcd's members, whose peers find each other at one advertised
// address per member, every ZooKeeper server reads the ensemble from its own
// configuration: server i is told where each other server j listens
// (server.j=host:quorum:election). ClusterConfig.Route chooses that
// address for every ordered pair (i, j), so a chaos environment can put a
// proxy on each direction of each link and cut a server off cleanly, in
// both directions, from some servers and not others.
//
// It asks a server what it is through the four-letter word srvr on its
// client port (whitelisted in the configuration it writes), so that the
// library's module needs no ZooKeeper client; the few requests an
// environment's login needs (a digest login, the root's ACL: LockRoot;
// Children, for its tests) it speaks itself, in client.go.
package zkproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockproof/lockproof/internal/proc"
)

// Jar is where Debian's zookeeper package puts the server's jar; its
// manifest's Class-Path names the libraries it needs.
const Jar = "/usr/share/java/zookeeper.jar"

// ErrNotInstalled is returned when java or the ZooKeeper jar is missing.
var ErrNotInstalled = errors.New("ZooKeeper not installed (Debian: apt-get install zookeeper, which brings a JRE)")

// ErrNotServing is Mode's error when the server answers but serves no
// requests (it is looking for a leader, or cut off from its quorum).
var ErrNotServing = errors.New("not currently serving requests")

// ErrNoLeader is returned when the servers asked do not agree on one
// leader with every other one a follower.
var ErrNoLeader = errors.New("no leader the servers agree on")

// ClusterConfig says how to start an ensemble. Zero fields take the
// defaults named.
type ClusterConfig struct {
	// Servers is the ensemble's size; default 3.
	Servers int
	// Route returns the quorum and election addresses (host:port) server
	// from dials to reach server to, given the ones to listens on: a
	// proxy's per ordered pair, or the same. nil dials them directly.
	Route func(from, to int, quorum, election string) (string, string, error)
	// TickTime is ZooKeeper's tick; default 100ms. Sessions last from 2
	// to 20 ticks.
	TickTime time.Duration
	// InitLimit and SyncLimit, in ticks; defaults 20 and 10. A follower
	// that does not hear its leader for SyncLimit ticks leaves it.
	InitLimit, SyncLimit int
	// StartTimeout bounds the wait for a leader; default 60s.
	StartTimeout time.Duration
	// ContainerCheck is how often the servers delete empty container
	// nodes (the system property znode.container.checkIntervalMs);
	// default ZooKeeper's own, 60s. A test shortens it to see what a
	// lock does when its parent node is reaped between two holds.
	ContainerCheck time.Duration
	// EnforceAuth makes every server refuse a client that has not
	// logged in with digest auth (AddAuth "digest", user:password) before
	// its first request (ZooKeeper's zookeeper.enforce.auth.enabled and
	// .schemes=digest): a client with no login has its connection closed.
	// Digest auth admits any user:password it is given; what keeps
	// another identity from the nodes is their ACLs.
	EnforceAuth bool
}

// JVMOptions are the system properties (java's -D options, before the
// main class) that cfg's settings ask of every server.
func (cfg ClusterConfig) JVMOptions() []string {
	var out []string
	if cfg.ContainerCheck > 0 {
		out = append(out, "-Dznode.container.checkIntervalMs="+strconv.FormatInt(cfg.ContainerCheck.Milliseconds(), 10))
	}
	if cfg.EnforceAuth {
		out = append(out, "-Dzookeeper.enforce.auth.enabled=true", "-Dzookeeper.enforce.auth.schemes=digest")
	}
	return out
}

// Server is one running (or killed) ZooKeeper server: proc.Member's
// Launch (a restart, on its data and ports), Kill, Pause, Resume and
// Running act on its process.
type Server struct {
	// ID is its server id (myid): its index + 1.
	ID int
	// ClientAddr, QuorumAddr and ElectionAddr are where it listens.
	ClientAddr, QuorumAddr, ElectionAddr string
	// Dir holds its configuration, data and log.
	Dir string

	proc.Member
}

// Cluster is a running ensemble.
type Cluster struct {
	// Servers in the order of ClusterConfig's indexes.
	Servers []*Server

	ens *proc.Ensemble
}

// ServerArgs are java's arguments that run a server of configuration
// file cfg, logging under logDir. A small heap and the client compiler:
// three servers start in seconds on two cores and leave the tests'
// clients room. A leader election that retries its notifications at most
// every second (ZooKeeper's own backoff reaches 60s), over connections
// given up after a second (5s): two servers cut from a third elect
// between them in seconds, not in tens.
func ServerArgs(logDir, cfg string) []string {
	return []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.fastleader.maxNotificationInterval=1000", "-Dzookeeper.cnxTimeout=1000",
		"-Dzookeeper.log.dir=" + logDir, "-cp", Jar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
}

// Java returns the path of java, or ErrNotInstalled when java or Jar is
// missing.
func Java() (string, error) {
	if _, err := os.Stat(Jar); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: no java on PATH", ErrNotInstalled)
	}
	return p, nil
}

// StartCluster starts cfg.Servers servers and waits, within ctx and
// cfg.StartTimeout, until one leads and every other follows it. On an
// error every process started is stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (c *Cluster, err error) {
	java, err := Java()
	if err != nil {
		return nil, err
	}
	if cfg.Servers <= 0 {
		cfg.Servers = 3
	}
	if cfg.TickTime <= 0 {
		cfg.TickTime = 100 * time.Millisecond
	}
	if cfg.InitLimit <= 0 {
		cfg.InitLimit = 20
	}
	if cfg.SyncLimit <= 0 {
		cfg.SyncLimit = 10
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	ens, err := proc.NewEnsemble("lockproof-zk-*")
	if err != nil {
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	root := ens.Root
	c = &Cluster{ens: ens}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	for i := range cfg.Servers {
		s := &Server{ID: i + 1, Dir: filepath.Join(root, "s"+strconv.Itoa(i+1))}
		s.Name, s.Log = "zookeeper "+strconv.Itoa(s.ID), filepath.Join(s.Dir, "zookeeper.log")
		s.Command = func() *exec.Cmd {
			// JVM options: they go before the main class.
			args := append(cfg.JVMOptions(), ServerArgs(s.Dir, filepath.Join(s.Dir, "zoo.cfg"))...)
			cmd := exec.Command(java, args...)
			cmd.Dir = s.Dir
			return cmd
		}
		c.Servers = append(c.Servers, s)
		c.ens.Add(&s.Member)
		for _, addr := range []*string{&s.ClientAddr, &s.QuorumAddr, &s.ElectionAddr} {
			port, release, err := proc.ReservePort(0)
			if err != nil {
				return c, err
			}
			s.Hold(release)
			*addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		if err := os.MkdirAll(filepath.Join(s.Dir, "data"), 0o700); err != nil {
			return c, fmt.Errorf("start zookeeper %d: %w", s.ID, err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "data", "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o600); err != nil {
			return c, fmt.Errorf("start zookeeper %d: %w", s.ID, err)
		}
	}
	for i, s := range c.Servers {
		_, clientPort, _ := net.SplitHostPort(s.ClientAddr)
		conf := []string{
			"tickTime=" + strconv.FormatInt(cfg.TickTime.Milliseconds(), 10),
			"initLimit=" + strconv.Itoa(cfg.InitLimit),
			"syncLimit=" + strconv.Itoa(cfg.SyncLimit),
			"dataDir=" + filepath.Join(s.Dir, "data"),
			"clientPortAddress=127.0.0.1",
			"clientPort=" + clientPort,
			"admin.enableServer=false",
			"4lw.commands.whitelist=srvr,ruok",
			// Loopback only: the election's and quorum's listeners bind
			// the server's own entry below.
			"quorumListenOnAllIPs=false",
		}
		for j, o := range c.Servers {
			q, e := o.QuorumAddr, o.ElectionAddr
			if j != i && cfg.Route != nil {
				if q, e, err = cfg.Route(i, j, q, e); err != nil {
					return c, fmt.Errorf("start zookeeper: route %d to %d: %w", s.ID, o.ID, err)
				}
			}
			qh, qp, qerr := net.SplitHostPort(q)
			eh, ep, eerr := net.SplitHostPort(e)
			if err := errors.Join(qerr, eerr); err != nil {
				return c, fmt.Errorf("start zookeeper: route %d to %d: %w", s.ID, o.ID, err)
			}
			if qh != eh {
				return c, fmt.Errorf("start zookeeper: route %d to %d: quorum %s and election %s on different hosts", s.ID, o.ID, q, e)
			}
			conf = append(conf, fmt.Sprintf("server.%d=%s:%s:%s", o.ID, qh, qp, ep))
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "zoo.cfg"), []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			return c, fmt.Errorf("start zookeeper %d: %w", s.ID, err)
		}
		if err := s.Launch(); err != nil {
			return c, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if _, err := c.WaitLeader(wctx, nil); err != nil {
		return c, fmt.Errorf("start zookeeper: %w; %s", err, c.ens.Tails())
	}
	return c, nil
}

// Wipe starts server i, killed, again with its data deleted (its myid
// kept): it comes back with no log and no snapshot, and syncs from the
// leader as a follower.
func (c *Cluster) Wipe(i int) error {
	s := c.Servers[i]
	if s.Running() {
		return fmt.Errorf("wipe zookeeper %d: still running (kill it first)", s.ID)
	}
	data := filepath.Join(s.Dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil {
		return fmt.Errorf("wipe zookeeper %d: %w", s.ID, err)
	}
	for _, e := range entries {
		if e.Name() == "myid" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return fmt.Errorf("wipe zookeeper %d: %w", s.ID, err)
		}
	}
	return s.Launch()
}

// Stop kills every server, gives up their ports and removes their
// directories. It is safe to call more than once.
func (c *Cluster) Stop() error { return c.ens.Stop() }

// Mode asks server i what it is ("leader", "follower", "observer",
// "standalone") through srvr on its client port; ErrNotServing when it
// serves no requests.
func (c *Cluster) Mode(ctx context.Context, i int) (string, error) {
	m, err := ModeAt(ctx, c.Servers[i].ClientAddr)
	if err != nil {
		return "", fmt.Errorf("zookeeper %d: %w", c.Servers[i].ID, err)
	}
	return m, nil
}

// ModeAt asks the server whose client port is addr what it is (Mode).
func ModeAt(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<16))
	if err != nil {
		return "", err
	}
	text := string(b)
	if strings.Contains(text, "not currently serving requests") {
		return "", ErrNotServing
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("srvr without a mode: %q", text)
}

// WaitLeader waits until the running servers not in skip all answer, one
// as the leader and the others as followers, and returns the leader's
// index.
func (c *Cluster) WaitLeader(ctx context.Context, skip []int) (int, error) {
	i, err := proc.Await(ctx, 100*time.Millisecond, func(ctx context.Context) (int, error) { return c.leader(ctx, skip) })
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return i, nil
}

func (c *Cluster) leader(ctx context.Context, skip []int) (int, error) {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		if s.Running() && !slices.Contains(skip, i) {
			addrs[i] = s.ClientAddr
		}
	}
	return LeaderAmong(ctx, addrs)
}

// LeaderAmong asks the servers at addrs ("" for one not to ask) and
// returns the index of the one that leads while every other follows, or
// an error wrapping ErrNoLeader.
func LeaderAmong(ctx context.Context, addrs []string) (int, error) {
	leader := -1
	for i, a := range addrs {
		if a == "" {
			continue
		}
		mode, err := ModeAt(ctx, a)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", a, err)
		}
		switch {
		case mode == "standalone" && len(addrs) == 1:
			// An ensemble of one runs standalone: it serves alone.
			return i, nil
		case mode == "leader" && leader < 0:
			leader = i
		case mode == "leader":
			return -1, fmt.Errorf("%w: %s and %s both lead", ErrNoLeader, addrs[leader], a)
		case mode != "follower":
			return -1, fmt.Errorf("%w: %s is %s", ErrNoLeader, a, mode)
		}
	}
	if leader < 0 {
		return -1, fmt.Errorf("%w: none leads", ErrNoLeader)
	}
	return leader, nil
}
