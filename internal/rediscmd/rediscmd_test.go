package rediscmd_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/rediscmd"
	"github.com/lockproof/lockproof/internal/redistest"
)

func client(t *testing.T) *redis.Client {
	t.Helper()
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// calls returns how often Redis ran cmd since the last CONFIG RESETSTAT.
func calls(t *testing.T, rdb *redis.Client, cmd string) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			return n
		}
	}
	return "0"
}

// A script Redis does not have cached is sent once more as EVAL (NOSCRIPT
// means EVALSHA did nothing); once cached, EVALSHA alone.
func TestScriptRun(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	s := rediscmd.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want <= 4; want += 2 {
		cmd, err := s.Run(ctx, rdb, []string{"k"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := cmd.Int64(); got != want {
			t.Fatalf("reply %d, want %d", got, want)
		}
	}
	if e := calls(t, rdb, "eval"); e != "1" {
		t.Errorf("EVAL ran %s times, want 1 (the first run, after NOSCRIPT)", e)
	}
	if v, _ := rdb.Get(ctx, "k").Int64(); v != 4 {
		t.Errorf("k = %d, want 4: a run took effect twice or not at all", v)
	}
}

// RunWithWait runs the script and WAIT on one connection: the reply is
// the script's, the count WAIT's (no replica here: 0).
func TestRunWithWait(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	s := rediscmd.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
	reply, acks, waitErr, err := rediscmd.NewSender(rdb).RunWithWait(ctx, s, 1, 20*time.Millisecond, []string{"k"}, "v")
	if err != nil || waitErr != nil {
		t.Fatalf("err %v, wait err %v", err, waitErr)
	}
	if reply != "OK" || acks != 0 {
		t.Fatalf("reply %v acks %d, want OK and 0", reply, acks)
	}
	if v, _ := rdb.Get(ctx, "k").Result(); v != "v" {
		t.Fatalf("k = %q, want v", v)
	}
}

// A Sender gives up at ctx's end even when its client ignores ctx (the
// round trip runs on in the background); Run sends through it.
func TestSenderHonoursCtx(t *testing.T) {
	rdb := client(t) // ContextTimeoutEnabled false: go-redis ignores ctx
	snd := rediscmd.NewSender(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := snd.Process(ctx, redis.NewCmd(ctx, "blpop", "none", 5))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("returned after %v: it waited for the command (5s), not for ctx", took)
	}
	if reply, err := snd.Run(context.Background(), rediscmd.NewScript(`return 7`), nil); err != nil || reply != int64(7) {
		t.Fatalf("Run: reply %v, err %v; want 7", reply, err)
	}
}

// SurelyNoEffect draws the line between an error that proves the command
// did nothing and one that leaves it open.
func TestSurelyNoEffect(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	if err := rdb.Set(ctx, "s", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, replyErr := rediscmd.Do(ctx, rdb, "incr", "s") // ERR not an integer
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	nobody := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1})
	defer nobody.Close()
	_, dialErr := rediscmd.Do(ctx, nobody, "ping")
	slow := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer slow.Close()
	_, timeoutErr := rediscmd.Do(ctx, slow, "blpop", "none", 2)
	closed := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	_ = closed.Close()
	_, closedErr := rediscmd.Do(ctx, closed, "ping")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"error reply", replyErr, true},
		{"dial", dialErr, true},
		{"closed client", closedErr, true},
		{"read timeout", timeoutErr, false},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := rediscmd.SurelyNoEffect(c.err); got != c.want {
			t.Errorf("%s (%v): SurelyNoEffect %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
