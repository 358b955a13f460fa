// Package chaostest holds the test helpers the chaos packages' tests share:
// a process environment, a client's links and a Sentinel client through
// them, each closed when the test ends. Only tests import it.
package chaostest

import (
	"context"
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
