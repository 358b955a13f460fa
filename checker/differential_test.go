package checker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// This file is a second checker, written from docs/DESIGN.md ("What the
// checker decides") and nothing else of this package: it tries every order
// of every partition (no memo, no chunks, no pruning) and restates each
// direct rule as a plain loop. TestDifferential runs both on random small
// histories from a generator of its own (not the simulator the checker's
// other tests use) and fails on any disagreement.

// bfOp is an op as the brute force sees it.
type bfOp struct {
	line      int
	client    string
	kind      history.Kind
	call, ret int64 // ret = math.MaxInt64: never returned
	done      bool  // returned
	result    history.Result
	validFor  int64 // floor(T(1-d)); MaxInt64 without TTL
	expireFor int64 // ceil(T(1+d)); MaxInt64 without TTL
	hasTTL    bool
	tok       uint64
	hasTok    bool
	value     string
	prev      string
	hasPrev   bool
	// hold: "which hold of its client the op is about", for an acquire
	// its own; a release's or renew's when an acquire of its client on
	// the key has it, else 0 (read by count).
	hold uint64
}

const never = int64(math.MaxInt64)

func plus(a, b int64) int64 {
	if a == never || b == never || a > never-b {
		return never
	}
	return a + b
}

// bfPrecedes: "op A precedes op B when A.return <= B.call ... An op whose
// return equals its call precedes only ops called after that instant".
func bfPrecedes(a, b *bfOp) bool {
	if !a.done {
		return false
	}
	return a.ret < b.call || (a.ret == b.call && a.ret > a.call)
}

type bfLease struct {
	holder       string
	holds        int
	unknownHolds int // holds from unknown acquires: may be taken back unseen
	// nums are the holds with a lease number among holds, each true when
	// an acquire of unknown outcome added it. Never changed in place: a
	// step copies it.
	nums                    map[uint64]bool
	holderTok               uint64
	holderHasTok            bool
	validUntil, expireAfter int64
	lastTok                 uint64
	hasLast                 bool
	now                     int64
}

// free is s with nobody holding the key.
func (s bfLease) free() bfLease { return bfLease{lastTok: s.lastTok, hasLast: s.hasLast, now: s.now} }

// without is s with one hold fewer: numbered hold x (x > 0), else a hold
// without a number, a phantom one when phantom; the last frees the key.
func (s bfLease) without(x uint64, phantom bool) bfLease {
	if s.holds == 1 {
		return s.free()
	}
	s.holds--
	if phantom {
		s.unknownHolds--
	}
	if x > 0 {
		m := maps.Clone(s.nums)
		delete(m, x)
		s.nums = m
	}
	return s
}

// with is s with one more hold of acquire o: numbered when o names one.
func (s bfLease) with(o *bfOp, unknown int) bfLease {
	s.holds++
	s.unknownHolds += unknown
	if o.hold > 0 {
		m := maps.Clone(s.nums)
		if m == nil {
			m = map[uint64]bool{}
		}
		m[o.hold] = unknown == 1
		s.nums = m
	}
	return s
}

// leaseStep returns the states o may lead s to; none: it cannot take
// effect. "A hold that an acquire of unknown outcome added may be taken
// back at any instant after, unrecorded": o may find s with any of those
// holds taken back.
func leaseStep(s bfLease, o *bfOp) []bfLease {
	var out []bfLease
	for _, b := range takenBack(s) {
		out = append(out, leaseStep1(b, o)...)
	}
	return out
}

// takenBack returns s and every state s leads to as some of its phantom
// holds are taken back, numbered ones by number.
func takenBack(s bfLease) []bfLease {
	out := []bfLease{s}
	if s.unknownHolds == 0 {
		return out
	}
	numbered := 0
	for x, ph := range s.nums {
		if ph {
			numbered++
			out = append(out, takenBack(s.without(x, true))...)
		}
	}
	if s.unknownHolds > numbered {
		out = append(out, takenBack(s.without(0, true))...)
	}
	return out
}

