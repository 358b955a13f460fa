package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/sim"
)

// FuzzReadRegressions: a regressions.jsonl from anywhere (`sim --replay`,
// `--shrink`) never panics the reader; a refusal names the file, and what
// it accepts is within the bounds a replay holds to (a lock, a positive
// duration up to MaxDuration, a full hash, faults, clients up to
// MaxClients: issue 62 item 7, a duration of 900000000000 ms grew a worker
// by 150 MB/s). Seeds: the saved regressions.
func FuzzReadRegressions(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "regressions.jsonl")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"lock":"fenced","seed":1,"faults":"none","duration_ms":900000000000,"sha256":"` + strings.Repeat("0", 64) + `"}`))
	f.Add([]byte(`{"lock":"fenced","seed":1,"faults":"none","duration_ms":3000,"clients":65,"sha256":"` + strings.Repeat("0", 64) + `"}` + "\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "regressions.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rs, err := sim.ReadRegressions(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range rs {
			if r.Lock == "" || r.DurationMs <= 0 || r.DurationMs > sim.MaxDuration.Milliseconds() ||
				len(r.SHA256) != 64 || r.Faults == "" || r.Clients < 0 || r.Clients > sim.MaxClients {
				t.Fatalf("accepted a regression out of bounds: %+v", r)
			}
		}
	})
}
