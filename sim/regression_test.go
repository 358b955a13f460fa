package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/sim"
)

// TestReadRegressionsBoundsTheRun (issue 62.7): a regressions file whose
// line asks a run longer than sim.MaxDuration (duration_ms 900000000000
// grew a worker by about 150 MB a second), or more clients than
// sim.MaxClients, is refused before anything runs, the error naming the
// field, the file and the line.
func TestReadRegressionsBoundsTheRun(t *testing.T) {
	const good = `{"lock":"fenced","seed":1,"faults":"none","duration_ms":3000,"sha256":"` + "0000000000000000000000000000000000000000000000000000000000000000" + `","why":"unknown"}`
	for _, c := range []struct{ line, field string }{
		{strings.Replace(good, `"duration_ms":3000`, `"duration_ms":900000000000`, 1), "duration_ms"},
		{strings.Replace(good, `"why"`, `"clients":1000,"why"`, 1), "clients"},
	} {
		p := filepath.Join(t.TempDir(), "regressions.jsonl")
		if err := os.WriteFile(p, []byte(good+"\n"+c.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := sim.ReadRegressions(p)
		if err == nil || !strings.Contains(err.Error(), p+":2: "+c.field) {
			t.Errorf("%s: %v; want refused naming %s:2: %s", c.line, err, p, c.field)
		}
	}
	p := filepath.Join(t.TempDir(), "regressions.jsonl")
	if err := os.WriteFile(p, []byte(good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.ReadRegressions(p); err != nil {
		t.Errorf("a good line: %v", err)
	}
}
