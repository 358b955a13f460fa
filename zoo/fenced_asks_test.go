package zoo_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedTTLLeft: the fenced adapter's leases ask the server how long
// they are valid (locker.ServerClaimer, package lock's TTLLeft): a
// positive time while held, ErrNotHeld once released, a released nested
// lease included while its outer one stands (review defect 7); fenced-v1
// has no TTLLeft and says so.
func TestFencedTTLLeft(t *testing.T) {
	p := redistest.Start(t)
	l := open(t, zoo.FencedName, locker.Deps{Redis: newClient(t, p)})
	ttl := 2 * time.Second
	left := func(x locker.Lease, why string) (time.Duration, error) {
		t.Helper()
		sc, ok := x.(locker.ServerClaimer)
		if !ok {
			t.Fatalf("%s: the fenced lease is no locker.ServerClaimer", why)
		}
		return sc.TTLLeft(tctx(t))
	}
	held := func(x locker.Lease, why string) {
		t.Helper()
		if d, err := left(x, why); err != nil || d <= 0 || d > ttl {
			t.Fatalf("%s: TTLLeft = %v, %v; want in (0, %v]", why, d, err, ttl)
		}
	}
	notHeld := func(x locker.Lease, why string) {
		t.Helper()
		if d, err := left(x, why); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("%s: TTLLeft = %v, %v; want locker.ErrNotHeld", why, d, err)
		}
	}
	outer := acquire(t, l, "k", ttl)
	held(outer, "the outer lease")
	inner, err := outer.(locker.Reentrant).Reenter(tctx(t), ttl/2)
	if err != nil {
		t.Fatal(err)
	}
	held(inner, "the nested lease")
	if err := inner.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	notHeld(inner, "the released nested lease")
	held(outer, "the outer lease after the nested release")
	if err := outer.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	notHeld(outer, "the released outer lease")

	v1 := open(t, zoo.FencedV1Name, locker.Deps{Redis: newClient(t, p)})
	x := acquire(t, v1, "k1", ttl)
	if _, err := left(x, "fenced-v1"); !errors.Is(err, locker.ErrUnsupported) {
		t.Errorf("fenced-v1's TTLLeft: %v; want locker.ErrUnsupported", err)
	}
}

// TestFencedUnwatched: an acquire without the watchdog
// (locker.Unwatched) is renewed by nobody and lapses with its TTL, where
// a watched one is renewed; a wait in line without it says when it is in
// line, and a wait in line when its Locker is closed is refused when
// served after (review defect 8: the old lock kept such a grant).
func TestFencedUnwatched(t *testing.T) {
	p := redistest.Start(t)
	o := &observer{t: t}
	a := open(t, zoo.FencedName, locker.Deps{Redis: newClient(t, p), Observer: o})
	b := open(t, zoo.FencedName, locker.Deps{Redis: newClient(t, p)})
	u, ok := a.(locker.Unwatched)
	if !ok {
		t.Fatal("fenced is no locker.Unwatched")
	}
	ttl := 300 * time.Millisecond
	if _, err := u.AcquireUnwatched(tctx(t), "k", ttl, false, nil); err != nil {
		t.Fatal(err)
	}
	watched := acquire(t, a, "w", ttl)
	time.Sleep(3 * ttl)
	bl := acquire(t, b, "k", ttl) // the unwatched lease lapsed
	refused(t, b, "w", ttl)       // renewed by its watchdog
	for _, r := range o.snapshot() {
		if r.key == "k" {
			t.Errorf("the unwatched lease was renewed in the background: %+v", r)
		}
	}
	if err := watched.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}

	// b holds "k"; a waits in line for it, without the watchdog, and is
	// closed meanwhile: the grant that follows b's release is refused.
	in := make(chan struct{})
	type result struct {
		l   locker.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := u.AcquireUnwatched(tctx(t), "k", 10*time.Second, true, func() { close(in) })
		done <- result{l, err}
	}()
	select {
	case <-in:
	case r := <-done:
		t.Fatalf("the wait returned before it was in line: %v, %v", r.l, r.err)
	}
	if err := a.(locker.ContextCloser).CloseContext(tctx(t)); err != nil {
		t.Fatal(err)
	}
	// b's release hands the lock to the waiter, after the Close.
	if err := bl.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err == nil || !errors.Is(r.err, locker.ErrNotAcquired) {
		t.Fatalf("a wait served after Close: lease %v, %v; want locker.ErrNotAcquired", r.l, r.err)
	}
	if in, err := b.(locker.Inspector).Inspect(tctx(t), "k"); err != nil || in.Held {
		t.Fatalf("after the refused grant: %+v, %v; want the key free", in, err)
	}
}
