package nodes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestPromote: a replica in sync at one instant (Copy: strings, hashes,
// sets, sorted sets, lists, with their TTLs) promoted later loses what the
// old master took since, its keys expire on its own clock, its clock runs
// behind by the skew given (TIME, and a TTL copied that much longer), and
// clients are reset and reconnect to it.
func TestPromote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const addr = "127.0.0.1:1"
		n := NewNet(1, addr)
		defer n.Close()
		a := client(n, "a", addr)
		defer a.Close()
		ctx := context.Background()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(a.Set(ctx, "s", "1", 500*time.Millisecond).Err())
		must(a.HSet(ctx, "h", "o", "x", "n", "1").Err())
		must(a.ZAdd(ctx, "z", redis.Z{Score: 946684800123456, Member: "w"}).Err())
		must(a.SAdd(ctx, "set", "m").Err())
		must(a.RPush(ctx, "l", "1", "2").Err())
		node := n.Node(addr)
		node.Advance()
		replica := miniredis.NewMiniRedis()
		const behind = 3 * time.Second
		must(Copy(replica, node.M, behind))
		must(a.Set(ctx, "lost", "1", 0).Err()) // after the sync: lost

		time.Sleep(200 * time.Millisecond)
		replica.FastForward(200 * time.Millisecond)
		must(n.Promote(addr, replica, behind))
		if n.Node(addr).M != replica {
			t.Fatal("the address does not lead to the promoted node")
		}
		if err := a.Ping(ctx).Err(); err == nil {
			t.Error("a call on a connection to the old master succeeded: it was not reset")
		}
		if err := a.Get(ctx, "lost").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("a write after the sync, on the promoted node: %v, want redis.Nil (lost)", err)
		}
		if got, err := a.HGet(ctx, "h", "o").Result(); err != nil || got != "x" {
			t.Errorf("hash field: %q, %v", got, err)
		}
		if got, err := a.ZScore(ctx, "z", "w").Result(); err != nil || got != 946684800123456 {
			t.Errorf("sorted set score: %v, %v", got, err)
		}
		if got, err := a.LRange(ctx, "l", 0, -1).Result(); err != nil || len(got) != 2 || got[0] != "1" {
			t.Errorf("list: %v, %v", got, err)
		}
		if ok, err := a.SIsMember(ctx, "set", "m").Result(); err != nil || !ok {
			t.Errorf("set member: %v, %v", ok, err)
		}
		// 500ms TTL copied 3s longer, 200ms gone: 3.3s left (less the
		// transits of this test's commands, a few nanoseconds).
		if ttl, err := a.PTTL(ctx, "s").Result(); err != nil || ttl < 3299*time.Millisecond || ttl > 3300*time.Millisecond {
			t.Errorf("PTTL on the promoted node: %v, %v; want 3.3s", ttl, err)
		}
		tm, err := a.Time(ctx).Result()
		must(err)
		if d := time.Since(tm); d < behind || d > behind+2*Transit {
			t.Errorf("the promoted node's clock is %v behind, want %v (and the transits)", d, behind)
		}
	})
}

// TestCopyRefusesUnknownTypes: a key of a type Copy does not know is an
// error naming the key, not a key dropped from the replica.
func TestCopyRefusesUnknownTypes(t *testing.T) {
	src, dst := miniredis.RunT(t), miniredis.NewMiniRedis()
	if _, err := src.XAdd("stream", "*", []string{"f", "v"}); err != nil {
		t.Fatal(err)
	}
	if err := Copy(dst, src, 0); err == nil || !strings.Contains(err.Error(), `"stream"`) {
		t.Fatalf("Copy of a stream: %v, want an error naming the key", err)
	}
}
