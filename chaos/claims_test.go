package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/alone"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/zoo"
)

// liar is a lock that lies to its holder in one way, over a lock that
// does not: claimed validity stretched by stretch, or a loss notice that
// never fires (a watchdog that takes a refused renewal for a success).
type liar struct {
	locker.Locker
	stretch time.Duration
	deaf    bool
	// ctxDeaf: a lease whose Context is never canceled, though Lost
	// closes (issue 41: an altered lock the simulation missed).
	ctxDeaf bool
}

func (l liar) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	x, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	if l.deaf {
		return deafLease{Lease: x}, nil
	}
	if l.ctxDeaf {
		return ctxDeafLease{stretchedLease{Lease: x}}, nil
	}
	return stretchedLease{Lease: x, by: l.stretch}, nil
}

// stretchedLease claims its validity longer than the lease it wraps.
type stretchedLease struct {
	locker.Lease
	by time.Duration
}

func (x stretchedLease) ValidUntil() time.Time {
	t := x.Lease.(locker.Claimer).ValidUntil()
	if t.IsZero() {
		return t
	}
	return t.Add(x.by)
}

// ctxDeafLease tells a loss through Lost and its validity claim, never
// through its Context.
type ctxDeafLease struct{ stretchedLease }

func (ctxDeafLease) Context() context.Context { return context.Background() }

// deafLease never tells its holder of a loss.
type deafLease struct{ locker.Lease }

func (deafLease) Lost() <-chan struct{} { return make(chan struct{}) }

// liarEntry registers over base a lock that lies as l does, claiming all
// base claims (its profile, its loss bound).
func liarEntry(t *testing.T, name, base string, l liar) locker.Entry {
	e, ok := zoo.Builtin().Lookup(base)
	if !ok {
		t.Fatalf("no lock %s", base)
	}
	open := e.Open
	e.Name, e.Doc = name, fmt.Sprintf("%s, lying to its holder", base)
	e.Open = func(d locker.Deps) (locker.Locker, error) {
		inner, err := open(d)
		if err != nil {
			return nil, err
		}
		// A copy per Open: the matrix opens locks for three scenarios at
		// once, and a shared l would hand one scenario another's Locker.
		mine := l
		mine.Locker = inner
		return mine, nil
	}
	return e
}

