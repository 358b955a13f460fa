package checker

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/checker/internal/histgen"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// simOpts: the simulated leases last 20-100ms, so a short liveness slack
// lets crashed holders be checked.
var simOpts = Options{LivenessSlack: 10 * time.Millisecond}

// optsFor checks every other seed in small chunks, to exercise chunking.
func optsFor(seed uint64) Options {
	o := simOpts
	if seed%2 == 0 {
		o.chunkMin = 16
	}
	return o
}

func simConfigs(seed uint64) []histgen.Config {
	r := rand.New(rand.NewPCG(seed, 7))
	base := histgen.Config{Seed: seed, Clients: 2 + r.IntN(15), Keys: 1 + r.IntN(6), Ops: 300 + r.IntN(700), Faults: true,
		Unknown: 0.01 + r.Float64()*0.1, Pause: 0.01 + r.Float64()*0.1, Crash: 0.005 + r.Float64()*0.05}
	unf := base
	unf.Unfenced = true
	return []histgen.Config{base, unf}
}

func mustCheck(t *testing.T, ops []history.Op, opts Options) *Result {
	t.Helper()
	r, err := Check(context.Background(), ops, opts)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return r
}

// TestSimulatedHistoriesPass: every history of the reference simulator is
// correct, so the checker must pass it (never cry wolf), over many seeds.
func TestSimulatedHistoriesPass(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	var stats struct{ ops, unknown, noReturn, rejected, liveness, faults int }
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		for _, cfg := range simConfigs(seed) {
			ops := histgen.Generate(cfg)
			r := mustCheck(t, ops, optsFor(seed))
			if r.Verdict != contract.OK {
				b, _ := json.MarshalIndent(r, "", " ")
				t.Fatalf("seed %d (unfenced %v): correct history judged %s:\n%s", seed, cfg.Unfenced, r.Verdict, b)
			}
			stats.ops += len(ops)
			stats.rejected += r.Counts.Rejected
			stats.faults += r.Counts.Faults
			if r.Of(contract.PropLiveness).Verdict == contract.OK {
				stats.liveness++
			}
			for _, o := range ops {
				if o.Result == history.Unknown {
					stats.unknown++
					if !o.Completed {
						stats.noReturn++
					}
				}
			}
		}
	}
	t.Logf("checked %d ops: %d unknown (%d never returned), %d rejected, %d faults, liveness checked in %d histories",
		stats.ops, stats.unknown, stats.noReturn, stats.rejected, stats.faults, stats.liveness)
	// The simulator must exercise what it claims to.
	if stats.unknown == 0 || stats.noReturn == 0 || stats.rejected == 0 || stats.liveness == 0 || stats.faults == 0 {
		t.Fatalf("simulator does not exercise every feature: %+v", stats)
	}
}

// mutation breaks a correct history; it returns the mutated history and the
// line of the op it broke, or ok=false when the history offers no place.
type mutation struct {
	name   string
	prop   string
	mutate func(ops []history.Op, r *rand.Rand) (out []history.Op, line int, ok bool)
}

