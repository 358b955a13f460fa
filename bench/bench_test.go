package main

// The benchmarks below measure the uncontended acquire+release of lockproof,
// redsync and redislock in-process, and of etcd's and ZooKeeper's locks on
// clusters of their own, for benchstat comparisons (-count 6):
// the wall time, and the client's CPU time (client-µs/op: this process's
// user + system time, the redis-server child not included), e.g.
//
//	go test -run '^$' -bench Uncontended -count 6 . | tee new.txt

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/zkproc"
	"github.com/lockproof/lockproof/lock"
)

// benchRedis starts a redis-server for one benchmark (via redistest: skipped
// without redis-server, failing under CI=true) and returns a client
// configured like the bench command's.
func benchRedis(b *testing.B) *redis.Client {
	b.Helper()
	p := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// benchPairs runs acquire+release pairs the way the bench command does
// (acquire under a 30s timeout, release without one).
func benchPairs(b *testing.B, h handle) {
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := clientCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		release, err := h.acquire(actx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if err := release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64((clientCPU(b)-cpu0).Microseconds())/float64(b.N), "client-µs/op")
}

// clientCPU is this process's user + system CPU time so far.
func clientCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUncontendedLockproof: one caller, acquire then release, one key.
func BenchmarkUncontendedLockproof(b *testing.B) {
	rdb := benchRedis(b)
	c, err := lock.New(rdb, lock.Options{TTL: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	benchPairs(b, lockproofHandle{c, "bench"})
}

// BenchmarkUncontendedRedsync: the same with redsync (SET NX, then a Lua release).
func BenchmarkUncontendedRedsync(b *testing.B) {
	rdb := benchRedis(b)
	rs := redsync.New(goredis.NewPool(rdb))
	benchPairs(b, redsyncHandle{rs.NewMutex("bench")})
}

// BenchmarkUncontendedRedislock: the same with redislock (a Lua obtain,
// then a Lua release), the fastest peer in the README's table.
func BenchmarkUncontendedRedislock(b *testing.B) {
	rdb := benchRedis(b)
	benchPairs(b, redislockHandle{redislock.New(rdb), "bench", 10 * time.Second})
}

// benchStore starts a consensus store's 3-member cluster for one benchmark
// (skipped when it is not installed, failing under CI=true) and returns a
// handle of its lock.
func benchStore(b *testing.B, start func(context.Context) (*cluster, error)) handle {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := start(ctx)
	if err != nil {
		if errors.Is(err, etcdproc.ErrNotInstalled) || errors.Is(err, zkproc.ErrNotInstalled) {
			if redistest.InCI() {
				b.Fatalf("CI=true but %v", err)
			}
			b.Skip(err)
		}
		b.Fatal(err)
	}
	b.Cleanup(c.stop)
	h := c.impl.newHandle("bench")
	if f, ok := h.(failed); ok {
		b.Fatal(f.err)
	}
	return h
}

// BenchmarkUncontendedEtcdMutex: the same with etcd's concurrency.Mutex on
// a session (a Txn to lock, a Delete to unlock) on a 3-member cluster.
func BenchmarkUncontendedEtcdMutex(b *testing.B) { benchPairs(b, benchStore(b, startEtcd)) }

// BenchmarkUncontendedZkLock: the same with go-zookeeper's Lock (a create,
// a children list, a delete) on a 3-server ensemble.
func BenchmarkUncontendedZkLock(b *testing.B) { benchPairs(b, benchStore(b, startZooKeeper)) }
