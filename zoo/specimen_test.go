package zoo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// singleInstance is every built-in lock that runs on one Redis (not
// Needs.Redlock): a new specimen is tested here as soon as it is registered.
var singleInstance = func() []string {
	reg := zoo.Builtin()
	var names []string
	for _, n := range reg.Names() {
		// A lock that needs replicas to acknowledge it (fenced-acks) has
		// its own test on a master with a replica (TestFencedAcks).
		if e, _ := reg.Lookup(n); !e.Needs.Redlock && e.Needs.Replicas == 0 {
			names = append(names, n)
		}
	}
	return names
}()

// TestNames: the names the package spells are registered, in matrix order
// (the order of summary.json and the reports): the specimens, then the
// shipped lock and its frozen copies. A new lock needs no edit here.
func TestNames(t *testing.T) {
	spelled := []string{zoo.SetNXName, zoo.SetNXExpireName, zoo.SetDelName, zoo.GetDelName, zoo.GetSetName, zoo.LuaName,
		zoo.WatchdogName, zoo.ReentrantName, zoo.RedlockName, zoo.LocalRedisName, zoo.FencedName, zoo.FencedV1Name, zoo.FencedV2Name}
	got := zoo.Builtin().Names()
	last := -1
	for _, n := range spelled {
		i := slices.Index(got, n)
		if i <= last {
			t.Fatalf("Names() = %v: %q missing or out of order (want %v as a subsequence)", got, n, spelled)
		}
		last = i
	}
}

// TestAcquireRefuseRelease: every lock acquires, refuses a second client,
// releases, and then lets the second client in.
func TestAcquireRefuseRelease(t *testing.T) {
	p := redistest.Start(t)
	for _, name := range singleInstance {
		t.Run(name, func(t *testing.T) {
			a := open(t, name, locker.Deps{Redis: newClient(t, p), Prefix: name + ":"})
			b := open(t, name, locker.Deps{Redis: newClient(t, p), Prefix: name + ":"})
			if a.Name() != name {
				t.Fatalf("Name() = %q, want %q", a.Name(), name)
			}
			la := acquire(t, a, "k", 10*time.Second)
			if la.Key() != "k" {
				t.Fatalf("Key() = %q", la.Key())
			}
			if _, ok := la.Fence(); ok != strings.HasPrefix(name, "fenced") {
				t.Fatalf("Fence ok = %v", ok)
			}
			wantTTL := 10 * time.Second
			if name == "setnx" || name == "sem-no-expiry" {
				wantTTL = 0 // the lock never expires
			}
			if la.TTL() != wantTTL {
				t.Fatalf("TTL() = %v, want %v", la.TTL(), wantTTL)
			}
			refused(t, b, "k", 10*time.Second)
			acquire(t, b, "other", 10*time.Second) // keys are independent
			if err := la.Release(tctx(t)); err != nil {
				t.Fatalf("release: %v", err)
			}
			lb := acquire(t, b, "k", 10*time.Second)
			refused(t, a, "k", 10*time.Second)
			if err := lb.Release(tctx(t)); err != nil {
				t.Fatalf("release b: %v", err)
			}
		})
	}
}

// TestPausedServerIsUnknown: a server that stops answering makes every
// lock's acquire outcome unknown (it may have been applied).
func TestPausedServerIsUnknown(t *testing.T) {
	p := redistest.Start(t)
	t.Cleanup(func() { _ = p.Resume() })
	rdb := newClient(t, p)
	var lockers []locker.Locker
	for _, name := range singleInstance {
		lockers = append(lockers, open(t, name, locker.Deps{Redis: rdb}))
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lockers {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := l.TryAcquire(ctx, "k-"+l.Name(), 10*time.Second)
		cancel()
		if !errors.Is(err, locker.ErrUnknownOutcome) || errors.Is(err, locker.ErrNotAcquired) {
			t.Errorf("%s: acquire on paused server: %v, want locker.ErrUnknownOutcome only", l.Name(), err)
		}
	}
}

func TestContextDoneSendsNothing(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, name := range singleInstance {
		l := open(t, name, locker.Deps{Redis: rdb})
		_, err := l.TryAcquire(ctx, "k", 10*time.Second)
		if err == nil || errors.Is(err, locker.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: acquire with done ctx: %v, want context.Canceled, not unknown", name, err)
		}
	}
	if n, _ := rdb.DBSize(tctx(t)).Result(); n != 0 {
		t.Fatalf("a done context still wrote %d keys", n)
	}
}

func TestBadInput(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	if _, err := zoo.Builtin().Open("nope", locker.Deps{Redis: rdb}); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("unknown name: %v", err)
	}
	for _, name := range zoo.Builtin().Names() {
		if _, err := zoo.Builtin().Open(name, locker.Deps{}); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("%s without clients: %v, want locker.ErrInvalid", name, err)
		}
	}
	if _, err := zoo.Builtin().Open("redlock", locker.Deps{Redlock: []redis.UniversalClient{rdb, rdb}}); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("redlock over 2: %v, want locker.ErrInvalid", err)
	}
	if _, err := zoo.Builtin().Open("redlock", locker.Deps{Redlock: []redis.UniversalClient{rdb, nil, rdb}}); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("redlock with nil client: %v, want locker.ErrInvalid", err)
	}
	for _, name := range singleInstance {
		l := open(t, name, locker.Deps{Redis: rdb})
		if _, err := l.TryAcquire(tctx(t), "", time.Second); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("%s: empty key: %v", name, err)
		}
		if name == "setnx" {
			continue // no TTL: ttl is ignored
		}
		if _, err := l.TryAcquire(tctx(t), "k", 0); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("%s: zero ttl: %v", name, err)
		}
	}
}

