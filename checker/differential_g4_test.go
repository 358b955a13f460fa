package checker

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// The claims, loss-notice and fair-queue properties restated a second
// time, as plain loops over the ops from docs/DESIGN.md ("What the lock
// told its holder", "Whom a fair queue serves first") and nothing else of
// this package; TestDifferentialG4 runs them and the checker on random
// small histories (a generator of its own) and fails on any disagreement.

// g4Verdicts are the brute force's verdicts: claims, notice, fairness.
type g4Verdicts [3]contract.Verdict

// g4Brute decides the three properties of ops (one key or more) for a
// lock with loss bound bound (0: off) and, when fair, a fair queue with
// bypass b.
func g4Brute(ops []history.Op, drift float64, bound int64, fair bool, b int) g4Verdicts {
	v := g4Verdicts{contract.NA, contract.NA, contract.NA}
	mark := func(i int, bad bool) {
		if bad {
			v[i] = contract.Violated
		} else if v[i] == contract.NA {
			v[i] = contract.OK
		}
	}
	ret := func(o history.Op) int64 {
		if !o.Completed {
			return math.MaxInt64
		}
		return o.Return
	}
	var faults []history.Op
	end := int64(0) // the latest instant the history shows
	for _, o := range ops {
		end = max(end, o.Call)
		if o.Completed {
			end = max(end, o.Return)
		}
		if o.Kind == history.Fault && !contract.KeepsServing(contract.FaultKind(o.Name)) {
			faults = append(faults, o)
		}
	}
	keys := map[string]bool{}
	for _, o := range ops {
		if o.Kind != history.Fault {
			keys[o.Key] = true
		}
	}
	for k := range keys {
		var on []history.Op
		for _, o := range ops {
			if o.Kind != history.Fault && o.Key == k {
				on = append(on, o)
			}
		}
		okAcquire := func(o history.Op) bool { return o.Kind == history.Acquire && o.Result == history.OK }
		sameHold := func(a, b history.Op) bool { return a.Hold == 0 || b.Hold == 0 || a.Hold == b.Hold }
		// An end of the claims of o's hold, called in [o.call, t]: a
		// release (but an unknown one that still claimed), or a loss
		// notice; or a release called before o and still running at
		// o.call (two calls at once on one lease).
		ended := func(o history.Op, t int64) bool {
			for _, e := range on {
				isRelease := e.Kind == history.Release && !(e.Result == history.Unknown && e.HasValid)
				isEnd := e.Kind == history.Lost || isRelease
				during := e.Call >= o.Call && e.Call <= t
				before := isRelease && e.Call < o.Call && ret(e) >= o.Call
				if isEnd && e.Client == o.Client && (during || before) && sameHold(o, e) {
					return true
				}
			}
			return false
		}

		// Claims: claim-overlap and checked-write.
		for _, o := range on {
			var made int64
			switch {
			case (o.Kind == history.Acquire || o.Kind == history.Renew) && o.Result == history.OK && o.HasValid,
				o.Kind == history.Release && o.Result == history.Unknown && o.HasValid:
				made = ret(o)
			case o.Kind == history.Write && o.Checked:
				mark(0, false)
				if !o.HasValid {
					continue
				}
				made = o.Call
			default:
				continue
			}
			mark(0, false)
			if made == math.MaxInt64 || o.ValidUntil <= made {
				continue
			}
			less := o.ValidUntil - int64(math.Ceil(float64(o.ValidUntil-made)*drift))
			for _, g := range on {
				// g called before the claim counts when its lease, from
				// its call, surely lasted past the claim's making.
				lasted := ret(g) > made && (g.TTLMillis == 0 ||
					made-g.Call < int64(math.Floor(float64(g.TTLMillis*int64(time.Millisecond))*(1-drift))))
				if okAcquire(g) && g.Client != o.Client && (g.Call >= made || lasted) && ret(g) < less && !ended(o, ret(g)) {
					mark(0, true)
				}
			}
		}
		for _, w := range on {
			if w.Kind != history.Write || !w.Checked {
				continue
			}
			// own: the ok acquire of w's hold (by its lease when one has it),
			// the one that returned last by w.call.
			var own *history.Op
			byLease := false
			if w.Hold != 0 {
				for _, a := range on {
					if okAcquire(a) && a.Client == w.Client && a.Hold == w.Hold {
						byLease = true
					}
				}
			}
			for i, a := range on {
				if okAcquire(a) && a.Client == w.Client && (!byLease || a.Hold == w.Hold) && ret(a) <= w.Call &&
					(own == nil || ret(a) > ret(*own)) {
					own = &on[i]
				}
			}
			if own == nil {
				continue
			}
			for _, g := range on {
				if okAcquire(g) && g.Client != w.Client && ret(g) <= w.Call && g.Call >= ret(*own) {
					mark(0, true)
				}
			}
		}

		// Loss notice: false-notice and, with a bound, loss-notice.
		for _, n := range on {
			if n.Kind != history.Lost {
				continue
			}
			mark(1, false)
			// Without a lease: about every hold; false when the client
			// held nothing at n (its holds, +1 per ok acquire called by
			// then, -1 per ok release returned by then, at zero, having
			// taken one, and no unknown acquire called by then).
			took, held, unsure := false, 0, false
			for _, r := range on {
				switch {
				case r.Client != n.Client:
				case r.Kind == history.Acquire && r.Call <= n.Call && r.Result == history.OK:
					took, held = true, held+1
				case r.Kind == history.Acquire && r.Call <= n.Call && r.Result == history.Unknown:
					unsure = true
				case r.Kind == history.Release && r.Result == history.OK && ret(r) <= n.Call:
					held--
				}
				if n.Hold != 0 && r.Kind == history.Release && r.Client == n.Client && r.Hold == n.Hold &&
					r.Result == history.OK && ret(r) <= n.Call {
					mark(1, true)
				}
			}
			if n.Hold == 0 && took && held <= 0 && !unsure {
				mark(1, true)
			}
		}
		if bound > 0 {
			for _, h := range on {
				if !okAcquire(h) || !h.Completed {
					continue
				}
				// b: the other client's ok acquire called at or after
				// h.return that returned first.
				var bb *history.Op
				for i, g := range on {
					if okAcquire(g) && g.Client != h.Client && g.Call >= h.Return && (bb == nil || ret(g) < ret(*bb)) {
						bb = &on[i]
					}
				}
				if bb == nil || !bb.Completed {
					continue
				}
				// s: b.return, or the end of the fault windows open then.
				s := bb.Return
				for moved := true; moved && s != math.MaxInt64; {
					moved = false
					for _, f := range faults {
						if f.Call <= s && ret(f) > s {
							s, moved = ret(f), true
						}
					}
				}
				if s == math.MaxInt64 || s > math.MaxInt64-bound {
					continue
				}
				due := s + bound
				ranAfter := false
				for _, o := range on {
					if o.Client == h.Client && o.Call > due {
						ranAfter = true
					}
				}
				if due > end || !ranAfter {
					continue
				}
				excused := false
				for _, f := range faults {
					if f.Call <= due && ret(f) >= s+1 {
						excused = true
					}
				}
				if excused {
					continue // not judged
				}
				mark(1, false)
				if !ended(h, due) {
					mark(1, true)
				}
			}
		}

		// Fair queue: overtaken.
		if !fair {
			continue
		}
		for _, x := range on {
			if x.Kind != history.Acquire || !x.Wait || !x.Completed || !x.HasInLine || (x.Result != history.OK && x.Result != history.Fail) {
				continue
			}
			faulted := false
			for _, f := range faults {
				if f.Call <= x.Return && ret(f) >= x.Call {
					faulted = true
				}
			}
			if faulted {
				continue
			}
			mark(2, false)
			over := 0
			left := x.Return // a wait that failed left the line at its deadline
			if x.Result == history.Fail && x.HasDeadline {
				left = min(left, x.Deadline)
			}
			for _, y := range on {
				if okAcquire(y) && y.Completed && y.Client != x.Client && y.Call > x.InLine && y.Return < left {
					over++
				}
			}
			if over > b {
				mark(2, true)
			}
		}
	}
	return v
}