// leaseStep1 is leaseStep on s as it is.
func leaseStep1(s bfLease, o *bfOp) []bfLease {
	unknown := 0
	if o.result == history.Unknown {
		unknown = 1
	}
	p := max(s.now, o.call)
	switch o.kind {
	case history.Acquire:
		if s.holder != "" && s.holder != o.client {
			if s.validUntil == never {
				return nil
			}
			p = max(p, s.validUntil+1)
		}
		if p > o.ret {
			return nil
		}
		// "a reentrant acquire (nested hold): by the holder, p <= expiredAfter,
		// with the holder's token or neither has one"; when only one of the
		// two has a token, it may be a nested hold (whose token is the known
		// one, new when the hold began) or a new lease. A nested hold needs
		// a number the holder does not hold.
		mayNest := s.holder == o.client && p <= s.expireAfter
		_, again := s.nums[o.hold]
		again = again && o.hold > 0
		sameTok := s.holderHasTok == o.hasTok && (!o.hasTok || o.tok == s.holderTok)
		var out []bfLease
		if mayNest && !again && s.holderHasTok != o.hasTok && (!o.hasTok || !s.hasLast || o.tok > s.lastTok) {
			n := s.with(o, unknown)
			n.now = p
			n.validUntil = max(s.validUntil, plus(o.call, o.validFor))
			n.expireAfter = max(s.expireAfter, plus(o.ret, o.expireFor))
			if o.hasTok {
				n.holderTok, n.holderHasTok, n.lastTok, n.hasLast = o.tok, true, o.tok, true
			}
			out = append(out, n)
		}
		nested := mayNest && sameTok
		if o.hasTok && s.hasLast && o.tok <= s.lastTok && !nested {
			return out
		}
		if nested {
			if again {
				return out
			}
			n := s.with(o, unknown)
			n.now = p
			n.validUntil = max(s.validUntil, plus(o.call, o.validFor))
			n.expireAfter = max(s.expireAfter, plus(o.ret, o.expireFor))
			return append(out, n)
		}
		n := bfLease{holder: o.client, holderTok: o.tok, holderHasTok: o.hasTok,
			validUntil: plus(o.call, o.validFor), expireAfter: plus(o.ret, o.expireFor),
			lastTok: s.lastTok, hasLast: s.hasLast, now: p}.with(o, unknown)
		if o.hasTok {
			n.lastTok, n.hasLast = o.tok, true
		}
		return append(out, n)
	default: // release, renew
		if s.holder != o.client || (o.hasTok && s.holderHasTok && o.tok != s.holderTok) || p > s.expireAfter || p > o.ret {
			return nil
		}
		// A release or renew of lease L acts on hold L and no other.
		phantom, held := s.nums[o.hold]
		if o.hold > 0 && !held {
			return nil
		}
		if o.kind == history.Renew {
			n := s
			n.now = p
			n.validUntil = max(s.validUntil, plus(o.call, o.validFor))
			n.expireAfter = max(s.expireAfter, plus(o.ret, o.expireFor))
			return []bfLease{n}
		}
		var out []bfLease
		if o.hold > 0 {
			out = append(out, s.without(o.hold, phantom))
		} else {
			// "Release takes one hold away (a known one: the phantoms
			// stay, up to the holds left)", numbered or not.
			known := s.holds > s.unknownHolds
			plainPh := s.unknownHolds
			for _, ph := range s.nums {
				if ph {
					plainPh--
				}
			}
			if plain := s.holds - len(s.nums); plain > 0 && (plain > plainPh || !known) {
				out = append(out, s.without(0, plain == plainPh))
			}
			for x, ph := range s.nums {
				if !ph || !known {
					out = append(out, s.without(x, ph))
				}
			}
		}
		for i := range out {
			out[i].now = p
		}
		return out
	}
}

type bfRes struct {
	value  string
	max    uint64
	hasMax bool
}