// TestSetNXNeverExpires: setnx's key has no TTL: a crashed holder keeps it.
func TestSetNXNeverExpires(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "setnx", locker.Deps{Redis: rdb})
	la := acquire(t, a, "k", 50*time.Millisecond)
	if pttl, _ := rdb.PTTL(tctx(t), "k").Result(); pttl != -time.Nanosecond {
		t.Fatalf("PTTL = %v, want -1 (no expiry)", pttl)
	}
	if err := la.Renew(tctx(t), time.Second); !errors.Is(err, locker.ErrUnsupported) {
		t.Fatalf("renew: %v, want locker.ErrUnsupported", err)
	}
	// The holder "crashes" (never releases): nobody else ever gets it.
	refused(t, open(t, "setnx", locker.Deps{Redis: rdb}), "k", time.Second)
}

// TestSetNXExpireCrashBetween: when the EXPIRE after SETNX does not happen
// (here it fails, as when the client crashes or the reply is lost), the lock
// has no TTL and outlives its holder.
func TestSetNXExpireCrashBetween(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	normal := open(t, "setnx-expire", locker.Deps{Redis: rdb})
	acquire(t, normal, "ok", 10*time.Second)
	if pttl, _ := rdb.PTTL(tctx(t), "ok").Result(); pttl <= 0 {
		t.Fatalf("normal path: PTTL = %v, want > 0", pttl)
	}

	crashing := newClient(t, p)
	crashing.AddHook(hook{name: "pexpire", drop: true, after: func(context.Context, redis.Cmder) error {
		return errors.New("client crashed before EXPIRE")
	}})
	c := open(t, "setnx-expire", locker.Deps{Redis: crashing})
	acquire(t, c, "k", 50*time.Millisecond) // faithful: the idiom ignores EXPIRE's result
	if pttl, _ := rdb.PTTL(tctx(t), "k").Result(); pttl != -time.Nanosecond {
		t.Fatalf("after a lost EXPIRE: PTTL = %v, want -1 (no expiry)", pttl)
	}
	refused(t, normal, "k", time.Second)
}

// TestSetDelDeletesAnothersLock: a holder whose lease expired (it was
// paused) and was taken over deletes the new holder's lock on release.
func TestSetDelDeletesAnothersLock(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "set-del", locker.Deps{Redis: rdb})
	b := open(t, "set-del", locker.Deps{Redis: rdb})
	c := open(t, "set-del", locker.Deps{Redis: rdb})
	la := acquire(t, a, "k", 10*time.Second)
	expireNow(t, rdb, "k") // a is paused past its TTL
	acquire(t, b, "k", 10*time.Second)
	if err := la.Release(tctx(t)); err != nil { // a wakes and releases: deletes b's lock
		t.Fatalf("stale release: %v (set-del deletes without checking)", err)
	}
	acquire(t, c, "k", 10*time.Second) // two holders: b and c
	if err := la.Renew(tctx(t), time.Second); !errors.Is(err, locker.ErrUnsupported) {
		t.Fatalf("renew: %v, want locker.ErrUnsupported", err)
	}
}

