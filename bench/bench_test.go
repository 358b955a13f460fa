package main

// The benchmarks below measure the uncontended acquire+release of lockproof,
// redsync and redislock in-process, for benchstat comparisons (-count 6):
// the wall time, and the client's CPU time (client-µs/op: this process's
// user + system time, the redis-server child not included), e.g.
//
//	go test -run '^$' -bench Uncontended -count 6 . | tee new.txt

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
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
