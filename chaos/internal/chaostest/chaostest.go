// Package chaostest holds the test helpers the chaos packages' tests share:
// a process environment, a client's links and a Sentinel client through
// them, each closed when the test ends. Only tests import it.
package chaostest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
)

// StartProcess starts a process environment of spec (env.NewProcess) and
// closes it when the test ends, failing the test when Close fails or leaves
// proxies behind. Without redis-server and redis-sentinel it skips (fails
// under CI), as redistest.Require does.
func StartProcess(tb testing.TB, spec env.Spec) *env.ProcessEnv {
	tb.Helper()
	redistest.Require(tb, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := env.NewProcess(ctx, spec, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			tb.Errorf("close: %v", err)
		}
		if n := e.ProxyCount(); n != 0 {
			tb.Errorf("%d proxies remain after Close", n)
		}
	})
	return e
}

// Links opens the links of client to e (env.NewLinks) and closes them when
// the test ends, failing the test when that fails.
func Links(tb testing.TB, e env.Env, client string) *env.Links {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := env.NewLinks(ctx, e, client)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := l.Close(); err != nil {
			tb.Errorf("close links: %v", err)
		}
	})
	return l
}

// FailoverClient returns a Sentinel client of e's master that dials through
// l, with timeout as its dial, read and write timeout and no retries; it is
// closed when the test ends.
func FailoverClient(tb testing.TB, e env.Env, l *env.Links, timeout time.Duration) *redis.Client {
	tb.Helper()
	topo := e.Topology()
	a := topo.Auth
	c := redis.NewFailoverClient(a.LoginFailover(&redis.FailoverOptions{
		MasterName: topo.MasterName, SentinelAddrs: topo.Sentinels, Dialer: a.Dialer(l.Dial, nil),
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1,
	}))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ClusterClient returns a cluster client of e's Redis Cluster through the
// client's own proxies l (its seeds are the nodes' announced addresses,
// which l.Dial maps to l's proxies), with timeout for dialing, reading and
// writing, closed when the test ends.
func ClusterClient(tb testing.TB, e env.Env, l *env.Links, timeout time.Duration) *redis.ClusterClient {
	tb.Helper()
	a := e.Topology().Auth
	c := redis.NewClusterClient(a.LoginCluster(&redis.ClusterOptions{
		Addrs: e.Topology().ClusterAddrs(), Dialer: a.Dialer(l.Dial, nil),
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1,
	}))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Toxiproxy starts a Toxiproxy server of the test's own (a team's, for a
// bring-your-own environment) and closes it when the test ends.
func Toxiproxy(tb testing.TB) *env.ToxiServer {
	tb.Helper()
	return toxitest.Server(tb)
}

// AsksPassword fails the test unless e has a password of its own and every
// Redis server and Sentinel of it refuses a client without it (NOAUTH) and
// answers one with it: a run's servers listen on 127.0.0.1, where any
// local user could otherwise read or write them mid-run.
func AsksPassword(tb testing.TB, e env.Env) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topo := e.Topology()
	if topo.Auth.Password == "" {
		tb.Fatalf("the %s environment has no password", e.Kind())
	}
	nodes := topo.Nodes()
	for i, addr := range topo.Sentinels {
		nodes = append(nodes, env.Node{ID: "sentinel " + strconv.Itoa(i), Upstream: addr})
	}
	for _, n := range nodes {
		if n.Role == env.RoleEtcd || n.Role == env.RoleZooKeeper {
			continue // a store's member speaks no Redis
		}
		if err := env.Admin(ctx, env.Auth{}, n.Upstream, "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			tb.Errorf("%s answers a client without the password: %v; want NOAUTH", n.ID, err)
		}
		if err := env.Admin(ctx, topo.Auth, n.Upstream, "PING"); err != nil {
			tb.Errorf("%s refuses the environment's own password: %v", n.ID, err)
		}
	}
}
