package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lock"
)

// The fifth review (a hostile one) of the lock redesigned around hold
// identity (lock/scripts.go). Each test runs on a real redis-server.
//
// TestAttack_* failed on the lock at ecac65c: each was a defect, with its
// scenario and the behaviour expected. TestAttackHolds_* are attacks
// that the new design withstood: they stay as regression tests.

// tap is a go-redis hook on a lock client: it records the arguments of
// every script it sends (EVALSHA or EVAL), so that a test can send the
// very same request again (a duplicate delivery); it refuses (a Redis
// error reply: surely no effect) the scripts refuseIf matches; and it
// stalls the reply of the first script stallIf matches: the script runs
// in Redis, and its caller sees the reply only once the test closes goOn.
type tap struct {
	mu       sync.Mutex
	sent     [][]any
	refuseIf func(args []any) bool
	stallIf  func(args []any) bool
	stalled  chan struct{} // closed when a reply is stalled (the script ran)
	goOn     chan struct{}
}

func (p *tap) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *tap) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (p *tap) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n != "evalsha" && n != "eval" {
			return next(ctx, cmd)
		}
		args := cmd.Args()
		p.mu.Lock()
		p.sent = append(p.sent, args)
		refuse := p.refuseIf != nil && p.refuseIf(args)
		var goOn chan struct{}
		if p.stallIf != nil && p.stallIf(args) {
			p.stallIf = nil
			goOn = p.goOn
		}
		p.mu.Unlock()
		if refuse {
			err := redis.Error(errInjected)
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if goOn != nil {
			close(p.stalled)
			<-goOn
		}
		return err
	}
}

// last returns the last script sent whose arguments match (nil: none).
func (p *tap) last(match func(args []any) bool) []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.sent) - 1; i >= 0; i-- {
		if match(p.sent[i]) {
			return p.sent[i]
		}
	}
	return nil
}

// stallNext arms the stall of the next script match matches.
func (p *tap) stallNext(match func(args []any) bool) (stalled, goOn chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallIf, p.stalled, p.goOn = match, make(chan struct{}), make(chan struct{})
	return p.stalled, p.goOn
}

// The scripts by their arguments: EVALSHA|EVAL, the script, the number of
// keys, the keys, then ARGV.
func isAcquire(args []any) bool { return len(args) == 3+5+9 }
func isEnd(args []any) bool     { return len(args) == 3+5+7 }
func isRenew(args []any) bool   { return len(args) == 3+2+5 }

// tappedLocks is a lock client on a fresh redis-server through a tap,
// and a probe of that server (without the tap).
func tappedLocks(t *testing.T, opts lock.Options) (*lock.Client, *tap, *redis.Client) {
	t.Helper()
	p := redistest.Start(t)
	rdb := newRDB(t, p)
	tp := &tap{}
	rdb.AddHook(tp)
	c := newLocks(t, rdb, opts)
	warmScripts(t, c)
	warmRenew(t, c)
	return c, tp, newRDB(t, p)
}

