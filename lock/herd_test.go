package lock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// scriptCalls is how many scripts (EVALSHA and EVAL) Redis has run, from
// INFO commandstats.
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("info commandstats: %v", err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, stats, _ := strings.Cut(line, ":")
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				c, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("commandstats %q: %v", line, err)
				}
				n += c
			}
		}
	}
	return n
}

// scriptsPerAcquisition runs waiters goroutines, each on a Client of its
// own, that take key in turn until acquisitions in all were made, holding
// it for hold each time, and returns the scripts Redis ran per acquisition.
func scriptsPerAcquisition(t *testing.T, rdb *redis.Client, key string, waiters, acquisitions int, hold time.Duration, opts lock.Options) float64 {
	t.Helper()
	ctx := ctxT(t)
	before := scriptCalls(t, rdb)
	var (
		mu   sync.Mutex
		left = acquisitions
		wg   sync.WaitGroup
		errs []error
	)
	for i := 0; i < waiters; i++ {
		c := newLocks(t, rdb, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				l, err := c.Acquire(ctx, key)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				time.Sleep(hold)
				if err := l.Release(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d waiters: %v", waiters, errs)
	}
	return float64(scriptCalls(t, rdb)-before) / float64(acquisitions)
}

// TestHandoffWorkIsFlat: the work a hand-off costs does not grow with the
// line (review defect 8: every hand-off woke every waiter, which ran a
// script one hand-off lease later to see whether the new holder had picked
// the lock up; 11.6 scripts per acquisition at 20 waiters, 4.4 at 5). The
// holds are longer than a hand-off lease, and the queue TTL long enough
// that no waiter needs to refresh its place meanwhile: what is left is
// each acquisition's own work (join the line, pick up, release).
func TestHandoffWorkIsFlat(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	opts := lock.Options{TTL: 10 * time.Second, QueueTTL: time.Minute, HandoffTTL: 30 * time.Millisecond}
	const hold = 60 * time.Millisecond
	few := scriptsPerAcquisition(t, rdb, "few", 2, 30, hold, opts)
	many := scriptsPerAcquisition(t, rdb, "many", 16, 48, hold, opts)
	t.Logf("scripts per acquisition: %.2f with 2 waiters, %.2f with 16", few, many)
	if many > few+2 {
		t.Fatalf("scripts per acquisition grow with the line: %.2f with 2 waiters, %.2f with 16", few, many)
	}
}

// TestLineLooksWhenAHandoffIsNotPickedUp: the line no longer looks after
// each hand-off (TestHandoffWorkIsFlat), so somebody must look when the
// recipient died in line: a waiter already in line behind it gets the lock
// once the hand-off lease runs out, not at its next refresh (20 s here)
// nor when the old holder's minute would have ended.
func TestLineLooksWhenAHandoffIsNotPickedUp(t *testing.T) {
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	keys := lock.RedisKeys("k")
	opts := lock.Options{TTL: time.Minute, QueueTTL: time.Minute, HandoffTTL: 200 * time.Millisecond}
	holder, live := newLocks(t, rdb, opts), newLocks(t, newRDB(t, p), opts)
	l := mustAcquire(t, holder, "k")
	// The dead waiter, first in line; the live one joins behind it.
	if err := rdb.ZAdd(ctxT(t), keys.Queue, redis.Z{Score: 1, Member: "60000:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctxT(t), keys.QueueDeadlines, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "60000:dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		ll, err := live.Acquire(ctx, "k")
		if err == nil {
			err = ll.Release(context.Background())
		}
		got <- err
	}()
	eventually(t, "the live waiter to queue", func() bool { return queueLen(t, rdb, "k") == 2 })
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter behind a dead recipient: %v (want the lock once the hand-off lease ran out)", err)
	}
}
