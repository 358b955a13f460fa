package zoo_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// BenchmarkAcquireRelease measures one uncontended acquire+release per lock.
func BenchmarkAcquireRelease(b *testing.B) {
	p := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	for _, name := range singleInstance {
		b.Run(name, func(b *testing.B) {
			l, err := zoo.Builtin().Open(name, locker.Deps{Redis: rdb, Prefix: "bench:" + name + ":"})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			for b.Loop() {
				ls, err := l.TryAcquire(ctx, "k", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := ls.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