func resStep(s bfRes, o *bfOp) []bfRes {
	if o.hasTok && s.hasMax && o.tok < s.max {
		return nil
	}
	if o.kind == history.Read && o.value != s.value {
		return nil
	}
	if o.kind == history.Write && o.hasPrev && o.prev != s.value {
		return nil
	}
	n := s
	if o.kind == history.Write {
		n.value = o.value
	}
	if o.hasTok && (!s.hasMax || o.tok > s.max) {
		n.max, n.hasMax = o.tok, true
	}
	return []bfRes{n}
}

// linearizable tries every order of ops (ok ones must apply, unknown ones
// may apply or not) that respects real time.
func linearizable[S any](ops []*bfOp, init S, step func(S, *bfOp) []S) bool {
	used := make([]bool, len(ops))
	var try func(s S, left int) bool
	try = func(s S, left int) bool {
		if left == 0 {
			return true
		}
		for i, o := range ops {
			if used[i] {
				continue
			}
			blocked := false
			for j, u := range ops {
				if !used[j] && j != i && bfPrecedes(u, o) {
					blocked = true
					break
				}
			}
			if blocked {
				continue
			}
			used[i] = true
			for _, n := range step(s, o) {
				if try(n, left-1) {
					used[i] = false
					return true
				}
			}
			if o.result == history.Unknown && try(s, left-1) { // no effect
				used[i] = false
				return true
			}
			used[i] = false
		}
		return false
	}
	return try(init, len(ops))
}

