package fencing_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// shardedRedis is one Redis Cluster (3 shards, no replica) the whole test
// binary shares, started by the first test that asks (clusterClient) and
// stopped by TestMain: the Redis resources run every shared test on a
// redis.ClusterClient too, as they do on a lock's deployment that is a
// cluster.
var shardedRedis struct {
	sync.Mutex
	c      *redisproc.Cluster
	err    error
	prefix int
}

func TestMain(m *testing.M) {
	code := m.Run()
	shardedRedis.Lock()
	if c := shardedRedis.c; c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the shared redis cluster:", err)
			code = 1
		}
	}
	shardedRedis.Unlock()
	os.Exit(code)
}

// clusterClient returns a cluster client of the shared cluster and a key
// prefix no other caller gets, so that tests sharing the cluster never
// share a key. Its keys spread over every shard.
func clusterClient(t testing.TB) (*redis.ClusterClient, string) {
	t.Helper()
	redistest.Require(t, false)
	shardedRedis.Lock()
	defer shardedRedis.Unlock()
	if shardedRedis.c == nil && shardedRedis.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shardedRedis.c, shardedRedis.err = redisproc.StartCluster(ctx, redisproc.ClusterConfig{})
		cancel()
	}
	if shardedRedis.err != nil {
		t.Fatalf("start the shared redis cluster: %v", shardedRedis.err)
	}
	shardedRedis.prefix++
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shardedRedis.c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	return cc, fmt.Sprintf("c%d:", shardedRedis.prefix)
}
