package nodes

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWaitCountsTheReplica: WAIT is answered as a master with one replica
// answers it. In sync, one replica acknowledges at once. From SyncReplica
// to the promotion the replica is cut off: a WAIT for one blocks its
// connection for its timeout and replies 0, and the script pipelined ahead
// of it ran at once (its write is on the node before WAIT's reply). After
// the promotion the new master's replica is in sync again. A WAIT for more
// replicas than the model has waits out its timeout and counts the one.
func TestWaitCountsTheReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, addr := oneNode(t)
		ctx := context.Background()
		wait := func(want int, timeout time.Duration) (int64, time.Duration) {
			t.Helper()
			start := time.Now()
			got, err := a.Wait(ctx, want, timeout).Result()
			if err != nil {
				t.Fatalf("WAIT %d %v: %v", want, timeout, err)
			}
			return got, time.Since(start)
		}
		if got, took := wait(1, 100*time.Millisecond); got != 1 || took >= 100*time.Millisecond {
			t.Errorf("WAIT 1 in sync: %d after %v, want 1 at once", got, took)
		}
		if got, took := wait(2, 100*time.Millisecond); got != 1 || took < 100*time.Millisecond {
			t.Errorf("WAIT 2 with one replica: %d after %v, want 1 after the 100ms timeout", got, took)
		}

		id, _, err := n.SyncReplica(addr, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A script and a WAIT in one pipeline, as package lock sends them.
		pipe := a.Pipeline()
		set := pipe.Eval(ctx, "return redis.call('SET', KEYS[1], 'v')", []string{"k"})
		w := redis.NewIntCmd(ctx, "wait", 1, 200)
		_ = pipe.Process(ctx, w)
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = pipe.Exec(ctx)
		}()
		time.Sleep(50 * time.Millisecond)
		if !n.Node(addr).M.Exists("k") {
			t.Error("the script ahead of a blocked WAIT did not run at once")
		}
		<-done
		if err := set.Err(); err != nil && err != redis.Nil {
			t.Fatalf("the script: %v", err)
		}
		if got, err := w.Result(); err != nil || got != 0 || time.Since(start) < 200*time.Millisecond {
			t.Errorf("WAIT 1 with the replica cut off: %d, %v after %v, want 0 after the 200ms timeout", got, err, time.Since(start))
		}
		if c := n.Counts(); c.WaitsShort != 2 {
			t.Errorf("WaitsShort = %d, want 2 (WAIT 2 in sync, WAIT 1 cut off)", c.WaitsShort)
		}
		if _, err := n.PromoteReplica(id); err != nil {
			t.Fatal(err)
		}
		// The promotion reset the connection: the client dials again.
		_ = a.Ping(ctx).Err()
		if got, took := wait(1, 100*time.Millisecond); got != 1 || took >= 100*time.Millisecond {
			t.Errorf("WAIT 1 after the promotion: %d after %v, want 1 at once", got, took)
		}
	})
}
