package lineproto_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lineproto"
	"github.com/lockproof/lockproof/locker"
)

// echoEnv makes the test binary a lock process that does nothing (echo):
// every request is answered ok at once, so a round trip through it is the
// harness's own share of the protocol (pipes, JSON, dispatch), apart from
// any lock's or interpreter's.
const echoEnv = "LINEPROTO_TEST_ECHO"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) == "1" {
		echo()
		return
	}
	os.Exit(m.Run())
}

func echo() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	var lease uint64
	for in.Scan() {
		var r lineproto.Request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rep := lineproto.Reply{ID: r.ID, Result: lineproto.ResultOK}
		switch r.Op {
		case lineproto.OpHello:
			rep.Version, rep.Ops = lineproto.Version, []string{lineproto.OpAcquire, lineproto.OpRelease}
		case lineproto.OpAcquire:
			lease++
			rep.Lease = lease
		}
		b, _ := json.Marshal(rep)
		out.Write(append(b, '\n'))
		out.Flush()
	}
}

// pinger is a Locker of package lineproto (Open gives a Waiter for a lock
// that waits).
type pinger interface {
	locker.Locker
	Ping(ctx context.Context) error
}

func benchLocker(b *testing.B, cmd []string, env ...string) (pinger, *redis.Client) {
	b.Helper()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	b.Cleanup(func() { _ = rdb.Close() })
	for _, e := range env {
		b.Setenv(echoEnv, e)
	}
	l, err := lineproto.Open(lineproto.Config{Name: "bench", Command: cmd, Env: []string{echoEnv}}, locker.Deps{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	p, ok := l.(pinger)
	if !ok {
		b.Fatalf("Open gave a %T, without Ping", l)
	}
	return p, rdb
}

// BenchmarkRoundTrip sets the protocol's round trip beside a loopback
// Redis's, in one run (benchstat compares runs of it):
//   - redis-ping: go-redis PING to a local redis-server (the yardstick);
//   - echo-ping: a protocol ping to a process that answers at once (the
//     harness's own share);
//   - redispy-ping: a protocol ping to the redis-py adapter (the share a
//     Python adapter adds);
//   - redispy-acquire-release and go-acquire-release: one hold through
//     the protocol and redis-py's Lock, and the same commands from Go.
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	b.Run("redis-ping", func(b *testing.B) {
		_, rdb := benchLocker(b, []string{os.Args[0]}, "1")
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("echo-ping", func(b *testing.B) {
		l, _ := benchLocker(b, []string{os.Args[0]}, "1")
		for b.Loop() {
			if err := l.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redispy-ping", func(b *testing.B) {
		l, _ := benchLocker(b, adapter(b))
		for b.Loop() {
			if err := l.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redispy-acquire-release", func(b *testing.B) {
		l, _ := benchLocker(b, adapter(b))
		for b.Loop() {
			le, err := l.TryAcquire(ctx, "k", time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := le.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-acquire-release", func(b *testing.B) {
		_, rdb := benchLocker(b, []string{os.Args[0]}, "1")
		del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
		for b.Loop() {
			if ok, err := rdb.SetNX(ctx, "k", "t", time.Second).Result(); err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := del.Run(ctx, rdb, []string{"k"}, "t").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
