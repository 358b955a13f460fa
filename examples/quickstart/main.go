// Command quickstart takes lockproof's lock and decrements a stock counter
// kept in a fenced resource on another Redis: the read and the write both
// carry the lease's fence, so a holder that lost its lease (paused past its
// TTL, say) cannot write over the next holder's update.
//
//	go run ./examples/quickstart -lock 127.0.0.1:6379 -data 127.0.0.1:6380
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/lock"
)

func main() {
	lockAddr := flag.String("lock", "127.0.0.1:6379", "the lock's Redis")
	dataAddr := flag.String("data", "127.0.0.1:6380", "the Redis holding the stock (not the lock's)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	left, err := decrementStock(ctx, *lockAddr, *dataAddr, "sku-42", 100)
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
	fmt.Println("stock left:", left)
}

// decrementStock takes one item of sku (starting from initial when the
// stock was never written) under the lock of sku, and returns what is left.
func decrementStock(ctx context.Context, lockAddr, dataAddr, sku string, initial int) (int, error) {
	lockRDB := redis.NewClient(&redis.Options{Addr: lockAddr, ContextTimeoutEnabled: true})
	defer lockRDB.Close()
	locks, err := lock.New(lockRDB, lock.Options{TTL: 5 * time.Second, Watchdog: true})
	if err != nil {
		return 0, err
	}
	defer locks.Close(context.Background()) // waits for the lock's background cleanups
	dataRDB := redis.NewClient(&redis.Options{Addr: dataAddr, ContextTimeoutEnabled: true})
	defer dataRDB.Close()
	stock, err := fencing.NewRedis(dataRDB, fencing.RedisOptions{})
	if err != nil {
		return 0, err
	}

	lease, err := locks.Acquire(ctx, sku) // waits in line (FIFO) until acquired or ctx is done
	if err != nil {
		return 0, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	// Work under lease.Context(): it is canceled if the lease is lost.
	work := lease.Context()

	// The read carries the fence too: it raises the resource's fence, so a
	// stale holder cannot write after this holder has read.
	v, err := stock.ReadFenced(work, sku, lease.Fence(), lease.Owner())
	if err != nil {
		return 0, err
	}
	n := initial
	if v.Written {
		if n, err = strconv.Atoi(v.Value); err != nil {
			return 0, fmt.Errorf("stock of %s: %w", sku, err)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s is out of stock", sku)
	}
	// The resource refuses a write whose fence is below the highest it has
	// seen (fencing.ErrStaleToken): a lease lost meanwhile cannot overwrite.
	err = stock.Write(work, sku, fencing.Write{Token: lease.Fence(), Owner: lease.Owner(), Value: strconv.Itoa(n - 1)})
	if err != nil {
		return 0, err
	}
	return n - 1, nil
}