// bruteForce gives the three verdicts of docs/DESIGN.md.
func bruteForce(ops []history.Op, drift float64, slack int64) [3]contract.Verdict {
	byKey := map[string][]*bfOp{}
	var keys []string
	for i, h := range ops {
		if h.Kind == history.Fault {
			continue
		}
		o := &bfOp{line: i + 1, client: h.Client, kind: h.Kind, call: h.Call, ret: never, done: h.Completed,
			result: h.Result, tok: h.Token, hasTok: h.HasToken, value: h.Value, prev: h.Prev, hasPrev: h.HasPrev,
			validFor: never, expireFor: never}
		if h.Completed && !h.OpenEnded() {
			o.ret = h.Return // an open-ended op (a release of unknown outcome) may land after it
		} else if !h.Completed {
			o.result = history.Unknown
		}
		if h.TTLMillis > 0 {
			t := float64(h.TTLMillis) * 1e6
			o.validFor, o.expireFor, o.hasTTL = int64(math.Floor(t*(1-drift))), int64(math.Ceil(t*(1+drift))), true
		}
		if _, ok := byKey[h.Key]; !ok {
			keys = append(keys, h.Key)
		}
		o.hold = h.Hold // an acquire's; a release's or renew's is checked below
		byKey[h.Key] = append(byKey[h.Key], o)
	}
	for _, os := range byKey {
		acquired := map[string]bool{}
		for _, o := range os {
			if o.kind == history.Acquire {
				acquired[fmt.Sprint(o.client, "/", o.hold)] = true
			}
		}
		for _, o := range os {
			if o.kind != history.Acquire && !acquired[fmt.Sprint(o.client, "/", o.hold)] {
				o.hold = 0
			}
		}
	}
	v := [3]contract.Verdict{contract.NA, contract.NA, contract.NA}
	worse := func(i int, bad bool) {
		if bad {
			v[i] = contract.Violated
		} else if v[i] == contract.NA {
			v[i] = contract.OK
		}
	}
	for _, k := range keys {
		var lease, res, leaseIn, resIn, okAcq []*bfOp
		for _, o := range byKey[k] {
			isLease := o.kind == history.Acquire || o.kind == history.Release || o.kind == history.Renew
			if isLease {
				lease = append(lease, o)
			} else {
				res = append(res, o)
			}
			in := o.result == history.OK || (o.result == history.Unknown && o.kind != history.Read)
			switch {
			case in && isLease:
				leaseIn = append(leaseIn, o)
			case in:
				resIn = append(resIn, o)
			}
			if o.kind == history.Acquire && o.result == history.OK {
				okAcq = append(okAcq, o)
			}
		}
		// "By call" is by call, then return, then line, everywhere.
		sortByCall := func(s []*bfOp) {
			sort.SliceStable(s, func(i, j int) bool {
				if s[i].call != s[j].call {
					return s[i].call < s[j].call
				}
				if s[i].ret != s[j].ret {
					return s[i].ret < s[j].ret
				}
				return s[i].line < s[j].line
			})
		}
		sortByCall(okAcq)
		sortByCall(lease)
		sortByCall(res)
		if len(lease) > 0 {
			bad := !linearizable(leaseIn, bfLease{}, leaseStep)
			// token-owner (lease)
			for _, a := range okAcq {
				for _, b := range okAcq {
					if a.hasTok && b.hasTok && a.tok == b.tok && a.client != b.client {
						bad = true
					}
				}
			}
			// token-order in real time, with the may-hold exemption
			for _, a := range okAcq {
				for _, b := range okAcq {
					if !a.hasTok || !b.hasTok || !bfPrecedes(a, b) || a.tok < b.tok {
						continue
					}
					exempt := false
					if a.client == b.client && a.tok == b.tok {
						for _, x := range lease {
							if x != b && x.client == a.client && x.call <= b.call && x.result != history.Fail &&
								((x.kind == history.Acquire && x.hasTok && x.tok == a.tok) ||
									(x.kind == history.Renew && (!x.hasTok || x.tok == a.tok))) &&
								plus(x.ret, x.expireFor) >= b.call {
								exempt = true
							}
						}
					}
					if !exempt {
						bad = true
					}
				}
			}
			worse(0, bad)
		}
		if len(res) > 0 {
			bad := !linearizable(resIn, bfRes{}, resStep)
			// token-owner (resource)
			owner := map[uint64]string{}
			for _, a := range okAcq {
				if _, ok := owner[a.tok]; !ok && a.hasTok {
					owner[a.tok] = a.client
				}
			}
			for _, o := range res {
				if o.result != history.OK || !o.hasTok {
					continue
				}
				if c, ok := owner[o.tok]; !ok {
					owner[o.tok] = o.client
				} else if c != o.client {
					bad = true
				}
			}
			// stale-holder
			for _, w := range res {
				if w.kind != history.Write || w.result != history.OK || w.hasTok {
					continue
				}
				var own *bfOp
				for _, a := range okAcq {
					if a.client == w.client && a.ret <= w.call && (own == nil || a.ret > own.ret) {
						own = a
					}
				}
				if own == nil {
					continue
				}
				for _, b := range okAcq {
					if b.client != w.client && b.ret <= w.call && b.call >= own.ret {
						bad = true
					}
				}
			}
			worse(1, bad)
		}
		// liveness
		last, before := map[string]*bfOp{}, map[string]*bfOp{}
		for _, o := range lease {
			if o.kind == history.Acquire && o.result == history.Fail {
				continue
			}
			before[o.client], last[o.client] = last[o.client], o
		}
		for c, l := range last {
			if l.kind == history.Release && l.result == history.Unknown {
				l = before[c]
			}
			if l == nil || !l.hasTTL || !((l.kind == history.Acquire || l.kind == history.Renew) && l.result == history.OK ||
				l.kind == history.Acquire && l.result == history.Unknown && l.done) {
				continue
			}
			e := plus(plus(l.ret, l.expireFor), slack)
			for _, x := range lease {
				if x.kind != history.Acquire || x.client == l.client || x.call <= e || x.result == history.Unknown {
					continue
				}
				if v[2] == contract.NA {
					v[2] = contract.OK
				}
				if x.result == history.OK {
					break
				}
				excused := false
				for _, y := range lease {
					if y != l && y.kind == history.Acquire && y.result != history.Fail && y.call < x.ret && y.ret > l.call {
						excused = true
					}
				}
				if !excused {
					v[2] = contract.Violated
				}
			}
		}
	}
	return v
}

