package reports

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// FuzzLoadSummary: a summary.json from anywhere (a CI artifact, a merge
// of shards) never panics the loader nor the renderers, and a refusal is
// an ErrBadRun naming the file. Seeds: testdata/run/summary.json and
// testdata/fuzz/FuzzLoadSummary (issue 47: the readers of untrusted files
// are fuzzed, and what the fuzzer found is kept).
func FuzzLoadSummary(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "run", contract.SummaryFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"scenarios":[{"lock":"../x","fault":"none","seed":1,"history":"../../etc/passwd"}]}`))
	f.Add([]byte(`{"scenarios":[{"lock":"[a](b)","fault":"none","seed":1,"lease":"violated","expected":{"lease":"ok"}}],"topology":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		run, err := LoadWith(dir, LoadOptions{SummaryOnly: true})
		if err != nil {
			if !errors.Is(err, ErrBadRun) {
				t.Fatalf("error %v is not an ErrBadRun", err)
			}
			return
		}
		r := Build(run)
		var b bytes.Buffer
		for _, w := range []func(*bytes.Buffer, *Report) error{
			func(b *bytes.Buffer, r *Report) error { return WriteMarkdown(b, r) },
			func(b *bytes.Buffer, r *Report) error { return WriteHTML(b, r) },
			func(b *bytes.Buffer, r *Report) error { return WriteJUnit(b, r) },
			func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) },
		} {
			b.Reset()
			if err := w(&b, r); err != nil {
				t.Fatalf("an accepted summary does not render: %v", err)
			}
		}
	})
}
