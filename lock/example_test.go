package lock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/lock"
)

// A fenced write: the resource (here a Redis key written by a script) keeps
// the highest fence it has seen and refuses writes carrying a lower one.
func Example() {
	addr := os.Getenv("LOCKPROOF_EXAMPLE_REDIS") // set by TestMain to a real redis-server
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks, err := lock.New(rdb, lock.Options{TTL: 5 * time.Second, Watchdog: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := locks.Acquire(ctx, "orders")
	fmt.Println("acquired:", err == nil)
	if err != nil {
		return
	}

	fencedWrite := redis.NewScript(`
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1`)
	// Run the work under the lease's context: it is canceled if the lease is lost.
	ok, err := fencedWrite.Run(lease.Context(), rdb, []string{"orders:data", "orders:data:fence"},
		lease.Fence(), "order 42 shipped").Int()
	fmt.Println("write accepted:", err == nil && ok == 1)

	fmt.Println("released:", lease.Release(ctx) == nil)
	// Output:
	// acquired: true
	// write accepted: true
	// released: true
}