// genHistory makes a random small history: few clients on one or two keys,
// tokens from a small range (servers that repeat or lower them), every
// result including unknown and never returned (crashes), TTLs of 100 ms
// and times that often land exactly on a lease's boundary instants.
func genHistory(r *rand.Rand) []history.Op {
	const ms = int64(time.Millisecond)
	clients := []string{"a", "b", "c"}[:2+r.IntN(2)]
	keys := []string{"k", "j"}[:1+r.IntN(2)]
	n := 3 + r.IntN(6)
	var ops []history.Op
	stopped := map[string]bool{}
	var t int64
	for len(ops) < n {
		c := clients[r.IntN(len(clients))]
		if stopped[c] {
			if len(stopped) == len(clients) {
				break
			}
			continue
		}
		// Times: random steps, or exactly a boundary of an earlier op.
		switch x := r.IntN(10); {
		case x < 5 || len(ops) == 0:
			t += int64(r.IntN(60)) * ms
		default:
			p := ops[r.IntN(len(ops))]
			ret := p.Return
			if !p.Completed {
				ret = p.Call
			}
			cands := []int64{ret, p.Call + 99*ms, ret + 101*ms, ret + 101*ms + 1, p.Call + 99*ms + 1, ret + 1101*ms + 1, ret + 1101*ms}
			t = max(0, cands[r.IntN(len(cands))]-int64(r.IntN(2)))
		}
		o := history.Op{Client: c, Key: keys[r.IntN(len(keys))], Call: t, Return: t + int64(r.IntN(30))*ms, Completed: true}
		if r.IntN(8) == 0 {
			o.Return = o.Call // zero length
		}
		switch x := r.IntN(10); {
		case x < 4:
			o.Kind = history.Acquire
		case x < 5:
			o.Kind = history.Release
		case x < 6:
			o.Kind = history.Renew
		case x < 8:
			o.Kind = history.Write
		default:
			o.Kind = history.Read
		}
		lockOp := o.Kind == history.Acquire || o.Kind == history.Release || o.Kind == history.Renew
		switch x := r.IntN(20); {
		case x < 12:
			o.Result = history.OK
		case x < 15:
			o.Result = map[bool]history.Result{true: history.Fail, false: history.Rejected}[lockOp]
		case x < 18:
			o.Result = history.Unknown
		default:
			o.Result, o.Completed, o.Return = history.Unknown, false, 0
			stopped[c] = r.IntN(3) > 0 // mostly a crash: the client stops
		}
		if o.Kind == history.Acquire || o.Kind == history.Renew {
			o.TTLMillis = []int64{100, 100, 100, 50, 0}[r.IntN(5)]
		}
		if r.IntN(4) > 0 && !(o.Kind == history.Acquire && o.Result != history.OK && r.IntN(2) == 0) {
			o.Token, o.HasToken = uint64(1+r.IntN(4)), true
		}
		if o.Kind == history.Write || o.Kind == history.Read && o.Result == history.OK {
			o.Value, o.HasValue = []string{"", "x", "y", "z"}[r.IntN(4)], true
		}
		if o.Kind == history.Write && r.IntN(3) == 0 {
			o.Prev, o.HasPrev = []string{"", "x", "y", "z"}[r.IntN(4)], true
		}
		ops = append(ops, o)
		if r.IntN(3) == 0 {
			t = o.Call // the next op may overlap this one
		} else if o.Completed {
			t = o.Return
		}
	}
	for i := range ops {
		ops[i].Line = i + 1
	}
	return ops
}

