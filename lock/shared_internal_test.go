package lock

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// sharedAttempt is a call of a shared kind in mode, k permits of n.
func sharedAttempt(c *Client, keys Keys, owner string, ownerSet bool, mode string, k, n int, id string) *attempt {
	cfg := callConfig{ttl: time.Minute, owner: owner, ownerSet: ownerSet}
	a := testAttempt(c, keys, c.token(owner), owner, cfg, id)
	a.proto, a.mode, a.permits, a.capacity = &sharedProto, mode, k, n
	return a
}

// TestSharedRequestsLandingTwiceOrLate: every request of the shared kinds
// that lands twice, or after its call's cleanup, is a no-op: an acquire
// delivered twice makes one hold (the same fence); a release delivered
// twice ends one hold, not the same owner's other one; an acquire whose
// call was cleaned up (its id buried) takes nothing when it lands; a
// renewal of an ended hold extends nothing.
func TestSharedRequestsLandingTwiceOrLate(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := keysOf("k", ":sem")
	a := sharedAttempt(c, keys, "o", true, modePermits, 1, 2, newToken(c.rnd))
	first, err := a.try(ctx, "t")
	if err != nil || !first.ok {
		t.Fatalf("acquire: %+v, %v", first, err)
	}
	again, err := a.try(ctx, "t")
	if err != nil || !again.ok || again.fence != first.fence || again.holds != 1 {
		t.Fatalf("the same acquire delivered again: %+v, %v; want the same hold (fence %d, 1 hold)", again, err, first.fence)
	}
	b := sharedAttempt(c, keys, "o", true, modePermits, 1, 2, newToken(c.rnd))
	if res, err := b.try(ctx, "t"); err != nil || !res.ok || res.holds != 2 {
		t.Fatalf("the owner's second permit: %+v, %v", res, err)
	}
	info, err := c.inspectShared(ctx, "k", keys)
	if err != nil || info.Permits() != 2 {
		t.Fatalf("permits out: %+v, %v; want 2", info, err)
	}
	for i := 0; i < 2; i++ {
		if err := a.end(ctx, false, false); err != nil {
			t.Fatal(err)
		}
	}
	info, err = c.inspectShared(ctx, "k", keys)
	if err != nil || info.Permits() != 1 {
		t.Fatalf("after a release delivered twice: %+v, %v; want the other permit out", info, err)
	}
	// A call whose reply was lost is cleaned up (buried, its hold ended);
	// its acquire lands after that.
	late := sharedAttempt(c, keys, "p", false, modePermits, 1, 2, newToken(c.rnd))
	if err := late.end(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	if res, err := late.try(ctx, "t"); err != nil || res.ok {
		t.Fatalf("an acquire landing after its call's cleanup: %+v, %v; want nothing taken", res, err)
	}
	if n, err := c.sharedHolds(ctx, "k", keys, "p"); err != nil || n != 0 {
		t.Fatalf("the buried call's holds: %d, %v", n, err)
	}
	// A late renewal of the ended hold a.
	reply, err := c.run(ctx, sharedRenewScript, []string{keys.Lock, keys.Gone}, a.owner, int64(60000),
		formatFence(first.fence), a.id+".1", a.id)
	if err != nil || reply != int64(0) {
		t.Fatalf("a renewal of a released hold: %v, %v; want 0", reply, err)
	}
}

// TestSharedLeaveWakesAndKeepsOrder: a waiter's leave (its place named)
// removes its place and nothing else; landing twice it is a no-op.
func TestSharedLeaveWakesAndKeepsOrder(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := keysOf("k", ":rw")
	r := sharedAttempt(c, keys, "r", false, "r", 1, 0, newToken(c.rnd))
	if res, err := r.try(ctx, "t"); err != nil || !res.ok {
		t.Fatalf("read: %+v, %v", res, err)
	}
	w := sharedAttempt(c, keys, "w", false, "w", 1, 0, newToken(c.rnd))
	if res, err := w.try(ctx, "w"); err != nil || res.ok {
		t.Fatalf("write beside a reader: %+v, %v; want in line", res, err)
	}
	r2 := sharedAttempt(c, keys, "r2", false, "r", 1, 0, newToken(c.rnd))
	if res, err := r2.try(ctx, "w"); err != nil || res.ok {
		t.Fatalf("a reader behind a waiting writer: %+v, %v; want in line", res, err)
	}
	for i := 0; i < 2; i++ {
		if err := w.end(ctx, true, true); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.ZCard(ctx, keys.Queue).Result(); err != nil || n != 1 {
		t.Fatalf("line after the writer left (twice): %d, %v; want the reader", n, err)
	}
	if res, err := r2.try(ctx, "w"); err != nil || !res.ok {
		t.Fatalf("the reader once the writer ahead left: %+v, %v", res, err)
	}
	if res, err := w.try(ctx, "w"); err != nil || res.ok {
		t.Fatalf("the writer's acquire landing after its leave: %+v, %v; want nothing", res, err)
	}
	if n, err := rdb.ZCard(ctx, keys.Queue).Result(); err != nil || n != 0 {
		t.Fatalf("line: %d, %v; want empty (a buried call does not rejoin)", n, err)
	}
}

func formatFence(f uint64) string { return strconv.FormatUint(f, 10) }

// TestKindsNeverShareKeys: no name of a mutex is a name of a read-write
// lock's or a semaphore's, whatever the keys (braces, the kinds' own
// suffixes, empty), and the two shared kinds never meet either.
func TestKindsNeverShareKeys(t *testing.T) {
	names := []string{"", "x", "rw:x", "sem:x", "x:rw", "x}:rw", "{x}:rw", "{x}", "x}", "{x", "a{b", "a{b:rw", "{}", ":rw", ":sem"}
	owner := map[string]string{}
	for _, n := range names {
		for _, kind := range []string{"", ":rw", ":sem"} {
			k := keysOf(n, kind)
			for _, name := range []string{k.Lock, k.Fence, k.Queue, k.QueueDeadlines, k.Channel, k.Gone} {
				who := kind + " " + strconv.Quote(n)
				if prev, ok := owner[name]; ok && prev != who {
					t.Errorf("Redis name %q belongs to %s and to %s", name, prev, who)
				}
				owner[name] = who
			}
		}
	}
}