// TestGetDelRace: get-del checks the owner, but in a separate command: an
// expiry and takeover between its GET and DEL make it delete the new
// holder's lock.
func TestGetDelRace(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	b := open(t, "get-del", locker.Deps{Redis: rdb})
	c := open(t, "get-del", locker.Deps{Redis: rdb})

	// Without the race, the owner check works.
	a := open(t, "get-del", locker.Deps{Redis: rdb})
	la := acquire(t, a, "k1", 10*time.Second)
	expireNow(t, rdb, "k1")
	lb := acquire(t, b, "k1", 10*time.Second)
	if err := la.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale release: %v, want locker.ErrNotHeld", err)
	}
	refused(t, c, "k1", time.Second)
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}

	// The race: a is paused right after its GET.
	slow := newClient(t, p)
	var armed atomic.Bool
	slow.AddHook(hook{name: "get", after: func(context.Context, redis.Cmder) error {
		if armed.CompareAndSwap(true, false) {
			expireNow(t, rdb, "k2")
			acquire(t, b, "k2", 10*time.Second)
		}
		return nil
	}})
	a2 := open(t, "get-del", locker.Deps{Redis: slow})
	la2 := acquire(t, a2, "k2", 10*time.Second)
	armed.Store(true)
	if err := la2.Release(tctx(t)); err != nil {
		t.Fatalf("racing release: %v, want nil (it deletes b's lock)", err)
	}
	acquire(t, c, "k2", 10*time.Second) // b and c both hold k2
}

// TestGetSetClockSkew: a client whose clock runs ahead takes over an
// unexpired lock; the first holder, its clock behind, then deletes it.
func TestGetSetClockSkew(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "getset", locker.Deps{Redis: rdb})
	b := open(t, "getset", locker.Deps{Redis: rdb})
	ahead := open(t, "getset", locker.Deps{Redis: rdb, Clock: func() time.Time { return time.Now().Add(time.Hour) }})

	la := acquire(t, a, "k", time.Minute)
	if pttl, _ := rdb.PTTL(tctx(t), "k").Result(); pttl != -time.Nanosecond {
		t.Fatalf("PTTL = %v, want -1: expiry lives in the value", pttl)
	}
	refused(t, b, "k", time.Minute)           // same clock: not expired
	lc := acquire(t, ahead, "k", time.Minute) // skewed: sees it expired, GETSET wins: two holders
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("first holder's release: %v (its clock says it still holds)", err)
	}
	acquire(t, b, "k", time.Minute) // ahead's lock was deleted by a: b and ahead hold it
	if err := lc.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// TestGetSetTakesOverExpired: the recipe's point: an expired lock (its
// holder crashed) is taken over, and exactly one of two contenders wins.
func TestGetSetTakesOverExpired(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	dead := open(t, "getset", locker.Deps{Redis: rdb, Clock: func() time.Time { return time.Now().Add(-time.Hour) }})
	acquire(t, dead, "k", time.Minute) // expired an hour ago by everyone else's clock
	a := open(t, "getset", locker.Deps{Redis: rdb})
	b := open(t, "getset", locker.Deps{Redis: rdb})
	acquire(t, a, "k", time.Minute)
	refused(t, b, "k", time.Minute)
}

// TestLuaOwnerChecked: lua's release and renew check the owner token.
func TestLuaOwnerChecked(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "lua", locker.Deps{Redis: rdb})
	b := open(t, "lua", locker.Deps{Redis: rdb})
	la := acquire(t, a, "k", 10*time.Second)
	expireNow(t, rdb, "k")
	lb := acquire(t, b, "k", 10*time.Second)
	if err := la.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale release: %v, want locker.ErrNotHeld", err)
	}
	if err := la.Renew(tctx(t), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale renew: %v, want locker.ErrNotHeld", err)
	}
	if err := lb.Renew(tctx(t), time.Hour); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if pttl, _ := rdb.PTTL(tctx(t), "k").Result(); pttl < 30*time.Minute {
		t.Fatalf("PTTL after renew = %v, want about 1h", pttl)
	}
	if lb.Lost() != nil {
		t.Fatal("lua has no watchdog: Lost() must be nil")
	}
}