// withHolds gives, in one history of two, every acquire, release and
// renew a lease number, as a workload that tells its holds apart does: an
// acquire a new one of its client, a release or renew mostly that of its
// client's last hold on the key not yet released, else of an earlier hold
// (released already, maybe), a number no acquire has, or none.
func withHolds(r *rand.Rand, ops []history.Op) []history.Op {
	if r.IntN(2) == 0 {
		return ops
	}
	next := map[string]uint64{}
	taken := map[string][]uint64{} // by client and key, in order
	open := map[string][]uint64{}
	for i := range ops {
		o := &ops[i]
		ck := o.Client + "/" + o.Key
		switch o.Kind {
		case history.Acquire:
			next[o.Client]++
			o.Hold = next[o.Client]
			taken[ck] = append(taken[ck], o.Hold)
			open[ck] = append(open[ck], o.Hold)
		case history.Release, history.Renew:
			switch x := r.IntN(20); {
			case x < 14 && len(open[ck]) > 0:
				o.Hold = open[ck][len(open[ck])-1]
				if o.Kind == history.Release && r.IntN(3) > 0 {
					open[ck] = open[ck][:len(open[ck])-1]
				}
			case x < 17 && len(taken[ck]) > 0:
				o.Hold = taken[ck][r.IntN(len(taken[ck]))]
			case x < 18:
				o.Hold = 99
			}
		}
	}
	return ops
}

// historyText is ops as a history file says them, for a failure's message.
func historyText(ops []history.Op) string {
	var b strings.Builder
	w := history.NewWriter(&b)
	for _, o := range ops {
		_ = w.WriteOp(o)
	}
	_ = w.Flush()
	return b.String()
}

// shifted returns ops with every time moved by d.
func shifted(ops []history.Op, d int64) []history.Op {
	out := slices.Clone(ops)
	for i := range out {
		out[i].Call += d
		if out[i].Completed {
			out[i].Return += d
		}
	}
	return out
}

// TestDifferential: the checker and the brute force agree on every
// property of thousands of random small histories, with the partitions
// checked whole and cut into the smallest chunks.
func TestDifferential(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 1500
	}
	r := rand.New(rand.NewPCG(2026, 11))
	slack := 100 * time.Millisecond
	counts := map[contract.Verdict]int{}
	for i := 0; i < n; i++ {
		ops := withHolds(r, genHistory(r))
		for _, o := range ops {
			if err := o.Validate(); err != nil {
				t.Fatalf("generator made a bad op: %v", err)
			}
		}
		if i%3 == 2 {
			// Near the end of the time range the reader accepts: judged as
			// at 0 (docs/DESIGN.md, the history file's rules).
			ops = shifted(ops, history.MaxTime-int64(30*time.Second))
		}
		want := bruteForce(ops, DefaultDrift, int64(slack))
		if want == [3]contract.Verdict{contract.NA, contract.NA, contract.NA} {
			continue // no operations: bad input, tested elsewhere
		}
		opts := Options{LivenessSlack: slack}
		if i%2 == 1 {
			opts.chunkMin = 1 + r.IntN(2)
		}
		res, err := Check(context.Background(), ops, opts)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		got := [3]contract.Verdict{res.Of(contract.PropLease).Verdict, res.Of(contract.PropResource).Verdict, res.Of(contract.PropLiveness).Verdict}
		for _, v := range got {
			counts[v]++
		}
		if got != want {
			t.Fatalf("history %d (chunks of %d): checker says (lease, resource, liveness) %v, brute force %v\n%s\nchecker: %s / %s / %s",
				i, opts.chunkMin, got, want, historyText(ops), res.Of(contract.PropLease).Explanation, res.Of(contract.PropResource).Explanation, res.Of(contract.PropLiveness).Explanation)
		}
	}
	// The generator must reach every verdict, or the test proves little.
	for _, v := range []contract.Verdict{contract.OK, contract.Violated, contract.NA} {
		if counts[v] < n/50 {
			t.Errorf("only %d property verdicts %s in %d histories: the generator is too narrow (%v)", counts[v], v, n, counts)
		}
	}
	t.Logf("property verdicts: %v", fmt.Sprint(counts))
}