// TestHarnessCatchesALockThatLies: the validity-claims and loss-notice
// properties catch a lock that lies to the code holding it, where the
// lock it wraps, honest, passes the same scenarios:
//
//   - the fenced lock with its claimed validity stretched by a TTL, under
//     crash-client (the dead holder's claim outlives its lease: the next
//     holder takes the key inside it);
//   - the watchdog specimen deaf to its own refused renewals (Lost never
//     fires), under key-loss (its holder is never told the key is gone);
//   - the fenced lock whose lease's Context is never canceled, though
//     Lost closes, under key-loss (a holder that runs its work in the
//     lease's context is never told).
func TestHarnessCatchesALockThatLies(t *testing.T) {
	t.Parallel()
	// The key-loss victim must work on well past the loss bound after the
	// next grant: one that releases soon after the DEL learns of the loss
	// from its refused release, and a deaf lock then goes unseen (4 of 4
	// seeds on a busy machine, with the fault's 2s holds: the DEL strikes
	// a fifth into the run, most often late in a hold begun at the start).
	// Holds of up to 5s leave the struck one most of a second or more.
	const deafHold = 5 * time.Second
	reg := zoo.Builtin()
	for _, e := range []locker.Entry{
		liarEntry(t, "fenced-stretched", zoo.FencedName, liar{stretch: runner.DefaultTTL}),
		liarEntry(t, "watchdog-deaf", zoo.WatchdogName, liar{deaf: true}),
		liarEntry(t, "fenced-ctx-deaf", zoo.FencedName, liar{ctxDeaf: true}),
	} {
		if err := reg.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	const seeds = 4
	specs := func(seed uint64) []runner.Spec {
		sp := []runner.Spec{
			{Lock: "fenced-stretched", Fault: contract.FaultCrashClient, Seed: seed},
			{Lock: "watchdog-deaf", Fault: contract.FaultKeyLoss, Seed: seed, Hold: deafHold},
			{Lock: "fenced-ctx-deaf", Fault: contract.FaultKeyLoss, Seed: seed, Hold: deafHold}}
		if seed <= shippedSeeds(seeds) {
			sp = append(sp, runner.Spec{Lock: zoo.FencedName, Fault: contract.FaultCrashClient, Seed: seed},
				runner.Spec{Lock: zoo.WatchdogName, Fault: contract.FaultKeyLoss, Seed: seed, Hold: deafHold})
		}
		return sp
	}
	dir := zooDir(t)
	liars := []string{"fenced-stretched", "watchdog-deaf", "fenced-ctx-deaf"}
	caught := func(rows map[string]*contract.Row) map[string]bool {
		c := map[string]bool{}
		for _, s := range rows {
			switch s.Lock {
			case "fenced-stretched":
				c[s.Lock] = c[s.Lock] || s.Verdict(contract.PropClaims) == contract.Violated && caughtIn(t, dir, s, checker.RuleClaimOverlap)
			case "watchdog-deaf", "fenced-ctx-deaf":
				c[s.Lock] = c[s.Lock] || s.Verdict(contract.PropNotice) == contract.Violated && caughtIn(t, dir, s, checker.RuleLossNotice)
			}
		}
		return c
	}
	// Every holder of a lease with a Context watches it (workload.Mix.Context):
	// the struck hold of fenced-ctx-deaf is then always one whose holder
	// hears of the loss through it alone.
	mix := workload.DefaultMix()
	mix.Context = 1
	rows := zooUntil(t, dir, seeds, 2, specs, func(rows map[string]*contract.Row) bool {
		c := caught(rows)
		return !slices.ContainsFunc(liars, func(l string) bool { return !c[l] })
	}, func(c *runner.Config) { c.Registry = reg; c.Trace = nil; c.Mix = &mix })
	for id, s := range rows {
		t.Logf("%s: claims %s, notice %s", id, s.Verdict(contract.PropClaims), s.Verdict(contract.PropNotice))
		switch s.Lock {
		case zoo.FencedName:
			if s.Verdict(contract.PropClaims) != contract.OK {
				t.Errorf("%s: the honest lock's claims are %s", id, s.Verdict(contract.PropClaims))
			}
		case zoo.WatchdogName:
			if s.Verdict(contract.PropNotice) != contract.OK {
				t.Errorf("%s: the honest watchdog's loss notice is %s", id, s.Verdict(contract.PropNotice))
			}
		}
	}
	got := caught(rows)
	for _, l := range liars {
		if !got[l] {
			t.Errorf("%s was not caught on any of %d seeds", l, seeds)
		}
	}
}

// TestHarnessCatchesTheSecondReview: fenced-v2, package lock before the
// fixes of the review of what it tells its user, is caught keeping the
// claim of a lease whose release had an unknown outcome yet handed the
// lock on (claim-overlap), on one of 8 seeds of a workload that rushes
// every release under latency; the lock shipped now passes them all.
func TestHarnessCatchesTheSecondReview(t *testing.T) {
	t.Parallel()
	mix := workload.DefaultMix()
	// No owned sections: an owner's defects of the old lock (caught by
	// TestHarnessCatchesTheOwnerDefects) break G1 first.
	mix.Blocking, mix.Cancel, mix.RushRelease, mix.Owner = 1, 0, 1, 0
	const seeds = 8
	dir := zooDir(t)
	caught := func(rows map[string]*contract.Row) int {
		return caughtBy(t, dir, rows, zoo.FencedV2Name, contract.PropClaims, checker.RuleClaimOverlap)
	}
	rows := zooUntil(t, dir, seeds, 3, beside(zoo.FencedV2Name, contract.FaultLatency, seeds), func(rows map[string]*contract.Row) bool { return caught(rows) > 0 },
		func(c *runner.Config) { c.Mix = &mix })
	for id, s := range rows {
		t.Logf("%s: claims %s, notice %s", id, s.Verdict(contract.PropClaims), s.Verdict(contract.PropNotice))
		if s.Lock == zoo.FencedName {
			for _, p := range []string{contract.PropClaims, contract.PropNotice} {
				if s.Verdict(p) == contract.Violated {
					t.Errorf("%s: the fixed lock broke %s", id, p)
				}
			}
		}
	}
	n := caught(rows)
	if n == 0 {
		t.Errorf("fenced-v2's claim after a release of unknown outcome was not caught on any of %d seeds", seeds)
	}
	t.Logf("fenced-v2 caught on %d of the seeds run", n)
}

// TestHarnessCatchesAMissedHandOff: fenced-v2, package lock before its
// notifier read its connection's errors itself, takes a subscription that
// pubsub-reset killed for a live one; its waiters sleep through their
// hand-offs, and the harness catches the waiters behind them served first
// (fair queue) or a waiter served past the lock's bound (waiter liveness)
// on one of 3 seeds (4 of 4 when measured). The lock shipped now passes
// the same scenarios (review defect 3).
func TestHarnessCatchesAMissedHandOff(t *testing.T) {
	// Not t.Parallel: it wants the fixed lock's fairness ok under
	// pubsub-reset, which a waiter's look slowed past its 100ms hand-off
	// lease can break (the profile says may); beside another chaos test it
	// failed so once in five whole runs (2026-12-05).
	const seeds = 3
	bad := func(s *contract.Row) bool {
		return s.Verdict(contract.PropLiveness) == contract.Violated || s.Verdict(contract.PropFairness) == contract.Violated
	}
	caught := func(rows map[string]*contract.Row) int {
		n := 0
		for _, s := range rows {
			if s.Lock == zoo.FencedV2Name && bad(s) {
				n++
			}
		}
		return n
	}
	rows := zooUntil(t, zooDir(t), seeds, 1, beside(zoo.FencedV2Name, contract.FaultPubSubReset, seeds), func(rows map[string]*contract.Row) bool { return caught(rows) > 0 })
	for id, s := range rows {
		t.Logf("%s: liveness %s, fairness %s; %s", id, s.Verdict(contract.PropLiveness), s.Verdict(contract.PropFairness), s.FaultEvidence)
		if !strings.Contains(s.FaultEvidence, "dropped per round") {
			t.Errorf("%s: no evidence of the fault: %q", id, s.FaultEvidence)
		}
		switch {
		case s.Lock == zoo.FencedName && bad(s):
			t.Errorf("%s: the fixed lock served a waiter late or out of turn", id)
		case s.Lock == zoo.FencedName:
			for _, p := range []string{contract.PropLiveness, contract.PropFairness} {
				if s.Verdict(p) != contract.OK {
					t.Errorf("%s: the fixed lock's %s is %s, want ok (judged through the window)", id, p, s.Verdict(p))
				}
			}
		}
	}
	if caught(rows) == 0 {
		t.Errorf("fenced-v2's waiters sleeping through their hand-offs were not caught on any of %d seeds", seeds)
	}
}

// TestHarnessCatchesTheOwnerDefects: with every section acquiring as the
// client's own owner (workload.Mix.Owner), the harness catches fenced-v2
// counting an owner's pickup of a hand-off twice (its one release leaves
// the lock held: the owner's next acquire gets the same token, rule
// token-order, or the next waiter waits, rule waiter-liveness; review
// defect 2) without a fault, and freeing an owner's newer hold through the
// release of the lease key-loss took from it (rule not-owner; review
// defect 4), with one client on the key so that only the lock's answers
// count. The lock shipped now passes the same scenarios.
func TestHarnessCatchesTheOwnerDefects(t *testing.T) {
	t.Parallel()
	mix := workload.DefaultMix()
	mix.Owner, mix.Blocking, mix.Cancel = 1, 1, 0
	const seeds = 3
	specs := func(seed uint64) []runner.Spec {
		var sp []runner.Spec
		for _, l := range []string{zoo.FencedV2Name, zoo.FencedName} {
			if l == zoo.FencedName && seed > shippedSeeds(seeds) {
				continue
			}
			sp = append(sp, runner.Spec{Lock: l, Fault: contract.FaultNone, Seed: seed},
				runner.Spec{Lock: l, Fault: contract.FaultKeyLoss, Seed: seed, Clients: 1})
		}
		return sp
	}
	dir := zooDir(t)
	defects := []string{"pickup counted twice", "lost lease frees the newer hold"}
	caught := func(rows map[string]*contract.Row) map[string]int {
		c := map[string]int{}
		for _, s := range rows {
			switch {
			case s.Lock != zoo.FencedV2Name:
			case s.Fault == contract.FaultNone && (caughtIn(t, dir, s, checker.RuleTokenOrder) || caughtIn(t, dir, s, checker.RuleWaiterLiveness)):
				c[defects[0]]++
			case s.Fault == contract.FaultKeyLoss && caughtIn(t, dir, s, checker.RuleNotOwner):
				c[defects[1]]++
			}
		}
		return c
	}
	rows := zooUntil(t, dir, seeds, 1, specs, func(rows map[string]*contract.Row) bool {
		c := caught(rows)
		return c[defects[0]] > 0 && c[defects[1]] > 0
	}, func(c *runner.Config) { c.Mix = &mix })
	for id, s := range rows {
		t.Logf("%s: lease %s, liveness %s", id, s.Verdict(contract.PropLease), s.Verdict(contract.PropLiveness))
		if s.Lock == zoo.FencedName {
			for _, p := range contract.PropertyIDs() {
				if s.Verdict(p) == contract.Violated {
					t.Errorf("%s: the fixed lock broke %s", id, p)
				}
			}
		}
	}
	c := caught(rows)
	for _, d := range defects {
		if c[d] == 0 {
			t.Errorf("fenced-v2's defect %q was not caught on any of %d seeds", d, seeds)
		}
		t.Logf("%s: caught on %d of the seeds run", d, c[d])
	}
}

// TestRedisForgetsTheLock: the restart fault crashes the node that holds
// a working client's lock and starts it again empty (the master, or one
// of redlock's masters), and the force-unlock fault has an operator free a
// held lock through the lock's own API (a DEL for a lock without one);
// each lock keeps what its row of the table predicts: the fenced lock's
// watchdog tells the holder within its bound (notice), fencing keeps the
// data safe, and its waiters are served; the lua lock never learns of it;
// redlock keeps its majority on the other two masters through a restart
// when its holder got all three (G1 may break when it got a bare
// majority). Fenced histories go through trace validation too.
func TestRedisForgetsTheLock(t *testing.T) {
	t.Parallel()
	var specs []runner.Spec
	for _, l := range []string{zoo.FencedName, zoo.LuaName, zoo.RedlockName} {
		specs = append(specs, runner.Spec{Lock: l, Fault: contract.FaultRestart, Seed: 1})
	}
	for _, l := range []string{zoo.FencedName, zoo.LuaName} {
		specs = append(specs, runner.Spec{Lock: l, Fault: contract.FaultForceUnlock, Seed: 1})
	}
	rows := zooRunIn(t, zooDir(t), specs, withModel(t))
	for _, sp := range specs {
		s := rows[sp.ID()]
		t.Logf("%s: %s", sp.ID(), s.FaultEvidence)
		bit := "crashed and restarted without persistence"
		if sp.Fault == contract.FaultForceUnlock {
			bit = "held true"
		}
		if !strings.Contains(s.FaultEvidence, bit) || strings.Contains(s.FaultEvidence, "keys before none") {
			t.Errorf("%s: the fault did not bite: %q", sp.ID(), s.FaultEvidence)
		}
		exp := judge.Named(zoo.Builtin(), sp.Lock, sp.Fault, contract.TopologySentinel)
		for _, p := range contract.PropertyIDs() {
			if !exp.Want(p).Matches(s.Verdict(p)) {
				t.Errorf("%s: %s %s, predicted %s", sp.ID(), p, s.Verdict(p), exp.Want(p))
			}
		}
		if sp.Lock == zoo.FencedName && s.Verdict(contract.PropNotice) != contract.OK {
			t.Errorf("%s: loss notice %s, want ok: the watchdog must find the lock gone", sp.ID(), s.Verdict(contract.PropNotice))
		}
	}
}

// TestHarnessCatchesStarvation: under the crowd's churn (32 clients on
// one key, hand-offs faster than a hand-off lease), fenced-v2's waiters,
// whose attempt to refresh their place each hand-off to another put off,
// drop from the line and are served after later joiners (fair queue,
// rule overtaken; review defect 1); the lock shipped now keeps every
// waiter's place. The lease search on so crowded a key runs out of time
// (issue 27): only the other properties are judged here, and the trace
// validation is left to the smaller scenarios.
func TestHarnessCatchesStarvation(t *testing.T) {
	t.Parallel()
	// The crowd's verdicts need the cores: not beside another package's
	// JVMs (internal/alone).
	alone.Take(t)
	const seeds = 2
	dir := zooDir(t)
	caught := func(rows map[string]*contract.Row) int {
		return caughtBy(t, dir, rows, zoo.FencedV2Name, contract.PropFairness, checker.RuleOvertaken)
	}
	// One crowd at a time: 64 clients at once on two cores starve each
	// other's refreshes, which is the machine, not the lock.
	rows := zooUntil(t, dir, seeds, 1, beside(zoo.FencedV2Name, contract.FaultCrowd, seeds), func(rows map[string]*contract.Row) bool { return caught(rows) > 0 },
		func(c *runner.Config) { c.Trace = nil; c.CheckTimeout = 5 * time.Second; c.Parallel = 1 })
	for id, s := range rows {
		t.Logf("%s: liveness %s, fairness %s", id, s.Verdict(contract.PropLiveness), s.Verdict(contract.PropFairness))
		if s.Lock == zoo.FencedName {
			for _, p := range []string{contract.PropLiveness, contract.PropFairness, contract.PropResource, contract.PropClaims, contract.PropNotice} {
				if s.Verdict(p) != contract.OK {
					t.Errorf("%s: the fixed lock's %s is %s, want ok", id, p, s.Verdict(p))
				}
			}
		}
	}
	if caught(rows) == 0 {
		t.Errorf("fenced-v2's waiters dropping from the line under churn were not caught on any of %d seeds", seeds)
	}
}

// TestHarnessCatchesTheCallDefects: the calls property catches two of the
// review's defects of package lock in its old copy (fenced-v2), and the
// shipped lock passes the same scenarios. Defect 9: the old fencing
// resource (frozen with it) ignores the ctx of a go-redis client without
// ContextTimeoutEnabled, so a holder cut off from the resource's Redis
// (the isolate fault) returns at the client's read timeout
// (late-return). Defect 10: its
// Acquire after Close succeeds (closed-grant: the workload's leaving
// client tries once more on its closed lock).
func TestHarnessCatchesTheCallDefects(t *testing.T) {
	t.Parallel()
	const seeds = 2
	leave := workload.DefaultMix()
	leave.Leave = 0.2
	dir := zooDir(t)
	defects := map[string]string{"isolate": "a resource call past its ctx", "leave": "acquire after close"}
	rules := map[string]string{"isolate": checker.RuleLateReturn, "leave": checker.RuleClosedGrant}
	caught := func(sub string, rows map[string]*contract.Row) int {
		n := 0
		for _, s := range rows {
			if s.Lock == zoo.FencedV2Name && caughtIn(t, filepath.Join(dir, sub), s, rules[sub]) {
				n++
			}
		}
		return n
	}
	for _, sub := range []string{"isolate", "leave"} {
		fault, tune := contract.FaultIsolate, func(*runner.Config) {}
		if sub == "leave" {
			fault, tune = contract.FaultNone, func(c *runner.Config) { c.Mix = &leave }
		}
		rows := zooUntil(t, filepath.Join(dir, sub), seeds, 1, beside(zoo.FencedV2Name, fault, seeds), func(rows map[string]*contract.Row) bool { return caught(sub, rows) > 0 }, tune)
		for id, s := range rows {
			t.Logf("%s/%s: calls %s", sub, id, s.Verdict(contract.PropCalls))
			if s.Lock != zoo.FencedName {
				continue
			}
			if v := s.Verdict(contract.PropCalls); v != contract.OK {
				b, _ := os.ReadFile(filepath.Join(dir, sub, filepath.Dir(s.History), contract.CheckFile))
				t.Errorf("%s/%s: the fixed lock's calls verdict is %s, want ok\n%s", sub, id, v, b)
			}
		}
		n := caught(sub, rows)
		if n == 0 {
			t.Errorf("fenced-v2's defect %q was not caught on any of %d seeds", defects[sub], seeds)
		}
		t.Logf("%s: caught on %d of the seeds run", defects[sub], n)
	}
}
