package main

// The consensus stores' locks beside the Redis ones: etcd's
// concurrency.Mutex and go-zookeeper's Lock, each on a 3-member cluster
// of local processes started here (etcdproc, zkproc: no proxies in
// between, as the Redis locks have none), each goroutine on a session of
// its own, as their users hold one session per process and a mutex per
// acquisition. Their servers' CPU is the sum over the 3 members.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/zkproc"
)

// storeTTL is the sessions' TTL: long enough never to lapse in a run.
const storeTTL = 10 * time.Second

// cluster is a started store: its implementation, its members' pids (for
// their CPU time) and how to stop it.
type cluster struct {
	impl impl
	pids func() []int
	stop func()
}

// startEtcd starts a 3-member etcd cluster and returns etcd's mutex on it.
func startEtcd(ctx context.Context) (*cluster, error) {
	c, err := etcdproc.StartCluster(ctx, etcdproc.ClusterConfig{})
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientAddr)
	}
	var clients []*clientv3.Client
	stop := func() {
		for _, cli := range clients {
			_ = cli.Close()
		}
		_ = c.Stop()
	}
	newHandle := func(key string) handle {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return failed{fmt.Errorf("etcd client: %w", err)}
		}
		clients = append(clients, cli)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(storeTTL/time.Second)))
		if err != nil {
			return failed{fmt.Errorf("etcd session: %w", err)}
		}
		return etcdHandle{s, "/bench/" + key}
	}
	pids := func() []int {
		var out []int
		for _, m := range c.Members {
			out = append(out, m.Pid())
		}
		return out
	}
	return &cluster{impl: impl{name: "etcd-mutex", newHandle: newHandle}, pids: pids, stop: stop}, nil
}

type etcdHandle struct {
	s   *concurrency.Session
	key string
}

func (h etcdHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	m := concurrency.NewMutex(h.s, h.key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

// startZooKeeper starts a 3-server ZooKeeper ensemble and returns
// go-zookeeper's Lock on it.
func startZooKeeper(ctx context.Context) (*cluster, error) {
	c, err := zkproc.StartCluster(ctx, zkproc.ClusterConfig{})
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, s := range c.Servers {
		eps = append(eps, s.ClientAddr)
	}
	var conns []*zk.Conn
	stop := func() {
		for _, conn := range conns {
			conn.Close()
		}
		_ = c.Stop()
	}
	newHandle := func(key string) handle {
		conn, _, err := zk.Connect(eps, storeTTL, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			return failed{fmt.Errorf("zookeeper session: %w", err)}
		}
		conns = append(conns, conn)
		return zkHandle{conn, "/bench/" + strings.ReplaceAll(key, ":", "_")}
	}
	pids := func() []int {
		var out []int
		for _, s := range c.Servers {
			out = append(out, s.Pid())
		}
		return out
	}
	return &cluster{impl: impl{name: "zk-lock", newHandle: newHandle}, pids: pids, stop: stop}, nil
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

type zkHandle struct {
	conn *zk.Conn
	path string
}

// acquire runs go-zookeeper's Lock, which takes no context: it returns
// when it holds the lock or fails.
func (h zkHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	l := zk.NewLock(h.conn, h.path, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

// failed is a handle whose setup failed: every acquire fails with err.
type failed struct{ err error }

func (f failed) acquire(context.Context) (func(context.Context) error, error) { return nil, f.err }

// cpuOf is the CPU time (user + system) of the processes pids, from /proc.
func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		if pid <= 0 {
			return 0, errors.New("a member is not running")
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return sum, nil
}
