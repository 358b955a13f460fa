package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadRegression: a saved regression from anywhere (a pull request,
// an old checkout) never panics the reader, and a refusal is an
// ErrBadConfig or a read error naming the file. Seeds: the regressions
// kept in chaos/regressions, and testdata/fuzz/FuzzReadRegression (issue
// 47: what the fuzzer finds is kept).
func FuzzReadRegression(f *testing.F) {
	kept, _ := filepath.Glob(filepath.Join("..", "chaos", "regressions", "*.json"))
	for _, p := range kept {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"r","lock":"fenced","fault":"none","seed":1,"property":"lease","duration_ms":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "r.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := readRegression(p)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error %v is not an ErrBadConfig", err)
			}
			return
		}
		if r.Name != "r" {
			t.Fatalf("accepted a regression named %q from r.json", r.Name)
		}
		if err := r.validate(); err != nil {
			t.Fatalf("accepted a regression that does not validate: %v", err)
		}
	})
}
