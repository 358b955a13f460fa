package lineproto

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locker"
)

// ErrCheck marks a lock process that failed Check: it did not start, or
// did not complete hello (its stderr's tail is in the error).
var ErrCheck = errors.New("the lock's process failed its check")

// Check starts the lock's process once, as a run's first client would,
// completes hello and a few pings, and closes it: what every scenario of a
// run would otherwise meet one by one (a missing interpreter module, a
// wrong flag: every scenario unknown, the same traceback in each). The process is handed an in-process Redis
// (miniredis) for the check, so that nothing of a deployment is needed or
// touched: a hello that dials and pings Redis works, and one acquire of a
// check key shows a process that does not log in with hello's password.
// The check ends within ctx (and Config.HelloTimeout).
func Check(ctx context.Context, c Config) error {
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); c.HelloTimeout <= 0 || left < c.HelloTimeout {
			c.HelloTimeout = max(left, time.Millisecond)
		}
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return fmt.Errorf("lock %q: check: an in-process Redis: %w", c.Name, err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	l, err := Open(c, locker.Deps{Redis: rdb, Client: "check", Prefix: "lockproof-check/"})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheck, err)
	}
	// A process that does not log in with hello's password is refused at
	// its first command to Redis, which may come only with its first
	// acquire: one acquire (and its release) on the check's Redis shows
	// it. Any other outcome of it is the lock's business, not the check's.
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	lease, err := l.TryAcquire(actx, "check", time.Second)
	cancel()
	if err != nil && refusedLogin(err) {
		_ = l.Close()
		return fmt.Errorf("%w: lock %q: it did not log in to Redis with hello's redis.password (docs/LINEPROTO.md, Reaching Redis): %w", ErrCheck, c.Name, err)
	}
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = lease.Release(rctx)
		cancel()
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("%w: lock %q: close: %w", ErrCheck, c.Name, err)
	}
	return nil
}

// refusedLogin reports whether err is the endpoint's (or a Redis's)
// refusal of a client that did not log in, or logged in wrongly.
func refusedLogin(err error) bool {
	return strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS")
}