// warmRenew loads the renewal script (warmScripts does not), so that a
// held or stalled EVALSHA of a renewal runs as the script it names.
func warmRenew(t *testing.T, c *lock.Client) {
	t.Helper()
	l := mustAcquire(t, c, "warm-renew")
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// replay sends a request again through probe, as a network that delivers
// it twice would.
func replay(t *testing.T, probe *redis.Client, args []any) {
	t.Helper()
	if args == nil {
		t.Fatal("no such request was sent")
	}
	if err := probe.Do(ctxT(t), args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("the replayed request: %v", err)
	}
}

// mustBeFree fails when another client cannot take key (nobody believes
// to hold it).
func mustBeFree(t *testing.T, other *lock.Client, key, why string) {
	t.Helper()
	l, err := other.TryAcquire(ctxT(t), key)
	if err != nil {
		in, _ := other.Inspect(ctxT(t), key)
		t.Fatalf("%s: another client cannot take %q: %v (Inspect: %+v)", why, key, err, in)
	}
	_ = l.Release(ctxT(t))
}

// ---------------------------------------------------------------------
// Defects (fail at ecac65c).
// ---------------------------------------------------------------------

// TestAttack_LateForceUnlockFreesALaterHolder: MUTUAL EXCLUSION.
//
// An operator's ForceUnlock is held in transit (its reply times out:
// ErrUnknownOutcome). The operator, as told, tries again: the retry frees
// the stuck holder's lock. A new holder acquires (a valid lease, TTL 10s,
// no watchdog needed). Then the first ForceUnlock lands: it frees the new
// holder's lock (forceUnlockScript names no holder, and nothing buries
// it), and a third client acquires while the new holder's lease claims
// seconds of validity and was neither released nor lost.
//
// Expected: a late or repeated ForceUnlock frees nothing but the hold it
// was sent for (it names the holder or fence it saw, or is buried), as
// every other script of the design ("every script a no-op when its
// request lands twice or late"). Observed: the third client acquires.
func TestAttack_LateForceUnlockFreesALaterHolder(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	t.Cleanup(func() { s.holdWhile(nil) })
	holders := newLocks(t, probe, opts)
	third := newLocks(t, probe, opts)
	if _, err := c.ForceUnlock(ctxT(t), "warm"); err != nil { // loads the script
		t.Fatal(err)
	}
	stuck := mustAcquire(t, holders, "k")
	s.next(pass, holdBack) // the read of the fence, then the free
	if _, err := c.ForceUnlock(ctxT(t), "k"); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the held ForceUnlock: %v, want ErrUnknownOutcome", err)
	}
	if held, err := c.ForceUnlock(ctxT(t), "k"); err != nil || !held {
		t.Fatalf("the operator's retry: %v %v, want true <nil>", held, err)
	}
	_ = stuck
	next := mustAcquire(t, holders, "k")
	s.land(t, probe) // the first ForceUnlock, late
	if time.Until(next.ValidUntil()) < 5*time.Second {
		t.Fatalf("the new lease should claim ~10s, claims %v", time.Until(next.ValidUntil()))
	}
	mustStayHeld(t, third, "k", next)
}

// TestAttack_RefusedLeaveStaysInLine: LEAK (bounded by QueueTTL), and the
// code contradicts its comment.
//
// A waiter gives up (its ctx ends) and its leave (end with bury and
// place) is refused by Redis (an error reply: BUSY, LOADING, a failover's
// READONLY...): it surely did not happen. gaveUp returns ErrNotAcquired
// and does nothing more: no background retry, though its doc says "when
// the leave did not surely happen in time, it goes on in the background".
// The place stays in line for QueueTTL (30s here), and every release in
// that time hands the lock to a call that is gone, which holds the others
// up for a hand-off lease each, and is not buried.
//
// Expected: the leave is made sure in the background as after a lost
// reply; the place is gone soon after Redis answers again. Observed: it
// stays until QueueTTL.
func TestAttack_RefusedLeaveStaysInLine(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second, QueueTTL: 30 * time.Second}
	c, tp, probe := tappedLocks(t, opts)
	holder := newLocks(t, probe, opts)
	h := mustAcquire(t, holder, "k")
	refusing := true
	tp.mu.Lock()
	tp.refuseIf = func(args []any) bool {
		// the leave: bury "1" and a place
		return refusing && isEnd(args) && fmt.Sprint(args[3+5+3]) == "1" && fmt.Sprint(args[3+5+4]) != ""
	}
	tp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "k")
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the waiter that gave up: %v, want ErrNotAcquired", err)
	}
	tp.mu.Lock()
	refusing = false // Redis answers again
	tp.mu.Unlock()
	deadline := time.Now().Add(3 * time.Second)
	for queueLen(t, probe, "k") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the place of a waiter that gave up is still in line 3s later (QueueTTL %v)", opts.QueueTTL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = h.Release(ctxT(t))
}

