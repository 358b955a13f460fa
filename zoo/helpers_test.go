package zoo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// newClient returns a client of p closed at the end of the test.
func newClient(t *testing.T, p *redisproc.Process) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func tctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, name string, d locker.Deps) locker.Locker {
	t.Helper()
	l, err := zoo.Builtin().Open(name, d)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func acquire(t *testing.T, l locker.Locker, key string, ttl time.Duration) locker.Lease {
	t.Helper()
	ls, err := l.TryAcquire(tctx(t), key, ttl)
	if err != nil {
		t.Fatalf("%s: acquire %q: %v", l.Name(), key, err)
	}
	return ls
}

func refused(t *testing.T, l locker.Locker, key string, ttl time.Duration) {
	t.Helper()
	ls, err := l.TryAcquire(tctx(t), key, ttl)
	if !errors.Is(err, locker.ErrNotAcquired) || errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("%s: acquire %q while held: lease %v, err %v; want locker.ErrNotAcquired", l.Name(), key, ls, err)
	}
}

// waitGone waits (bounded) until key no longer exists in rdb.
func waitGone(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := rdb.Exists(tctx(t), key).Result()
		if err != nil {
			t.Fatalf("exists %q: %v", key, err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q still exists after 20s", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expireNow makes key expire at once, standing for a lease running out
// while its holder is paused.
func expireNow(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	if err := rdb.PExpire(tctx(t), key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, rdb, key)
}

// hook runs after on every command named name that completes on the
// client; with drop, the command is not sent and after's error is returned.
type hook struct {
	name  string
	drop  bool
	after func(ctx context.Context, cmd redis.Cmder) error
}

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.drop && cmd.Name() == h.name {
			return h.after(ctx, cmd)
		}
		err := next(ctx, cmd)
		if cmd.Name() == h.name {
			if herr := h.after(ctx, cmd); herr != nil {
				return herr
			}
		}
		return err
	}
}