func mutations() []mutation {
	return []mutation{
		{"stale write accepted", contract.PropResourceName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// A write rejected for its stale token is accepted instead.
			idx := pick(ops, r, func(o history.Op) bool {
				return o.Kind == history.Write && o.Result == history.Rejected && o.HasToken
			})
			if idx < 0 {
				return nil, 0, false
			}
			ops[idx].Result = history.OK
			return ops, ops[idx].Line, true
		}},
		{"stale read accepted", contract.PropResourceName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// A read rejected for its stale token is accepted instead, and
			// returns the current value (so only its token is wrong). Only
			// reads refused by a fence that an accepted op had surely raised
			// before the read was called: then no linearization excuses it.
			cur := map[int]string{}
			idx := pick(ops, r, func(o history.Op) bool {
				if o.Kind != history.Read || o.Result != history.Rejected || !o.HasToken || !o.Completed {
					return false
				}
				raised := false
				for _, a := range ops {
					raised = raised || (a.Kind == history.Read || a.Kind == history.Write) && a.Key == o.Key &&
						a.Result == history.OK && a.HasToken && a.Token > o.Token && a.Return < o.Call
				}
				v, known := current(ops, o.Line-1)
				cur[o.Line-1] = v
				return raised && known
			})
			if idx < 0 {
				return nil, 0, false
			}
			ops[idx].Result, ops[idx].Value, ops[idx].HasValue = history.OK, cur[idx], true
			return ops, ops[idx].Line, true
		}},
		{"overlapping holders", contract.PropLeaseName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// An intruder acquires the key right after a holder got it.
			idx := pick(ops, r, func(o history.Op) bool {
				return o.Kind == history.Acquire && o.Result == history.OK && o.TTLMillis > 0 &&
					float64(o.Return-o.Call+2000) < float64(o.TTLMillis)*1e6*0.98
			})
			if idx < 0 {
				return nil, 0, false
			}
			a := ops[idx]
			in := history.Op{Client: "intruder", Kind: history.Acquire, Key: a.Key, Call: a.Return + 1000,
				Return: a.Return + 2000, Completed: true, Result: history.OK, TTLMillis: a.TTLMillis, Line: len(ops) + 1}
			return append(ops, in), in.Line, true
		}},
		{"reused token", contract.PropLeaseName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// An acquire returns the token of an earlier acquire by another client.
			var cands [][2]int
			for i, b := range ops {
				if b.Kind != history.Acquire || b.Result != history.OK {
					continue
				}
				for j, a := range ops {
					if a.Kind == history.Acquire && a.Result == history.OK && a.Key == b.Key && a.Client != b.Client && a.Return < b.Call {
						cands = append(cands, [2]int{i, j})
						break
					}
				}
			}
			if len(cands) == 0 {
				return nil, 0, false
			}
			c := cands[r.IntN(len(cands))]
			ops[c[0]].Token = ops[c[1]].Token
			return ops, ops[c[0]].Line, true
		}},
		{"lost update", contract.PropResourceName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// A read-modify-write read a value that had already been overwritten.
			idx := pick(ops, r, func(o history.Op) bool {
				return o.Kind == history.Write && o.Result == history.OK && o.HasPrev
			})
			if idx < 0 {
				return nil, 0, false
			}
			ops[idx].Prev = "stale:" + ops[idx].Prev
			return ops, ops[idx].Line, true
		}},
		{"stale holder writes unfenced", contract.PropResourceName, func(ops []history.Op, r *rand.Rand) ([]history.Op, int, bool) {
			// A holder's unfenced write is delayed past the next holder's acquire.
			var cands [][2]int
			for i, w := range ops {
				if w.Kind != history.Write || w.Result != history.OK || w.HasToken {
					continue
				}
				for j, b := range ops {
					if b.Kind == history.Acquire && b.Result == history.OK && b.Key == w.Key && b.Client != w.Client && b.Call > w.Return {
						cands = append(cands, [2]int{i, j})
						break
					}
				}
			}
			if len(cands) == 0 {
				return nil, 0, false
			}
			c := cands[r.IntN(len(cands))]
			b := ops[c[1]]
			ops[c[0]].Call, ops[c[0]].Return = b.Return+1, b.Return+2
			return ops, ops[c[0]].Line, true
		}},
	}
}

// current returns the value the resource of ops[i]'s key holds when
// ops[i] takes effect (simulated histories are in effect order), and false
// when an unknown write makes it uncertain.
func current(ops []history.Op, i int) (string, bool) {
	for j := i - 1; j >= 0; j-- {
		o := ops[j]
		if o.Key != ops[i].Key || (o.Kind != history.Write && o.Kind != history.Read) {
			continue
		}
		switch {
		case o.Result == history.OK:
			return o.Value, true
		case o.Kind == history.Write && o.Result == history.Unknown:
			return "", false
		}
	}
	return "", true
}

func pick(ops []history.Op, r *rand.Rand, f func(history.Op) bool) int {
	var idx []int
	for i, o := range ops {
		if f(o) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[r.IntN(len(idx))]
}

// TestMutatedHistoriesFail: breaking a correct history in each known way is
// caught, under the right property, naming the broken op's line.
func TestMutatedHistoriesFail(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	applied := map[string]int{}
	for _, m := range mutations() {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			for _, cfg := range simConfigs(seed) {
				ops := histgen.Generate(cfg)
				r := rand.New(rand.NewPCG(seed, 99))
				mut, line, ok := m.mutate(slices.Clone(ops), r)
				if !ok {
					continue
				}
				applied[m.name]++
				res := mustCheck(t, mut, optsFor(seed))
				var pr *PropertyResult
				for i := range res.Props {
					if res.Props[i].Property == m.prop {
						pr = &res.Props[i]
					}
				}
				if pr.Verdict != contract.Violated || res.Verdict != contract.Violated {
					t.Fatalf("%s, seed %d (unfenced %v), line %d: %s is %s", m.name, seed, cfg.Unfenced, line, m.prop, pr.Verdict)
				}
				found := false
				for _, v := range pr.Violations {
					found = found || slices.Contains(v.Lines, line)
				}
				if !found && pr.ViolationCount <= len(pr.Violations) {
					b, _ := json.MarshalIndent(pr, "", " ")
					t.Errorf("%s, seed %d (unfenced %v): no violation names line %d:\n%s", m.name, seed, cfg.Unfenced, line, b)
				}
			}
		}
	}
	for _, m := range mutations() {
		if applied[m.name] < 5 {
			t.Errorf("mutation %q applied only %d times", m.name, applied[m.name])
		}
	}
	t.Logf("mutations applied: %v", applied)
}
