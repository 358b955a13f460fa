package lock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestUndoTakesBackItsHoldAfterNewerOnes: a WithOwner attempt whose reply
// was lost is undone (endScript) after the same owner added another hold
// (its next acquire was sent while the undo was on its way); the undo
// takes back the lost attempt's hold, and the owner's one release of the
// hold it knows of frees the lock. The lost attempt got its hold by the
// fast path (a grant) or by picking up a hand-off in line (the
// simulation's seed 3226: the pickup's reply came after the waiter's
// deadline). Before, r named only the last attempt: the undo found the
// newer id, took nothing back, and the orphan hold outlived the release
// (the owner's next acquire then got the same fence again).
func TestUndoTakesBackItsHoldAfterNewerOnes(t *testing.T) {
	for _, handedOff := range []bool{false, true} {
		name := "granted"
		if handedOff {
			name = "picked-up"
		}
		t.Run(name, func(t *testing.T) {
			_, rdb := startRedis(t)
			c := newClient(t, rdb, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			owned := func(id string) *attempt {
				cfg := callConfig{ttl: time.Minute, owner: "w1", ownerSet: true}
				return testAttempt(c, RedisKeys("k"), c.token("w1"), "w1", cfg, id)
			}
			lost, next := owned(newToken(c.rnd)), owned(newToken(c.rnd))
			if handedOff {
				other := testAttempt(c, RedisKeys("k"), c.token("o"), "o", callConfig{ttl: time.Minute}, newToken(c.rnd))
				if res, err := other.try(ctx, "t"); err != nil || !res.ok {
					t.Fatalf("another owner's acquire: %+v, %v", res, err)
				}
				if res, err := lost.try(ctx, "w"); err != nil || res.ok {
					t.Fatalf("the waiter's first attempt: %+v, %v; want in line", res, err)
				}
				if err := other.end(ctx, false, false); err != nil {
					t.Fatal(err) // hands the lock to the waiter
				}
				if res, err := lost.try(ctx, "w"); err != nil || !res.ok || res.holds != 1 {
					t.Fatalf("the pickup: %+v, %v; want one hold", res, err)
				}
			} else if res, err := lost.try(ctx, "t"); err != nil || !res.ok || res.holds != 1 {
				t.Fatalf("the acquire whose reply is lost: %+v, %v", res, err)
			}
			if res, err := next.try(ctx, "t"); err != nil || !res.ok || res.holds != 2 {
				t.Fatalf("the owner's next acquire: %+v, %v; want a second hold", res, err)
			}
			if err := lost.end(ctx, true, false); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.HGet(ctx, RedisKeys("k").Lock, "n").Int(); err != nil || n != 1 {
				t.Fatalf("after the undo: %d holds (%v), want 1: the lost attempt's hold stayed", n, err)
			}
			if err := next.end(ctx, false, false); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.Exists(ctx, RedisKeys("k").Lock).Result(); err != nil || n != 0 {
				t.Fatalf("after the owner's release of its one known hold the lock exists (%d, %v)", n, err)
			}
		})
	}
}

// TestHoldRecordsFollowTheHolds: every hold of an owner that re-enters
// for good is a record of its own, and ending one (the oldest, the newest,
// in any order) removes exactly its record: the hash never holds more
// than the holds alive and its fixed fields, and the last end frees the
// lock (before the redesign r kept 16 ids and an undo of an older hold
// found nothing to take back).
func TestHoldRecordsFollowTheHolds(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var holds []*attempt
	for i := range 40 {
		a := testAttempt(c, RedisKeys("k"), c.token("w1"), "w1", callConfig{ttl: time.Minute, owner: "w1", ownerSet: true}, newToken(c.rnd))
		if res, err := a.try(ctx, "t"); err != nil || !res.ok || res.holds != int64(i+1) {
			t.Fatalf("hold %d: %+v, %v", i+1, res, err)
		}
		holds = append(holds, a)
	}
	fields := func() int64 {
		n, err := rdb.HLen(ctx, RedisKeys("k").Lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const fixed = 4 // o, n, f, s
	if n := fields(); n != 40+fixed {
		t.Fatalf("40 holds: %d fields, want %d", n, 40+fixed)
	}
	for _, i := range []int{0, 39, 0, 39} { // the second end of each lands twice: a no-op
		if err := holds[i].end(ctx, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.HGet(ctx, RedisKeys("k").Lock, "n").Int(); err != nil || n != 38 {
		t.Fatalf("after ending the oldest and the newest (each twice): %d holds (%v), want 38", n, err)
	}
	if n := fields(); n != 38+fixed {
		t.Fatalf("38 holds: %d fields, want %d", n, 38+fixed)
	}
	for _, a := range holds[1:39] {
		if err := a.end(ctx, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.Exists(ctx, RedisKeys("k").Lock).Result(); err != nil || n != 0 {
		t.Fatalf("after every hold ended the lock exists (%d, %v)", n, err)
	}
}

// TestLateRequestAfterItsCleanupTakesNothing: the cleanup of an attempt
// that gave up with its outcome unknown runs before the attempt's own
// request reaches Redis (a paused server ran the cleanup first, from
// another connection: the simulation's seed 9690); that request then
// takes nothing, whether it would have re-entered the owner's hold, taken
// a free lock as a fresh token, or joined the line. Before, the late
// request added a hold nobody took back (the next waiter waited a TTL).
func TestLateRequestAfterItsCleanupTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owned bool
		mode  string
		held  bool // the owner holds the lock already (the late request re-enters)
	}{
		{"owner re-entering", true, "w", true},
		{"owner on a free lock", true, "t", false},
		{"fresh token on a free lock", false, "t", false},
		{"fresh token joining the line", false, "w", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := startRedis(t)
			c := newClient(t, rdb, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			keys := RedisKeys("k")
			mk := func(owner string, owned bool) *attempt {
				return testAttempt(c, keys, c.token(owner), owner, callConfig{ttl: time.Minute, owner: owner, ownerSet: owned}, newToken(c.rnd))
			}
			holder := mk("holder", false)
			if tc.owned {
				holder = mk("w1", true)
			}
			if tc.held {
				if res, err := holder.try(ctx, "t"); err != nil || !res.ok {
					t.Fatalf("the holder's acquire: %+v, %v", res, err)
				}
			}
			late := mk(fmt.Sprint("late-", tc.name), false)
			if tc.owned {
				late = mk("w1", true)
			}
			// The cleanup, as the attempt's give-up runs it, first.
			if err := late.end(ctx, true, true); err != nil {
				t.Fatal(err)
			}
			// Then the attempt's own request.
			if res, err := late.try(ctx, tc.mode); err != nil || res.ok {
				t.Fatalf("the late request: %+v, %v; want nothing taken", res, err)
			}
			wantHolds := 0
			if tc.held {
				wantHolds = 1
			}
			if n, _ := rdb.HGet(ctx, keys.Lock, "n").Int(); n != wantHolds {
				t.Fatalf("after the late request: %d holds, want %d", n, wantHolds)
			}
			if n, err := rdb.ZCard(ctx, keys.Queue).Result(); err != nil || n != 0 {
				t.Fatalf("after the late request: %d in line (%v), want none", n, err)
			}
		})
	}
}

// TestWaitFlag: w, the hash's "somebody may be in line", is what lets a
// release skip the look at the queue; every way a waiter stays in line
// behind a holder sets it. Here the holder's key ran out (deleted by hand:
// no timing) with two waiters in line; the head takes the free lock on
// its retry, and its release must hand the lock to the waiter behind it,
// not delete it (the hand-off that wakes that waiter at once).
func TestWaitFlag(t *testing.T) {
	_, rdb := startRedis(t)
	c := newClient(t, rdb, Options{TTL: time.Minute, QueueTTL: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := RedisKeys("k")
	waiter := func(name string) *attempt {
		return testAttempt(c, keys, c.token(name), name, callConfig{ttl: time.Minute}, newToken(c.rnd))
	}
	holder, a, b := waiter("h"), waiter("a"), waiter("b")
	if res, err := holder.try(ctx, "t"); err != nil || !res.ok {
		t.Fatalf("the holder's acquire: %+v, %v", res, err)
	}
	if w, _ := rdb.HGet(ctx, keys.Lock, "w").Result(); w == "1" {
		t.Fatal("w is set on an uncontended grant: every release would look at the queue")
	}
	for _, x := range []*attempt{a, b} {
		if res, err := x.try(ctx, "w"); err != nil || res.ok {
			t.Fatalf("%s's first attempt: %+v, %v; want in line", x.given, res, err)
		}
	}
	if w, _ := rdb.HGet(ctx, keys.Lock, "w").Result(); w != "1" {
		t.Fatalf("w = %q with two in line behind the holder, want 1", w)
	}
	if err := rdb.Del(ctx, keys.Lock).Err(); err != nil { // the holder's TTL ran out
		t.Fatal(err)
	}
	if res, err := a.try(ctx, "w"); err != nil || !res.ok {
		t.Fatalf("the head's retry on the free lock: %+v, %v; want the lock", res, err)
	}
	if err := a.end(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	if o, err := rdb.HGet(ctx, keys.Lock, "o").Result(); err != nil || o != b.owner {
		t.Fatalf("after the head's release the lock is held by %q (%v); want it handed to the waiter behind (%q)", o, err, b.owner)
	}
}

// testAttempt is a call on key "k" as Acquire makes it, with this id.
func testAttempt(c *Client, keys Keys, owner, given string, cfg callConfig, id string) *attempt {
	a := newAttempt(c, "k", keys, owner, given, cfg, "acquire")
	a.setID(id)
	return a
}