// genG4 makes a random small history of what locks tell their holders:
// claims (valid_until) around the lease's boundary, checked writes, loss
// notices, releases of every result, blocking acquires with in_line, and
// fault windows, pub/sub resets among them (a window that excuses
// nothing).
func genG4(r *rand.Rand) []history.Op {
	const ms = int64(time.Millisecond)
	clients := []string{"a", "b", "c"}[:2+r.IntN(2)]
	n := 4 + r.IntN(8)
	var ops []history.Op
	holds := map[string]uint64{}
	var t int64
	for len(ops) < n {
		c := clients[r.IntN(len(clients))]
		t += int64(r.IntN(40)) * ms
		if r.IntN(3) == 0 && len(ops) > 0 {
			t = ops[r.IntN(len(ops))].Call + int64(r.IntN(120))*ms // overlap an earlier op
		}
		o := history.Op{Client: c, Key: "k", Call: t, Return: t + int64(r.IntN(50))*ms, Completed: true}
		lease := func(fresh bool) uint64 {
			if r.IntN(6) == 0 {
				return 0 // not said
			}
			if fresh || holds[c] == 0 {
				holds[c]++
			}
			return holds[c]
		}
		claim := func(from int64) {
			if r.IntN(5) > 0 {
				o.ValidUntil, o.HasValid = from+[]int64{100, 99, 150, 40, 300}[r.IntN(5)]*ms, true
			}
		}
		switch x := r.IntN(20); {
		case x < 1:
			o = history.Op{Kind: history.Fault, Name: []string{"pause-client a", "pubsub-reset m", "partition [b]"}[r.IntN(3)],
				Call: t, Return: t + int64(r.IntN(150))*ms, Completed: r.IntN(6) > 0}
		case x < 9:
			o.Kind, o.TTLMillis, o.Hold = history.Acquire, 100, lease(true)
			o.Result = []history.Result{history.OK, history.OK, history.OK, history.Fail, history.Unknown}[r.IntN(5)]
			if r.IntN(3) > 0 {
				// A wait, often long enough for later joiners to be served
				// within it.
				o.Wait, o.Return = true, o.Call+int64(r.IntN(200))*ms
				if r.IntN(4) > 0 {
					o.InLine, o.HasInLine = o.Call+int64(r.IntN(int(o.Return-o.Call)/int(ms)/4+1))*ms, true
				}
			}
			if o.Result == history.OK {
				claim(o.Call)
			}
		case x < 10:
			o.Kind, o.TTLMillis, o.Hold, o.Result = history.Renew, 100, lease(false), []history.Result{history.OK, history.Fail}[r.IntN(2)]
			if o.Result == history.OK {
				claim(o.Call)
			}
		case x < 13:
			o.Kind, o.Hold = history.Release, lease(false)
			o.Result = []history.Result{history.OK, history.OK, history.Fail, history.Unknown}[r.IntN(4)]
			if o.Result == history.Unknown && r.IntN(2) == 0 {
				claim(o.Return)
			}
		case x < 17:
			o.Kind, o.Hold, o.Value, o.HasValue = history.Write, lease(false), "v", true
			o.Result = []history.Result{history.OK, history.Unknown}[r.IntN(2)]
			if r.IntN(4) > 0 {
				o.Checked = true
				claim(o.Call)
			}
		default:
			o.Kind, o.Hold, o.Result, o.Return = history.Lost, lease(false), history.OK, o.Call
		}
		if o.HasValid && o.ValidUntil > history.MaxTime-1 {
			o.HasValid = false
		}
		ops = append(ops, o)
	}
	for i := range ops {
		ops[i].Line = i + 1
	}
	return ops
}