// countCalls counts the commands named name that complete on rdb.
func countCalls(rdb *redis.Client, name string) *atomic.Int64 {
	var n atomic.Int64
	rdb.AddHook(hook{name: name, after: func(context.Context, redis.Cmder) error { n.Add(1); return nil }})
	return &n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchdog: the watchdog renews the lease past its TTL, signals Lost
// when a renewal is refused, and stops on Close (a crash): the lock expires.
func TestWatchdog(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	wrdb := newClient(t, p)
	renewals := countCalls(wrdb, "evalsha")
	w := open(t, "watchdog", locker.Deps{Redis: wrdb})
	const ttl = 900 * time.Millisecond
	l := acquire(t, w, "k", ttl)
	waitFor(t, "4 renewals", func() bool { return renewals.Load() >= 4 }) // > 1 TTL later
	if v, _ := rdb.Get(tctx(t), "k").Result(); v == "" {
		t.Fatal("lease gone although the watchdog renews it")
	}
	select {
	case <-l.Lost():
		t.Fatal("lost while renewed")
	default:
	}
	// Another client takes the lock behind its back: the next renewal is refused.
	expireNow(t, rdb, "k")
	acquire(t, open(t, "lua", locker.Deps{Redis: rdb}), "k", time.Hour)
	select {
	case <-l.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("Lost not closed after a refused renewal")
	}

	// Close stops renewals: the lease expires as if the client had crashed.
	l2 := acquire(t, w, "k2", ttl)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, rdb, "k2")
	select {
	case <-l2.Lost():
		t.Fatal("Close is not a loss")
	default:
	}
}

func TestWatchdogReleaseStopsRenewal(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	w := open(t, "watchdog", locker.Deps{Redis: rdb})
	l := acquire(t, w, "k", 300*time.Millisecond)
	if err := l.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	// A renewal after release would fail and close Lost; it must not come.
	// Re-acquire by someone else so a stray renewal could not succeed silently either.
	acquire(t, open(t, "lua", locker.Deps{Redis: rdb}), "k", time.Hour)
	if err := l.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second release: %v, want locker.ErrNotHeld", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("watchdog kept running after Release")
	default:
	}
}

func TestReentrant(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "reentrant", locker.Deps{Redis: rdb})
	b := open(t, "reentrant", locker.Deps{Redis: rdb})
	l1 := acquire(t, a, "k", 10*time.Second)
	l2 := acquire(t, a, "k", 10*time.Second) // same owner: reentrant
	refused(t, b, "k", 10*time.Second)
	if err := l2.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	refused(t, b, "k", 10*time.Second) // one hold left
	if err := l1.Renew(tctx(t), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("release past the last hold: %v, want locker.ErrNotHeld", err)
	}
	lb := acquire(t, b, "k", 10*time.Second)
	if err := l1.Renew(tctx(t), time.Hour); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("renew by non-owner: %v, want locker.ErrNotHeld", err)
	}
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestFencedIncreasingFences(t *testing.T) {
	p := redistest.Start(t)
	rdb := newClient(t, p)
	a := open(t, "fenced", locker.Deps{Redis: rdb})
	b := open(t, "fenced", locker.Deps{Redis: rdb})
	var last uint64
	for i := range 6 {
		l := acquire(t, []locker.Locker{a, b}[i%2], "k", 10*time.Second)
		f, ok := l.Fence()
		if !ok || f <= last {
			t.Fatalf("acquire %d: fence %d ok=%v, want > %d", i, f, ok, last)
		}
		last = f
		// Another ttl is package lock's RenewFor: the lease's TTL from then on.
		if err := l.Renew(tctx(t), time.Second); err != nil || l.TTL() != time.Second {
			t.Fatalf("renew with another ttl: %v, TTL %v; want nil, 1s", err, l.TTL())
		}
		if err := l.Renew(tctx(t), 10*time.Second); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if err := l.Release(tctx(t)); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := l.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) || !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("second release: %v, want locker.ErrNotHeld (both packages)", err)
		}
	}
	// A lease taken over after expiry is refused on release.
	la := acquire(t, a, "k2", 10*time.Second)
	expireNow(t, rdb, lock.RedisKeys("k2").Lock)
	lb := acquire(t, b, "k2", 10*time.Second)
	fa, _ := la.Fence()
	fb, _ := lb.Fence()
	if fb <= fa {
		t.Fatalf("takeover fence %d not above %d", fb, fa)
	}
	if err := la.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale release: %v, want locker.ErrNotHeld", err)
	}
}

func ExampleBuiltin() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	l, err := zoo.Builtin().Open("lua", locker.Deps{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if lease, err := l.TryAcquire(ctx, "orders", 10*time.Second); err == nil {
		defer lease.Release(ctx)
		// ... work; with a fenced lock, pass lease.Fence() to the resource.
	}
}
