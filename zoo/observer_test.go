package zoo_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// renewal is one background renewal an observer saw.
type renewal struct {
	key      string
	ttl      time.Duration
	token    uint64
	hasToken bool
	done     bool
	err      error
}

// observer records background renewals; it fails the test when a done is
// called twice.
type observer struct {
	t  *testing.T
	mu sync.Mutex
	rs []*renewal
}

func (o *observer) Renewing(key string, ttl time.Duration, token uint64, hasToken bool) func(error) {
	r := &renewal{key: key, ttl: ttl, token: token, hasToken: hasToken}
	o.mu.Lock()
	o.rs = append(o.rs, r)
	o.mu.Unlock()
	return func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if r.done {
			o.t.Errorf("done called twice for a renewal of %q", key)
		}
		r.done, r.err = true, err
	}
}

// snapshot returns copies of the renewals seen so far.
func (o *observer) snapshot() []renewal {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]renewal, len(o.rs))
	for i, r := range o.rs {
		out[i] = *r
	}
	return out
}

// count returns how many renewals of key were seen, and how many of them
// completed with nil.
func (o *observer) count(key string) (seen, ok int) {
	for _, r := range o.snapshot() {
		if r.key == key {
			seen++
			if r.done && r.err == nil {
				ok++
			}
		}
	}
	return seen, ok
}

// TestObserverSeesBackgroundRenewals: every renewal a lock makes on its own
// (the watchdog specimen's, the fenced lock's with Watchdog on) is announced
// with the lease's key, ttl and fence, and completed with its result: ok
// while the lease is held past its TTL, locker.ErrNotHeld once another client took
// the lock; and none after Close.
func TestObserverSeesBackgroundRenewals(t *testing.T) {
	const ttl = 600 * time.Millisecond
	cases := []struct {
		name    string
		lockKey func(string) string
		deps    func(rdb *redis.Client, o *observer) locker.Deps
	}{
		{"watchdog", func(k string) string { return k },
			func(rdb *redis.Client, o *observer) locker.Deps { return locker.Deps{Redis: rdb, Observer: o} }},
		{"fenced", func(k string) string { return lock.RedisKeys(k).Lock },
			func(rdb *redis.Client, o *observer) locker.Deps {
				return locker.Deps{Redis: rdb, Observer: o}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := redistest.Start(t)
			rdb := newClient(t, p)
			obs := &observer{t: t}
			w := open(t, c.name, c.deps(newClient(t, p), obs))
			l := acquire(t, w, "k", ttl)
			token, hasToken := l.Fence()

			// Held past its TTL: at least 4 renewals (4 × TTL/3), all ok.
			waitFor(t, "4 ok renewals", func() bool { _, ok := obs.count("k"); return ok >= 4 })
			if n, _ := rdb.Exists(tctx(t), c.lockKey("k")).Result(); n != 1 {
				t.Fatal("lease gone although renewed")
			}
			for i, r := range obs.snapshot() {
				if r.key != "k" || r.ttl != ttl || r.token != token || r.hasToken != hasToken {
					t.Fatalf("renewal %d = %+v, want key k, ttl %v, token %d/%v", i, r, ttl, token, hasToken)
				}
				if r.done && r.err != nil {
					t.Fatalf("renewal %d of a held lease failed: %v", i, r.err)
				}
			}

			// Taken behind its back: a renewal is refused (locker.ErrNotHeld) and Lost closes.
			expireNow(t, rdb, c.lockKey("k"))
			acquire(t, open(t, c.name, locker.Deps{Redis: rdb}), "k", time.Hour)
			select {
			case <-l.Lost():
			case <-time.After(20 * time.Second):
				t.Fatal("Lost not closed after the lock was taken")
			}
			waitFor(t, "every renewal of k done", func() bool {
				for _, r := range obs.snapshot() {
					if !r.done {
						return false
					}
				}
				return true
			})
			refusedSeen := false
			for _, r := range obs.snapshot() {
				switch {
				case r.err == nil:
				case errors.Is(r.err, locker.ErrNotHeld):
					refusedSeen = true
				default:
					t.Fatalf("renewal failed with %v, want nil or locker.ErrNotHeld", r.err)
				}
			}
			// The watchdog specimen closes Lost only after a refused renewal;
			// the fenced lock may lose the lease to its validity deadline first.
			if c.name == "watchdog" && !refusedSeen {
				t.Fatal("no renewal reported locker.ErrNotHeld although Lost closed")
			}

			// Close stops the watchdogs: no renewal after it, the lease expires.
			acquire(t, w, "k2", ttl)
			waitFor(t, "a renewal of k2", func() bool { _, ok := obs.count("k2"); return ok >= 1 })
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			seen, _ := obs.count("k2")
			for _, r := range obs.snapshot() {
				if !r.done {
					t.Fatalf("renewal %+v still open after Close returned", r)
				}
			}
			waitGone(t, rdb, c.lockKey("k2"))
			if after, _ := obs.count("k2"); after != seen {
				t.Fatalf("%d renewals after Close", after-seen)
			}
		})
	}
}

// TestObserverPerClient: each Locker announces its renewals to its own
// Deps.Observer, never to another client's opened from the same entry.
// (An entry that kept the first client's hook for every later client
// recorded renewals into the wrong client's history.)
func TestObserverPerClient(t *testing.T) {
	p := redistest.Start(t)
	a, b := &observer{t: t}, &observer{t: t}
	reg := zoo.Builtin() // one registry opens every client of a run
	opened := func(o *observer) locker.Locker {
		l, err := reg.Open("fenced", locker.Deps{Redis: newClient(t, p), Observer: o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	la, lb := opened(a), opened(b)
	acquire(t, la, "ka", 300*time.Millisecond)
	acquire(t, lb, "kb", 300*time.Millisecond)
	waitFor(t, "renewals by both", func() bool {
		na, _ := a.count("ka")
		nb, _ := b.count("kb")
		return na >= 2 && nb >= 2
	})
	if n, _ := a.count("kb"); n != 0 {
		t.Errorf("client a's observer saw %d renewals of client b's key", n)
	}
	if n, _ := b.count("ka"); n != 0 {
		t.Errorf("client b's observer saw %d renewals of client a's key", n)
	}
}
