// Package redistest starts real redis-server processes for tests and stops
// them when the test ends, even when it fails.
//
// Where redis-server is not installed the test is skipped, except under CI
// (CI=true), where a missing server fails the test: a skipped test is not a
// passing test.
package redistest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
)

// Require skips (or, under CI=true, fails) the test when the redis binary is missing.
func Require(tb testing.TB, sentinel bool) {
	tb.Helper()
	if _, err := redisproc.Binary(sentinel); err != nil {
		if InCI() {
			tb.Fatalf("CI=true but %v: install redis-server and redis-sentinel", err)
		}
		tb.Skipf("%v: install redis-server and redis-sentinel to run this test", err)
	}
}

// InCI reports whether the tests run under CI (CI=true), where nothing may be skipped for lack of a tool.
func InCI() bool { return os.Getenv("CI") == "true" }

// Start launches a redis-server with the given extra config lines on a free
// loopback port and registers its stop with tb.Cleanup.
func Start(tb testing.TB, extra ...string) *redisproc.Process {
	tb.Helper()
	return start(tb, redisproc.Config{Extra: extra})
}

// StartPassword launches a redis-server that asks password of every
// client (requirepass), ready once it answers a client that logs in.
func StartPassword(tb testing.TB, password string) *redisproc.Process {
	tb.Helper()
	return start(tb, redisproc.Config{Password: password})
}

// StartSentinel launches a redis-sentinel with the given config lines.
func StartSentinel(tb testing.TB, extra ...string) *redisproc.Process {
	tb.Helper()
	return start(tb, redisproc.Config{Sentinel: true, Extra: extra})
}

func start(tb testing.TB, cfg redisproc.Config) *redisproc.Process {
	tb.Helper()
	Require(tb, cfg.Sentinel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := redisproc.Start(ctx, cfg)
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) && !InCI() {
			tb.Skip(err)
		}
		tb.Fatalf("start redis: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("stop redis %s: %v", p.Addr, err)
		}
	})
	return p
}

// Python returns a python3 that imports redis-py (Debian's python3-redis),
// for the tests of locks written in Python (package lineproto): python3 on
// PATH first, then /usr/bin/python3 (a pyenv or venv python3 on PATH may
// lack the system's packages). It skips the test, or under CI fails it,
// when there is none.
func Python(tb testing.TB) string {
	tb.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import redis").Run() == nil {
			return path
		}
	}
	if InCI() {
		tb.Fatal("CI=true but no python3 imports redis: install python3-redis")
	}
	tb.Skip("no python3 imports redis: install python3-redis to run this test")
	return ""
}

// StartCluster starts a Redis Cluster of processes (redisproc.StartCluster)
// and registers its stop with tb.Cleanup.
func StartCluster(tb testing.TB, cfg redisproc.ClusterConfig) *redisproc.Cluster {
	tb.Helper()
	Require(tb, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := redisproc.StartCluster(ctx, cfg)
	if err != nil {
		tb.Fatalf("start redis cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop redis cluster: %v", err)
		}
	})
	return c
}
