package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// FuzzMerge: `report --merge` of shards from anywhere (CI artifacts)
// never panics and writes only inside its output directory: with one
// shard's summary.json fuzzed beside a real shard of the same plan, Merge
// merges or refuses with ErrBadMerge (issue 62: fuzz the readers of
// untrusted files). Seeds: the real shards of a small plan.
func FuzzMerge(f *testing.F) {
	base := f.TempDir()
	first, second := filepath.Join(base, "a"), filepath.Join(base, "b")
	runPlan(f, first, &contract.Shard{Index: 1, Count: 2})
	runPlan(f, second, &contract.Shard{Index: 2, Count: 2})
	sum, err := os.ReadFile(filepath.Join(second, contract.SummaryFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sum)
	f.Add([]byte(`{"shard":{"index":2,"count":2},"scenarios":[{"lock":"../../x","fault":"none","seed":1}]}`))
	f.Add([]byte(`{"shard":{"index":2,"count":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		shard := filepath.Join(dir, "shard")
		if err := os.CopyFS(shard, os.DirFS(second)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shard, contract.SummaryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out", "merged")
		if _, err := Merge(out, []string{first, shard}, true); err != nil && !errors.Is(err, ErrBadMerge) {
			t.Fatalf("Merge: %v, not an ErrBadMerge", err)
		}
		// Nothing outside out: dir holds the shard and out alone.
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "shard" && e.Name() != "out" {
				t.Fatalf("Merge wrote %s outside its output directory", e.Name())
			}
		}
	})
}

// FuzzDescribeFirst: a check.json from anywhere (a regression's run
// directory) never panics the reader that takes a regression's rule and
// explanation from it.
func FuzzDescribeFirst(f *testing.F) {
	f.Add([]byte(`{"properties":[{"property":"lease","verdict":"violated","violations":[{"rule":"mutual-exclusion","explanation":"x"}]}]}`))
	f.Add([]byte(`{"properties":[{"property":"lease","violations":[]}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), contract.CheckFile)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := Regression{Property: contract.PropLease}
		describeFirst(&r, p)
	})
}
