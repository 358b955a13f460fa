package env

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// AdminClient is a client of one node at its direct address (Node.Upstream,
// not through a client proxy), for the harness's own commands: setting up
// replication, waiting for it, reading a node's clock. It logs in with a
// (the Topology's Auth). Short timeouts, every command sent once (no
// retry), RESP2. The caller closes it.
func AdminClient(a Auth, addr string) *redis.Client {
	return redis.NewClient(a.Options(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1, Protocol: 2}))
}

// Admin runs one command on the node at addr, logged in with a.
func Admin(ctx context.Context, a Auth, addr string, args ...any) error {
	c := AdminClient(a, addr)
	defer c.Close()
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%v on %s: %w", args, addr, err)
	}
	return nil
}

// replicaWait bounds WaitReplicas: a full sync of the harness's small data
// sets takes milliseconds; half a minute is a stuck link.
const replicaWait = 30 * time.Second

// WaitReplicas waits, within ctx and at most 30s, until the master at addr
// reports want replicas online (INFO replication).
func WaitReplicas(ctx context.Context, a Auth, addr string, want int) error {
	c := AdminClient(a, addr)
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, replicaWait)
	defer cancel()
	for {
		info, err := c.Info(wctx, "replication").Result()
		if err == nil && strings.Count(info, "state=online") >= want {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("wait for %d replicas of %s: %w (last INFO: %q, %v)", want, addr, wctx.Err(), info, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
