package runner

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
)

// TestCommittedFilesReencode reads the committed files of the formats
// other tools read (docs/example-run's summary.json and check.json files,
// chaos/regressions) into their Go types and writes them back as the
// writers do: byte for byte the same, so that a change of a type that
// changes a format fails here first (docs/DESIGN.md states the formats).
func TestCommittedFilesReencode(t *testing.T) {
	reencode := func(t *testing.T, path string, v any) {
		t.Helper()
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got = append(got, '\n') // as writeJSON writes them
		if !bytes.Equal(got, want) {
			t.Errorf("%s does not re-encode byte for byte; first difference at byte %d:\n got: %.200s\nwant: %.200s",
				path, firstDiff(got, want), got[min(firstDiff(got, want), len(got)):], want[min(firstDiff(got, want), len(want)):])
		}
	}
	run := filepath.Join("..", "docs", "example-run")
	reencode(t, filepath.Join(run, contract.SummaryFile), new(contract.Summary))
	checks, err := filepath.Glob(filepath.Join(run, "*", contract.CheckFile))
	if err != nil || len(checks) == 0 {
		t.Fatalf("no check.json under %s (%v)", run, err)
	}
	for _, p := range checks {
		reencode(t, p, new(checker.Result))
	}
	regs, err := filepath.Glob(filepath.Join("..", "chaos", "regressions", "*.json"))
	if err != nil || len(regs) == 0 {
		t.Fatalf("no regressions (%v)", err)
	}
	for _, p := range regs {
		reencode(t, p, new(Regression))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
