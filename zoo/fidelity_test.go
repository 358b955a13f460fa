package zoo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/fidelity"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
)

// TestMiniredisFidelity: every lock of the zoo that runs on one Redis
// (the specimens, the shipped lock and its frozen copies), driven through
// the harness's interface on a real redis-server (acquire, refusal,
// renewal, release, a wait handed the lock, a lease that ran out), is
// replayed command for command on a fresh redis-server and on miniredis,
// and the two agree on every reply, key and pub/sub message but for their
// clocks (package fidelity): the simulation's in-process Redis runs the
// zoo's scripts as Redis does.
func TestMiniredisFidelity(t *testing.T) {
	for _, name := range singleInstance {
		t.Run(name, func(t *testing.T) {
			p := redistest.Start(t)
			rec := fidelity.NewRecorder()
			client := func() locker.Locker {
				rdb := newClient(t, p)
				rdb.AddHook(rec.Hook())
				return open(t, name, locker.Deps{Redis: rdb})
			}
			a, b := client(), client()
			driveLocker(t, a, b)
			cmds := rec.Commands()
			if len(cmds) < 6 {
				t.Fatalf("only %d commands recorded", len(cmds))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			diffs, err := fidelity.Replay(ctx, cmds, fidelity.Target{Name: "redis-server", RDB: newClient(t, redistest.Start(t))}, fidelity.Miniredis(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				t.Error(d)
			}
			t.Logf("%d commands replayed", len(cmds))
		})
	}
}

// driveLocker runs a's and b's locks through what the harness asks of a
// lock: an acquire, a refusal, a renewal (when the lock has one of the
// lease's TTL), a release, the other's acquire, a wait handed the lock
// (for a lock with a blocking acquire), and a lease that ran out after its
// client went away (Close), taken by the other.
func driveLocker(t *testing.T, a, b locker.Locker) {
	t.Helper()
	ttl := 2 * time.Second
	la := acquire(t, a, "k", ttl)
	refused(t, b, "k", ttl)
	if err := la.Renew(tctx(t), ttl); err != nil && !errors.Is(err, locker.ErrUnsupported) {
		t.Fatalf("renew: %v", err)
	}
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
	lb := acquire(t, b, "k", ttl)
	if w, ok := a.(locker.Waiter); ok {
		got := make(chan error, 1)
		go func() {
			l, err := w.Acquire(tctx(t), "k", ttl)
			if err == nil {
				err = l.Release(tctx(t))
			}
			got <- err
		}()
		time.Sleep(200 * time.Millisecond) // a is waiting
		if err := lb.Release(tctx(t)); err != nil {
			t.Fatalf("release while a waits: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the wait: %v", err)
		}
	} else if err := lb.Release(tctx(t)); err != nil {
		t.Fatalf("release b: %v", err)
	}
	short := 300 * time.Millisecond
	le := acquire(t, a, "e", short)
	if le.TTL() == 0 {
		return // a lock without expiry (setnx): nothing runs out
	}
	// a goes away (a watchdog stops with it), and its lease runs out.
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	time.Sleep(2 * short)
	acquire(t, b, "e", ttl)
}