// TestDifferentialG4: the checker and the brute force above agree on the
// claims, loss-notice and fair-queue verdicts of thousands of random small
// histories, with and without a loss bound, for strict FIFO and a bypass.
func TestDifferentialG4(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 3000
	}
	r := rand.New(rand.NewPCG(2026, 25))
	counts := map[string]int{}
	checked := 0
	for i := 0; i < n; i++ {
		ops := genG4(r)
		valid := true
		for _, o := range ops {
			if o.Validate() != nil {
				valid = false // the generator's rare slip (an op the reader would refuse)
			}
		}
		if !valid {
			continue
		}
		checked++
		bound := []time.Duration{0, 50 * time.Millisecond, 120 * time.Millisecond}[i%3]
		fair, bypass := i%4 != 0, i%5%2
		want := g4Brute(ops, DefaultDrift, int64(bound), fair, bypass)
		res, err := Check(context.Background(), ops, Options{LossBound: bound, Fair: fair, Bypass: bypass, WaitBound: 0})
		if err != nil {
			judged := false
			for _, o := range ops {
				judged = judged || (o.Kind != history.Fault && o.Kind != history.Lost)
			}
			if !judged {
				continue // no lock or resource op: bad input, tested elsewhere
			}
			t.Fatalf("history %d: %v", i, err)
		}
		got := g4Verdicts{res.Of(contract.PropClaims).Verdict, res.Of(contract.PropNotice).Verdict, res.Of(contract.PropFairness).Verdict}
		for j, p := range []string{"claims", "notice", "fairness"} {
			counts[p+" "+string(got[j])]++
		}
		if got != want {
			t.Fatalf("history %d (loss bound %v, fair %v bypass %d): checker says (claims, notice, fairness) %v, brute force %v\n%s\nchecker: %s / %s / %s",
				i, bound, fair, bypass, got, want, historyText(ops), res.Of(contract.PropClaims).Explanation,
				res.Of(contract.PropNotice).Explanation, res.Of(contract.PropFairness).Explanation)
		}
	}
	// The generator must reach every verdict of every property.
	for _, p := range []string{"claims", "notice", "fairness"} {
		for _, v := range []contract.Verdict{contract.OK, contract.Violated, contract.NA} {
			if counts[p+" "+string(v)] < checked/100 {
				t.Errorf("only %d %s verdicts %s in %d histories: the generator is too narrow (%v)", counts[p+" "+string(v)], p, v, checked, counts)
			}
		}
	}
	t.Logf("%d histories; verdicts: %v", checked, counts)
}