// TestAttack_ReleaseOfALostLeaseSaysReleased: DOC. Release's doc said
// ErrNotHeld for a lease "already lost"; a lease lost by its validity
// deadline whose key Redis still kept (the drift allowance) was released
// with nil. The release did end the hold, so nil is the truth (ErrNotHeld
// says "surely no effect": a history that read it so kept the hold alive
// in its model, and the simulation then saw a next holder as a second
// one). The doc now says so; this test holds the lock to it: nil, and the
// key free at once.
func TestAttack_ReleaseOfALostLeaseSaysReleased(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 2 * time.Second, Drift: 0.5})
	other := newLocks(t, newRDB(t, p), lock.Options{TTL: 2 * time.Second})
	l := mustAcquire(t, c, "k")
	select {
	case <-l.Lost():
	case <-time.After(bound):
		t.Fatal("the lease was never lost")
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Renew of the lost lease: %v, want ErrNotHeld", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release of a lease lost %v ago whose hold Redis kept: %v, want nil", -time.Until(l.ValidUntil()), err)
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("a second Release: %v, want ErrNotHeld", err)
	}
	mustBeFree(t, other, "k", "the lost lease's hold was released")
}

// TestAttack_RenewRacingReleaseClaimsTheKeyHeld: FALSE CLAIM (doc).
//
// A Renew runs in Redis (it extends the hold), and its reply is slow; a
// Release of the same lease runs meanwhile and frees the lock (nil).
// The Renew then returns ErrUnknownOutcome, "Redis renewed the lock, but
// the lease had ended meanwhile", and its doc says "the key is then held
// a TTL more by this owner, and Release frees it". Nothing is unknown:
// a renewal that answers 1 ran before the release (after it, it finds no
// record and answers 0), so the release freed the key; the key is free
// and another client takes it.
//
// Expected: Renew says the lease ended (ErrNotHeld, or at least not a
// claim that the key is held). Observed: ErrUnknownOutcome with that
// claim, while another client holds the key.
func TestAttack_RenewRacingReleaseClaimsTheKeyHeld(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, tp, probe := tappedLocks(t, opts)
	other := newLocks(t, probe, opts)
	l := mustAcquire(t, c, "k")
	stalled, goOn := tp.stallNext(isRenew)
	renewed := make(chan error, 1)
	go func() { renewed <- l.Renew(ctxT(t)) }()
	<-stalled
	if err := l.Release(ctxT(t)); err != nil {
		close(goOn)
		t.Fatalf("the release: %v", err)
	}
	o := mustAcquire(t, other, "k") // the key is surely free
	close(goOn)
	err := <-renewed
	_ = o.Release(ctxT(t))
	if errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("Renew says %q, while the key was freed by the release and another client held it", err)
	}
}

