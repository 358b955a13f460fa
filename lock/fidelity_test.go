package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/fidelity"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// TestMiniredisFidelity: every script path of the lock, driven through its
// API on a real redis-server, is replayed command for command on a fresh
// redis-server and on miniredis (the in-process Redis of the simulation
// and of the deterministic tests), and the two agree on every reply, the
// whole key space after each command (TTLs, hash fields, queue scores)
// and every pub/sub message, but for their clocks (package fidelity). A
// path miniredis ran differently would show here before it made a
// simulated run lie.
func TestMiniredisFidelity(t *testing.T) {
	rec := fidelity.NewRecorder()
	cmds := recordLockPaths(t, rec)
	// The first run of each script on a fresh server is an EVAL of its
	// source (after EVALSHA's NOSCRIPT): every script of the lock ran.
	scripts := map[string]bool{}
	for _, c := range cmds {
		if name, _ := c.Args[0].(string); strings.EqualFold(name, "eval") {
			scripts[fmt.Sprint(c.Args[1])] = true
		}
	}
	if len(scripts) != lockScripts {
		t.Fatalf("%d of the lock's %d scripts ran in %d commands", len(scripts), lockScripts, len(cmds))
	}
	diffs := replayOnBoth(t, cmds)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("%d commands replayed on redis-server and miniredis", len(cmds))
}

// lockScripts is the number of Lua scripts in package lock (scripts.go):
// acquire, end (release, undo, give-back, leave), renew, holds, ttl,
// inspect, force unlock, reenter and bury (of a renewal).
const lockScripts = 9

// replayOnBoth replays cmds on a fresh redis-server and a fresh miniredis.
func replayOnBoth(t *testing.T, cmds []fidelity.Command) []fidelity.Diff {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	diffs, err := fidelity.Replay(ctx, cmds, fidelity.Target{Name: "redis-server", RDB: newRDB(t, redistest.Start(t))}, fidelity.Miniredis(t))
	if err != nil {
		t.Fatal(err)
	}
	return diffs
}

// loseReply is a hook that, once armed, lets the next script run and then
// reports its reply lost (an unknown outcome, as a connection cut after
// the command was sent).
type loseReply struct{ armed atomic.Bool }

var errReplyLost = errors.New("reply lost (test)")

func (h *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && err == nil && h.armed.CompareAndSwap(true, false) {
			return errReplyLost
		}
		return err
	}
}
func (h *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// recordLockPaths drives every script of the lock (acquire: fast path,
// taken, queued, hand-off pickup, reentrant as an owner; release: fast
// path, hand-off, not held; renew and RenewFor; leave; holds, TTL,
// inspect; force unlock; reenter; undo of a lost reply) on a real
// redis-server, recording the commands sent.
func recordLockPaths(t *testing.T, rec *fidelity.Recorder) []fidelity.Command {
	t.Helper()
	p := redistest.Start(t)
	lost := &loseReply{}
	client := func() *lock.Client {
		rdb := newRDB(t, p)
		rdb.AddHook(rec.Hook())
		rdb.AddHook(lost)
		return newLocks(t, rdb, lock.Options{TTL: 2 * time.Second})
	}
	a, b, c := client(), client(), client()
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// One holder: fast paths, renewals, nested holds, the read-only scripts.
	l, err := a.TryAcquire(ctx, "k", lock.WithMetadata("m1"))
	must(err)
	_, err = a.Inspect(ctx, "k")
	must(err)
	_, err = a.HoldsOf(ctx, "k", l.Owner())
	must(err)
	_, err = l.TTLLeft(ctx)
	must(err)
	must(l.Renew(ctx))
	must(l.RenewFor(ctx, 3*time.Second))
	lost.armed.Store(true)
	if err := l.Renew(ctx); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("renewal with its reply lost: %v, want ErrUnknownOutcome", err)
	}
	time.Sleep(100 * time.Millisecond) // its bury runs in the background
	in, err := l.Reenter(ctx)
	must(err)
	must(in.Release(ctx))
	must(l.Release(ctx))
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}

	// Owners: a reentrant acquire as the same owner, and one whose reply
	// is lost (taken back by the undo script).
	o1, err := a.TryAcquire(ctx, "o", lock.WithOwner("owner"))
	must(err)
	o2, err := a.TryAcquire(ctx, "o", lock.WithOwner("owner"))
	must(err)
	lost.armed.Store(true)
	if _, err := a.TryAcquire(ctx, "o", lock.WithOwner("owner")); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("acquire with its reply lost: %v, want ErrUnknownOutcome", err)
	}
	time.Sleep(200 * time.Millisecond) // the undo runs in the background
	must(o2.Release(ctx))
	must(o1.Release(ctx))

	// A line: taken, queued, handed off, picked up; a waiter that gives up.
	h, err := a.TryAcquire(ctx, "q")
	must(err)
	var wg sync.WaitGroup
	var got *lock.Lease
	var werr error
	queued := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, werr = b.Acquire(ctx, "q", lock.WithQueued(func() { close(queued) }))
	}()
	<-queued
	var taken *lock.TakenError
	if _, err := c.TryAcquire(ctx, "q"); !errors.As(err, &taken) {
		t.Fatalf("try while held and queued: %v, want a TakenError", err)
	}
	gctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := c.Acquire(gctx, "q"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("waiter giving up: %v, want ErrNotAcquired", err)
	}
	cancel()
	time.Sleep(100 * time.Millisecond) // its leave runs in the background
	must(h.Release(ctx))
	wg.Wait()
	must(werr)
	must(got.Release(ctx))

	// Expiry: a lease that ran out is taken by another client with a
	// larger fence, and its release is refused.
	e, err := a.TryAcquire(ctx, "e", lock.WithTTL(300*time.Millisecond))
	must(err)
	time.Sleep(500 * time.Millisecond)
	e2, err := b.TryAcquire(ctx, "e")
	must(err)
	if err := e.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of an expired lease: %v, want ErrNotHeld", err)
	}

	// An operator's force unlock, with a waiter in line.
	queued = make(chan struct{})
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, werr = c.Acquire(wctx, "e", lock.WithQueued(func() { close(queued) }))
	}()
	<-queued
	ok, err := a.ForceUnlock(ctx, "e")
	must(err)
	if !ok {
		t.Fatal("force unlock found nothing to free")
	}
	wg.Wait()
	must(werr)
	must(got.Release(ctx))
	if err := e2.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after a force unlock: %v, want ErrNotHeld", err)
	}
	return rec.Commands()
}
