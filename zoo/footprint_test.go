package zoo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/fidelity"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedFootprint: the shipped lock's adapter measures its keys as
// package lock lays them out (the hash's fields, one per hold, the fence
// counter), within the bound its entry states, on a real redis-server;
// and miniredis, the simulation's Redis, answers its script alike.
func TestFencedFootprint(t *testing.T) {
	p := redistest.Start(t)
	rec := fidelity.NewRecorder()
	client := func() locker.Locker {
		rdb := newClient(t, p)
		rdb.AddHook(rec.Hook())
		return open(t, zoo.FencedName, locker.Deps{Redis: rdb})
	}
	a, b := client(), client()
	e, _ := zoo.Builtin().Lookup(zoo.FencedName)
	bound := e.Footprint
	if bound == nil {
		t.Fatal("fenced states no footprint bound")
	}
	fp := a.(locker.Footprinter)
	records := func(want int64, why string) {
		t.Helper()
		got, err := fp.Footprint(tctx(t), "k")
		if err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		if got.Records != want || (want > 0) != (got.Bytes > 0) {
			t.Errorf("%s: %d records, %d bytes; want %d records", why, got.Records, got.Bytes, want)
		}
	}
	records(0, "nothing yet")
	ttl := 2 * time.Second
	la := acquire(t, a, "k", ttl)
	// o, n, f and the hold's h.<id>, and the fence counter (the first
	// hold is number 0: s comes with a second).
	records(5, "one hold")
	if int64(bound.Base+bound.PerHold) < 5 {
		t.Errorf("bound %+v below one hold's 5 records", *bound)
	}
	inner, err := la.(locker.Reentrant).Reenter(tctx(t), ttl)
	if err != nil {
		t.Fatal(err)
	}
	records(7, "a nested hold: a record of its own, and s")
	refused(t, b, "k", ttl)
	records(7, "a refused attempt leaves nothing")
	if err := inner.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	records(6, "the nested hold released (s stays)")
	if err := la.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	records(1, "released: the fence counter stays (an hour)")
	// A waiter that gives up in line is buried (an hour) and leaves its place.
	lb := acquire(t, b, "k", ttl)
	// Long enough for the join's reply on a loaded machine (at 200ms a
	// late reply made the wait unknown, not refused); lb's watchdog
	// keeps it held past it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = a.(locker.Waiter).Acquire(ctx, "k", ttl)
	cancel()
	if !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("a wait canceled in line: %v, want ErrNotAcquired", err)
	}
	records(7, "a hold, its w (somebody was in line) and the buried waiter")
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatal(err)
	}
	records(2, "the fence counter and the buried waiter")

	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	diffs, err := fidelity.Replay(rctx, rec.Commands(), fidelity.Target{Name: "redis-server", RDB: newClient(t, redistest.Start(t))}, fidelity.Miniredis(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// TestFrozenCopiesHaveNoFootprint: the frozen copies lay their keys out
// otherwise: their Footprint is unsupported, and their entries state no
// bound (the property is n/a for them).
func TestFrozenCopiesHaveNoFootprint(t *testing.T) {
	p := redistest.Start(t)
	for _, name := range []string{zoo.FencedV1Name, zoo.FencedV2Name} {
		l := open(t, name, locker.Deps{Redis: newClient(t, p)})
		if _, err := l.(locker.Footprinter).Footprint(tctx(t), "k"); !errors.Is(err, locker.ErrUnsupported) {
			t.Errorf("%s: Footprint: %v, want ErrUnsupported", name, err)
		}
		if e, _ := zoo.Builtin().Lookup(name); e.Footprint != nil {
			t.Errorf("%s states a footprint bound", name)
		}
	}
}
