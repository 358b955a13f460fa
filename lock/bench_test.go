package lock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

func benchClient(b *testing.B, opts lock.Options) (*lock.Client, *redis.Client) {
	b.Helper()
	p := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rdb.Close() })
	c, err := lock.New(rdb, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, rdb
}

func benchUncontended(b *testing.B, opts lock.Options) {
	c, _ := benchClient(b, opts)
	benchAcquireRelease(b, c)
}

// benchAcquireRelease measures acquire then release of one key with c, timed
// from here, reported in ops/s.
func benchAcquireRelease(b *testing.B, c *lock.Client) {
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := c.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkUncontended: one goroutine, acquire then release, one key.
func BenchmarkUncontended(b *testing.B) { benchUncontended(b, lock.Options{TTL: 10 * time.Second}) }

// BenchmarkUncontendedWatchdog: the same with the watchdog on (its cost per lease).
func BenchmarkUncontendedWatchdog(b *testing.B) {
	benchUncontended(b, lock.Options{TTL: 10 * time.Second, Watchdog: true})
}

// BenchmarkWatchdogRenewing: acquire+release while 100 other leases are kept
// alive by watchdogs renewing every 10ms (TTL 30ms): the renewal load's cost.
func BenchmarkWatchdogRenewing(b *testing.B) {
	c, _ := benchClient(b, lock.Options{TTL: 10 * time.Second})
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		l, err := c.Acquire(ctx, "held-"+string(rune('a'+i%26))+string(rune('a'+i/26)), lock.WithTTL(30*time.Millisecond), lock.WithWatchdog(true))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	benchAcquireRelease(b, c)
}

// BenchmarkContended: 16 goroutines on one key, each holding the lock for a
// 1ms critical section. Reports throughput and the p50/p99 time a caller
// waits in Acquire.
func BenchmarkContended(b *testing.B) {
	const goroutines, cs = 16, time.Millisecond
	c, _ := benchClient(b, lock.Options{TTL: 10 * time.Second})
	ctx := context.Background()
	var next atomic.Int64
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				l, err := c.Acquire(ctx, "bench")
				if err != nil {
					b.Error(err)
					return
				}
				waits[g] = append(waits[g], time.Since(start))
				time.Sleep(cs)
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(waits...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-wait-ms")
}
