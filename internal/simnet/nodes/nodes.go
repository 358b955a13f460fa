// Package nodes runs in-process Redis nodes (miniredis) for code that runs
// in virtual time (a testing/synctest bubble): reached over in-memory pipes
// (no socket: every goroutine of the bubble blocks durably) through a
// simulated network (Net) that can delay, hold and lose messages, their
// keys expiring on the bubble's clock. It is the simulated network whose
// plain types are package simnet's and whose faults package chaos names
// (chaos.SimNet, which Net implements): the node of package sim and of
// the lock's virtual-time tests; it imports nothing of the harness.
package nodes

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Dialer reaches the nodes by address (go-redis's Options.Dialer).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Start starts one node per address on a perfect network (NewNet, no
// faults) and returns the dialer that reaches them. They stop when t
// ends. Call it inside a synctest bubble.
func Start(t testing.TB, addrs ...string) Dialer {
	t.Helper()
	n := NewNet(0, addrs...)
	t.Cleanup(n.Close)
	return n.Dialer("")
}

// Client returns a go-redis client of a fresh node, closed when t ends.
// Call it inside a synctest bubble.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	const addr = "127.0.0.1:1"
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, Dialer: Start(t, addr)})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
