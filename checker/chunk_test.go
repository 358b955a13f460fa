package checker

import (
	"context"
	"slices"
	"testing"

	"github.com/lockproof/lockproof/checker/internal/histgen"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestChunkWitnessIsNotProof: a chunk that fails from the end state of one
// witness of the chunks before is not a violation: the whole partition is
// rechecked. Here the first chunk's two concurrent writes may end in either
// value, and the read in the second chunk needs the order Porcupine did not
// pick first.
func TestChunkWitnessIsNotProof(t *testing.T) {
	for _, last := range []string{"x", "y"} {
		ops := lined(
			wr("a", 0, 10, ok, "x"),
			wr("b", 1, 11, ok, "y"),
			rd("c", 20, 21, ok, last),
			rd("c", 22, 23, ok, last),
		)
		p, err := prepare(ops, DefaultDrift)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(chunk(porcupineOps(p.keys[0].resource), 2)); n != 2 {
			t.Fatalf("%d chunks, want 2", n)
		}
		r, err := Check(context.Background(), ops, Options{chunkMin: 2})
		if err != nil {
			t.Fatal(err)
		}
		if r.Of(contract.PropResource).Verdict != contract.OK {
			t.Fatalf("read %q: resource %s, want ok", last, r.Of(contract.PropResource).Verdict)
		}
	}
	// And a real violation across chunks is still found, with its lines.
	ops := lined(
		wr("a", 0, 10, ok, "x"),
		wr("b", 1, 11, ok, "y"),
		rd("c", 20, 21, ok, "x"),
		rd("c", 22, 23, ok, "y"),
	)
	r, err := Check(context.Background(), ops, Options{chunkMin: 2})
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, r, want{lease: contract.NA, resource: contract.Violated, liveness: contract.NA, prop: contract.PropResourceName, rule: RuleStaleRead, lines: []int{1, 4}})
}

// TestChunkedLongPartitions: one key, many ops, checked in chunks (with ops
// that never returned among them): correct histories pass, and a mutation
// deep inside is found.
func TestChunkedLongPartitions(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		ops := histgen.Generate(histgen.Config{Seed: seed, Clients: 6, Keys: 1, Ops: 6000, Unknown: 0.05, NoReturn: 0.5})
		p, err := prepare(ops, DefaultDrift)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(chunk(porcupineOps(p.keys[0].lease), 64)); n < 3 {
			t.Fatalf("seed %d: %d lease chunks, want several", seed, n)
		}
		opts := simOpts
		opts.chunkMin = 64
		r := mustCheck(t, ops, opts)
		if r.Verdict != contract.OK {
			t.Fatalf("seed %d: %s / %s / %s", seed, r.Of(contract.PropLease).Explanation, r.Of(contract.PropResource).Explanation, r.Of(contract.PropLiveness).Explanation)
		}
		// Break a write in the middle: a lost update.
		mut := slices.Clone(ops)
		var idx []int
		for i, o := range mut {
			if o.Kind == history.Write && o.Result == history.OK && o.HasPrev && i > len(mut)/3 && i < 2*len(mut)/3 {
				idx = append(idx, i)
			}
		}
		i := idx[len(idx)/2]
		mut[i].Prev = "stale:" + mut[i].Prev
		r = mustCheck(t, mut, opts)
		if r.Of(contract.PropResource).Verdict != contract.Violated || !slices.Contains(r.Of(contract.PropResource).Violations[0].Lines, mut[i].Line) {
			t.Fatalf("seed %d: mutated line %d: resource %s: %s", seed, mut[i].Line, r.Of(contract.PropResource).Verdict, r.Of(contract.PropResource).Explanation)
		}
	}
}