// TestAttackHolds_ReplayedReleaseEndsNothingElse: a release delivered
// again later (after the lease's owner took the lock again, WithOwner,
// and a nested hold) ends nothing: it names its own hold.
func TestAttackHolds_ReplayedReleaseEndsNothingElse(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, tp, probe := tappedLocks(t, opts)
	other := newLocks(t, probe, opts)
	outer, inner := nested(t, c, "k", true)
	if err := inner.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	innerEnd := tp.last(isEnd)
	if err := outer.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	outerEnd := tp.last(isEnd)
	again := mustAcquire(t, c, "k", lock.WithOwner("o"))
	in2, err := again.Reenter(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	replay(t, probe, innerEnd)
	replay(t, probe, outerEnd)
	replay(t, probe, outerEnd)
	if err := in2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	replay(t, probe, innerEnd)
	mustStayHeld(t, other, "k", again)
	if n, _ := c.HoldsOf(ctxT(t), "k", "o"); n != 1 {
		t.Fatalf("HoldsOf: %d, want 1", n)
	}
	if err := again.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mustBeFree(t, other, "k", "all released")
}

// TestAttackHolds_LateRetryAttemptAfterItsCleanup: Acquire WithRetry
// whose first attempt is held in transit; its cleanup buries it and the
// next attempt (a new id) gets the lease. The first attempt landing then
// takes nothing, and the lease is the only hold.
func TestAttackHolds_LateRetryAttemptAfterItsCleanup(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	other := newLocks(t, probe, opts)
	s.next(holdBack)
	strategy := lock.RetryIf(lock.LinearBackoff(5*time.Millisecond), func(err error) bool { return true })
	l, err := c.Acquire(ctxT(t), "k", lock.WithRetry(strategy))
	if err != nil {
		t.Fatal(err)
	}
	s.land(t, probe)
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mustBeFree(t, other, "k", "the late first attempt landed after its cleanup")
}

// TestAttackHolds_LateRenewAfterRelease: a renewal held in transit (its
// reply lost), then the lease released; the renewal landing later
// extends nothing.
func TestAttackHolds_LateRenewAfterRelease(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	warmRenew(t, c)
	other := newLocks(t, probe, opts)
	l := mustAcquire(t, c, "k", lock.WithOwner("o"))
	s.next(holdBack)
	if err := l.Renew(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("held renew: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	next := mustAcquire(t, c, "k", lock.WithOwner("o"))
	s.land(t, probe)
	if err := next.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mustBeFree(t, other, "k", "a late renewal of a released lease landed")
}

// TestAttackHolds_ConcurrentCallsOnANestedLease: Release, Release, Renew,
// Reenter and TTLLeft at once on a nested lease, many rounds: the outer
// hold always stands, a nested hold made by the racing Reenter is a hold
// of its own, and after every release the lock is free.
func TestAttackHolds_ConcurrentCallsOnANestedLease(t *testing.T) {
	for _, reenter := range []bool{true, false} {
		t.Run(map[bool]string{true: "Reenter", false: "WithOwner"}[reenter], func(t *testing.T) {
			p := redistest.Start(t)
			c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
			other := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
			for round := range 20 {
				outer, inner := nested(t, c, "k", reenter)
				var wg sync.WaitGroup
				var mu sync.Mutex
				var extra []*lock.Lease
				start := make(chan struct{})
				for i := range 5 {
					wg.Go(func() {
						<-start
						switch i {
						case 0, 1:
							if err := inner.Release(ctxT(t)); err != nil && !errors.Is(err, lock.ErrNotHeld) {
								t.Errorf("round %d: release: %v", round, err)
							}
						case 2:
							_ = inner.Renew(ctxT(t))
						case 3:
							if l, err := inner.Reenter(ctxT(t)); err == nil {
								mu.Lock()
								extra = append(extra, l)
								mu.Unlock()
							}
						case 4:
							_, _ = inner.TTLLeft(ctxT(t))
						}
					})
				}
				close(start)
				wg.Wait()
				mustStayHeld(t, other, "k", outer)
				for _, l := range extra {
					if err := l.Release(ctxT(t)); err != nil {
						t.Fatalf("round %d: a racing reentry's release: %v", round, err)
					}
				}
				if _, err := inner.TTLLeft(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
					t.Fatalf("round %d: TTLLeft after Release: %v", round, err)
				}
				if err := inner.Renew(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
					t.Fatalf("round %d: Renew after Release: %v", round, err)
				}
				if err := outer.Release(ctxT(t)); err != nil {
					t.Fatalf("round %d: outer release: %v", round, err)
				}
				mustBeFree(t, other, "k", fmt.Sprintf("round %d: every hold released", round))
			}
		})
	}
}

// TestAttackHolds_LatePickupAfterGivingUp: the lock is handed to a
// waiter whose pickup is held in transit; the waiter's call ends
// (ErrUnknownOutcome), its cleanup passes the lock to the next waiter,
// and the pickup landing later takes nothing from it.
func TestAttackHolds_LatePickupAfterGivingUp(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second, QueueTTL: 30 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	t.Cleanup(func() { s.holdWhile(nil) })
	holder := newLocks(t, probe, opts)
	second := newLocks(t, probe, opts)
	third := newLocks(t, probe, opts)
	h := mustAcquire(t, holder, "k")
	first := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctxT(t), "k")
		first <- err
	}()
	eventually(t, "the first waiter", func() bool { return queueLen(t, probe, "k") == 1 })
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := second.Acquire(ctxT(t), "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "the second waiter", func() bool { return queueLen(t, probe, "k") == 2 })
	time.Sleep(200 * time.Millisecond) // both past their subscription's retry
	s.holdWhile(isAcquire)
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-first; !errors.Is(err, lock.ErrUnknownOutcome) {
		t.Fatalf("the first waiter, its pickup held: %v", err)
	}
	s.holdWhile(nil)
	l := <-got
	if l == nil {
		return
	}
	s.land(t, probe)
	mustStayHeld(t, third, "k", l)
	_ = l.Release(ctxT(t))
}

// TestAttackHolds_InspectMetadataOfNestedHolds: Inspect shows the newest
// hold's metadata, the outer's again once the nested hold is released,
// none while a hand-off is not picked up; HoldsOf counts the owner's
// holds.
func TestAttackHolds_InspectMetadataOfNestedHolds(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	outer := mustAcquire(t, c, "k", lock.WithOwner("o"), lock.WithMetadata("outer|x"))
	inner, err := outer.Reenter(ctxT(t), lock.WithMetadata("inner"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.TryAcquire(ctxT(t), "k", lock.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := c.Inspect(ctxT(t), "k")
	if in.Metadata != "inner" || in.Holds != 3 {
		t.Fatalf("Inspect: %+v, want metadata inner, 3 holds", in)
	}
	if n, _ := c.HoldsOf(ctxT(t), "k", "o"); n != 3 {
		t.Fatalf("HoldsOf: %d", n)
	}
	_ = inner.Release(ctxT(t))
	in, _ = c.Inspect(ctxT(t), "k")
	if in.Metadata != "outer|x" || in.Holds != 2 {
		t.Fatalf("Inspect after the nested release: %+v, want outer|x, 2 holds", in)
	}
	_ = plain.Release(ctxT(t))
	_ = outer.Release(ctxT(t))
	if in, _ = c.Inspect(ctxT(t), "k"); in.Held || in.Metadata != "" {
		t.Fatalf("Inspect after every release: %+v", in)
	}
}

// TestAttackHolds_FootprintAfterLostReplies: many acquires, reentries,
// releases and waits with lost replies leave, once their cleanups ran, no
// lock hash, no queue, and exactly the buried ids in {k}:gone.
func TestAttackHolds_FootprintAfterLostReplies(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	k := lock.RedisKeys("k")
	buried := 0
	// Each lost reply's cleanup runs in the background and sends a script
	// of its own: the planned loss waits for the script it is meant for.
	lose := func(only func(args []any) bool) {
		s.mu.Lock()
		s.only = only
		s.plan = append(s.plan, lostReply)
		s.mu.Unlock()
	}
	isReenter := func(args []any) bool { return len(args) == 3+2+6 }
	firstEnd := func(args []any) bool { return isEnd(args) && fmt.Sprint(args[3+5+3]) == "" }
	for range 10 {
		lose(isAcquire)
		if _, err := c.TryAcquire(ctxT(t), "k"); !errors.Is(err, lock.ErrUnknownOutcome) {
			t.Fatal(err)
		}
		buried++
		outer := mustAcquire(t, c, "k", lock.WithOwner("o"))
		lose(isReenter)
		if _, err := outer.Reenter(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
			t.Fatal(err)
		}
		buried++
		eventually(t, "the reentry's cleanup", func() bool {
			return probe.ZCard(context.Background(), k.Gone).Val() == int64(buried)
		})
		lose(firstEnd)
		if err := outer.Release(ctxT(t)); !errors.Is(err, lock.ErrUnknownOutcome) {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(wctx); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if n := probe.Exists(bg, k.Lock, k.Queue, k.QueueDeadlines).Val(); n != 0 {
		t.Fatalf("%d of the lock hash and queue keys left: %v", n, probe.HGetAll(bg, k.Lock).Val())
	}
	if n := probe.ZCard(bg, k.Gone).Val(); n != int64(buried) {
		t.Fatalf("%d buried ids, want %d", n, buried)
	}
}

// TestAttackHolds_ReleaseWaitingForAStalledRelease: a Release whose
// reply is slow holds the single flight; a second Release returns at its
// own ctx deadline (plus a small constant), and then the first's result.
func TestAttackHolds_ReleaseWaitingForAStalledRelease(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, tp, probe := tappedLocks(t, opts)
	other := newLocks(t, probe, opts)
	l := mustAcquire(t, c, "k")
	stalled, goOn := tp.stallNext(isEnd)
	first := make(chan error, 1)
	go func() { first <- l.Release(ctxT(t)) }()
	<-stalled
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := l.Release(ctx)
	if took := time.Since(began); took > 300*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the second Release: %v after %v, want its ctx's deadline after ~100ms", err, took)
	}
	close(goOn)
	if err := <-first; err != nil {
		t.Fatalf("the first Release: %v", err)
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after the release: %v, want ErrNotHeld", err)
	}
	mustBeFree(t, other, "k", "released")
}

// TestAttackHolds_RetryWithEveryAttemptLostKeepsItsDeadline: Acquire
// WithRetry on a Redis that answers nothing (every script held in
// transit): the call returns within its deadline plus a small constant,
// says ErrUnknownOutcome, and once the held attempts land (after their
// cleanups) the lock is free.
func TestAttackHolds_RetryWithEveryAttemptLostKeepsItsDeadline(t *testing.T) {
	opts := lock.Options{TTL: 10 * time.Second}
	c, s, probe := plannedLocks(t, opts)
	other := newLocks(t, probe, opts)
	s.holdWhile(func([]any) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	strategy := lock.RetryIf(lock.LinearBackoff(20*time.Millisecond), func(error) bool { return true })
	began := time.Now()
	_, err := c.Acquire(ctx, "k", lock.WithRetry(strategy))
	took := time.Since(began)
	if !errors.Is(err, lock.ErrUnknownOutcome) || took > 600*time.Millisecond {
		t.Fatalf("the call: %v after %v, want ErrUnknownOutcome within ~400ms", err, took)
	}
	s.holdWhile(nil)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := c.Close(wctx); err != nil { // the cleanups get through now
		t.Fatal(err)
	}
	s.mu.Lock()
	var attempts [][]any // the held acquires; the held cleanups were resent
	for _, a := range s.held {
		if isAcquire(a) {
			attempts = append(attempts, a)
		}
	}
	s.held = nil
	s.mu.Unlock()
	deliver(t, probe, attempts)
	mustBeFree(t, other, "k", "every lost attempt landed after its cleanup")
}

// TestAttackHolds_ForceUnlockLosesTheWatchedLease: ForceUnlock frees a
// lock with a nested hold; the holder's watchdog finds its hold gone and
// the lease is lost (Lost closed) within a TTL; its Release says
// ErrNotHeld and frees nothing of the next holder's.
func TestAttackHolds_ForceUnlockLosesTheWatchedLease(t *testing.T) {
	p := redistest.Start(t)
	c := newLocks(t, newRDB(t, p), lock.Options{TTL: 300 * time.Millisecond, Watchdog: true})
	other := newLocks(t, newRDB(t, p), lock.Options{TTL: 10 * time.Second})
	outer, inner := nested(t, c, "k", true)
	if held, err := other.ForceUnlock(ctxT(t), "k"); err != nil || !held {
		t.Fatalf("ForceUnlock: %v %v", held, err)
	}
	next := mustAcquire(t, other, "k")
	for _, l := range []*lock.Lease{outer, inner} {
		select {
		case <-l.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("a forced-out lease with a watchdog was not lost")
		}
		if err := l.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release of a forced-out lease: %v", err)
		}
	}
	mustStayHeld(t, c, "k", next)
	_ = next.Release(ctxT(t))
}
