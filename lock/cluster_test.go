package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestLockOnCluster: the lock on a redis.ClusterClient, against a real
// Redis Cluster of three shards with a replica each. Every key of one
// lock key is in one slot (one hash tag), so each script runs whole on
// one shard: on a key of each shard, a holder's watchdog keeps its lease
// past its TTL, a nested hold shares its fence, a waiter is handed the
// key through pub/sub (a message published on one shard reaches a
// subscriber connected to another) with a higher fence, and after a
// manual failover of the shard (CLUSTER FAILOVER on its replica) the
// client follows the redirection and the fences go on from above.
func TestLockOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, redisproc.ClusterConfig{Replicas: 1})
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	opts := lock.Options{TTL: time.Second, Watchdog: true}
	a, err := lock.New(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lock.New(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, l := range []*lock.Client{a, b} {
			if err := l.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	}()

	keys := keysOnEachShard(t, cc, c.Masters)
	fences := map[string]uint64{}
	for shard, key := range keys {
		ks := lock.RedisKeys(key)
		slot := keySlot(t, cc, ks.Lock)
		for _, k := range []string{ks.Fence, ks.Queue, ks.QueueDeadlines, ks.Gone, ks.Channel} {
			if s := keySlot(t, cc, k); s != slot {
				t.Errorf("%s is in slot %d, the lock's %s in %d: a script touching both would fail (CROSSSLOT)", k, s, ks.Lock, slot)
			}
		}
		l, err := a.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("shard %d key %q: %v", shard, key, err)
		}
		nested, err := a.TryAcquire(ctx, key, lock.WithOwner(l.Owner()))
		if err != nil || nested.Fence() != l.Fence() {
			t.Fatalf("shard %d: nested hold: %v (fence %d, want %d)", shard, err, nested.Fence(), l.Fence())
		}
		if err := nested.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // past the TTL: the watchdog renews
		select {
		case <-l.Lost():
			t.Fatalf("shard %d: the watchdog lost the lease", shard)
		default:
		}
		got, queued := make(chan *lock.Lease, 1), make(chan struct{})
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			w, err := b.Acquire(wctx, key, lock.WithQueued(func() { close(queued) }))
			if err != nil {
				t.Errorf("shard %d: the waiter: %v", shard, err)
			}
			got <- w
		}()
		select {
		case <-queued:
		case w := <-got:
			t.Fatalf("shard %d: the waiter did not wait in line (%v)", shard, w)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		w := <-got
		if w == nil {
			t.FailNow()
		}
		if w.Fence() <= l.Fence() {
			t.Errorf("shard %d: fence %d handed off after %d", shard, w.Fence(), l.Fence())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		fences[key] = w.Fence()
	}

	// A manual failover of the first key's shard: its replica takes over
	// in sync, and the fence counter with it.
	key := keys[0]
	replica := c.Nodes[c.Masters] // the replica of shard 0
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rr.Close()
	if err := rr.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := rr.Info(ctx, "replication").Result()
		if err == nil && containsLine(info, "role:master") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica of shard 0 did not become master: %v\n%s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var l *lock.Lease
	for l == nil {
		// The client learns the new master from a redirection (MOVED)
		// or, while the old master still thinks itself one, is refused.
		if l, err = a.TryAcquire(ctx, key); err != nil && time.Now().After(deadline) {
			t.Fatalf("acquire after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l.Fence() <= fences[key] {
		t.Errorf("after the failover, fence %d; the last before it was %d", l.Fence(), fences[key])
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// keysOnEachShard returns a lock key whose slot is served by each of
// the cluster's masters, in the order of their slot ranges.
func keysOnEachShard(t *testing.T, cc *redis.ClusterClient, masters int) []string {
	t.Helper()
	out := make([]string, masters)
	found := 0
	per := 16384 / masters
	for i := 0; found < masters && i < 10000; i++ {
		key := "k" + strconv.Itoa(i)
		shard := min(int(keySlot(t, cc, lock.RedisKeys(key).Lock))/per, masters-1)
		if out[shard] == "" {
			out[shard] = key
			found++
		}
	}
	if found < masters {
		t.Fatalf("no key on every shard: %v", out)
	}
	return out
}

func keySlot(t *testing.T, cc *redis.ClusterClient, key string) int64 {
	t.Helper()
	s, err := cc.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// TestReleaseDuringSlotMigration: a release whose keys are split between
// two masters, the lock's slot half migrated (redis-cli --cluster
// reshard's MIGRATING and IMPORTING, one key moved), is refused TRYAGAIN:
// it surely had no effect, and the lock sends it again until the
// migration has moved on, within the release's context. The old lock
// returned the refusal, and its lease stayed held, renewed by its
// watchdog for good: a client that gave up on it (one release, as most
// do) kept every waiter off the key for the rest of the run (found by
// lockproof run --topology cluster, fenced × migrate seed 1).
func TestReleaseDuringSlotMigration(t *testing.T) {
	ctx := context.Background()
	c, cc, l := heldOnCluster(t, 2*time.Second)
	key, ks := l.Key(), lock.RedisKeys(l.Key())
	slot := keySlot(t, cc, ks.Lock)
	// Shard 0 serves the key; move its slot to shard 1, the fence first.
	rs, rd, dstID := migrateFence(t, c, ks, slot)
	host, port, _ := strings.Cut(c.Nodes[1].Addr, ":")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	finished := make(chan error, 1)
	go func() {
		// The reshard finishes 300ms later: the rest of the slot moves.
		time.Sleep(300 * time.Millisecond)
		keys, err := rs.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		if err == nil && len(keys) > 0 {
			args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			err = rs.Do(ctx, args...).Err()
		}
		for _, r := range []*redis.Client{rd, rs, redis.NewClient(&redis.Options{Addr: c.Nodes[2].Addr})} {
			if err == nil {
				err = r.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
			}
		}
		finished <- err
	}()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		t.Fatalf("release while the slot migrates: %v", err)
	}
	must(<-finished)
	b, err := lock.New(cc, lock.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	var nl *lock.Lease
	deadline := time.Now().Add(5 * time.Second)
	for nl == nil {
		// The key is free at once (no hold left behind); the client
		// may learn the new master from a MOVED first.
		if nl, err = b.TryAcquire(ctx, key); err != nil && time.Now().After(deadline) {
			t.Fatalf("acquire after the release: %v (the released hold is still there)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if nl.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d: the fence counter did not move with the slot", nl.Fence(), l.Fence())
	}
	must(nl.Release(ctx))
}

// TestReleaseThatOutlastsASlotMigration: a release refused TRYAGAIN until
// its ctx ends (the slot migrates for longer) returns an error that wraps
// both the refusal and ctx's cause, so that a caller retrying on ctx
// errors sees one; and the lease's watchdog stops, so that a caller that
// gives up leaves no hold the lock keeps alive (review, round three:
// fenced x migrate on a Redis Cluster, seeds 4 and 7 of 10, the
// refusal alone came back and the watchdog renewed the hold for the
// rest of the run while a waiter gave up).
func TestReleaseThatOutlastsASlotMigration(t *testing.T) {
	ctx := context.Background()
	c, cc, l := heldOnCluster(t, time.Second)
	ks := lock.RedisKeys(l.Key())
	slot := keySlot(t, cc, ks.Lock)
	// The fence moves, the lock stays: the release's keys are split
	// between the two masters for as long as the migration stands.
	rs, _, _ := migrateFence(t, c, ks, slot)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := l.Release(rctx)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "TRYAGAIN") {
		t.Fatalf("a release refused until its ctx ended: %v, want TRYAGAIN and context.DeadlineExceeded", err)
	}
	// Nobody releases again: the hold must expire with its TTL (1s), not
	// be renewed by the watchdog. The slot stays where it is meanwhile
	// (the lock key on the source, which serves it).
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, err := rs.Exists(ctx, ks.Lock).Result()
		if redis.HasErrorPrefix(err, "ASK") {
			n, err = 0, nil // a migrating slot's source sends a key it lacks to the target
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold of a release that gave up still stands %v later: the watchdog keeps it", 3*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// migrateFence starts moving slot (shard 0's, ks's) to shard 1 and moves
// the fence counter alone: the lock's keys are split between the two
// masters until the rest of the slot follows. It returns clients of the
// source and the target (closed when the test ends) and the target's ID.
func migrateFence(t *testing.T, c *redisproc.Cluster, ks lock.Keys, slot int64) (src, dst *redis.Client, dstID string) {
	t.Helper()
	ctx := context.Background()
	src = redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	t.Cleanup(func() { _ = src.Close() })
	dst = redis.NewClient(&redis.Options{Addr: c.Nodes[1].Addr})
	t.Cleanup(func() { _ = dst.Close() })
	srcID, err := src.ClusterMyID(ctx).Result()
	if err == nil {
		dstID, err = dst.ClusterMyID(ctx).Result()
	}
	host, port, _ := strings.Cut(c.Nodes[1].Addr, ":")
	for _, step := range []func() error{
		func() error { return dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err() },
		func() error { return src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err() },
		func() error { return src.Do(ctx, "MIGRATE", host, port, "", 0, 5000, "KEYS", ks.Fence).Err() },
	} {
		if err == nil {
			err = step()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return src, dst, dstID
}

// heldOnCluster starts a Redis Cluster of processes and returns it, a
// client of it, and a lease (TTL ttl, watchdog on) of a key that shard 0
// serves; all closed when the test ends.
func heldOnCluster(t *testing.T, ttl time.Duration) (*redisproc.Cluster, *redis.ClusterClient, *lock.Lease) {
	t.Helper()
	c := redistest.StartCluster(t, redisproc.ClusterConfig{})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	a := newLocks(t, cc, lock.Options{TTL: ttl, Watchdog: true})
	l, err := a.TryAcquire(context.Background(), keysOnEachShard(t, cc, c.Masters)[0])
	if err != nil {
		t.Fatal(err)
	}
	return c, cc, l
}
