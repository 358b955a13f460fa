// Package vnode runs in-process Redis nodes (miniredis) for code that runs
// in virtual time (a testing/synctest bubble): reached over in-memory pipes
// (no socket: every goroutine of the bubble blocks durably), their keys
// expiring on the bubble's clock. It is the node of package sim and of the
// lock's virtual-time tests; it imports nothing of the harness.
package vnode

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Dialer reaches the nodes by address (go-redis's Options.Dialer).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Start starts one node per address (IP literals: nothing may look a name
// up inside a bubble, the resolver's state being the process's) and
// returns the dialer that reaches them. Their keys expire on the bubble's
// clock: a ticker fast-forwards them every millisecond of virtual time
// (miniredis counts TTLs down only when told, and not from inside a
// command); TIME reads the bubble's clock by itself. They stop when t
// ends. Call it inside a synctest bubble.
func Start(t testing.TB, addrs ...string) Dialer {
	t.Helper()
	byAddr := map[string]*miniredis.Miniredis{}
	for _, a := range addrs {
		byAddr[a] = miniredis.NewMiniRedis()
	}
	done, ticked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticked)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				for _, m := range byAddr {
					m.FastForward(time.Millisecond)
				}
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-ticked
		for _, m := range byAddr {
			m.Close()
		}
	})
	return func(_ context.Context, _, addr string) (net.Conn, error) {
		m, ok := byAddr[addr]
		if !ok {
			return nil, fmt.Errorf("vnode: no node at %s", addr)
		}
		return m.Dial()
	}
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
