//go:build linux

package checker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/checker/internal/sim"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// scaleHistoryEnv names the history file a child process of BenchmarkScale
// checks (TestScaleChild); unset, that test does nothing.
const scaleHistoryEnv = "LOCKPROOF_SCALE_HISTORY"

// BenchmarkScale measures the cost of a violation: each history is checked
// clean and with one read value changed in its middle, in a child process
// (this test binary again) so that wall time and peak RSS (the child's
// VmHWM) are those of the whole check, reading the file included, as
// `lockproof check` spends them.
//
//	go test ./checker -run '^$' -bench Scale -benchtime 1x
func BenchmarkScale(b *testing.B) {
	for _, c := range []struct {
		ops, keys int
	}{{100_000, 1}, {200_000, 1}, {100_000, 64}, {1_000_000, 64}} {
		ops := sim.Generate(sim.Config{Seed: 42, Clients: 8, Keys: c.keys, Ops: c.ops, Faults: true})
		for _, bad := range []bool{false, true} {
			name := fmt.Sprintf("ops=%d/keys=%d/%s", c.ops, c.keys, map[bool]string{false: "clean", true: "one-bad-read"}[bad])
			b.Run(name, func(b *testing.B) {
				hist := append([]history.Op(nil), ops...)
				want := "ok"
				if bad {
					want = "violated"
					if !spoilOneRead(hist) {
						b.Fatal("no ok read to change")
					}
				}
				path := filepath.Join(b.TempDir(), "history.jsonl")
				if err := history.WriteFile(path, hist); err != nil {
					b.Fatal(err)
				}
				var wall time.Duration
				var rss int64
				for i := 0; i < b.N; i++ {
					cmd := exec.Command(os.Args[0], "-test.run=^TestScaleChild$", "-test.v")
					cmd.Env = append(os.Environ(), scaleHistoryEnv+"="+path)
					start := time.Now()
					out, err := cmd.CombinedOutput()
					wall += time.Since(start)
					if err != nil || !strings.Contains(string(out), "verdict "+want) {
						b.Fatalf("child: %v, want verdict %s:\n%s", err, want, out)
					}
					// The child's own high-water mark: the parent's rusage
					// would start from the parent's RSS at fork.
					if _, after, ok := strings.Cut(string(out), "peak-rss-kib "); ok {
						kib, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
						if err != nil {
							b.Fatalf("child's peak RSS: %v", err)
						}
						rss = max(rss, kib)
					}
				}
				b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
				b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
			})
		}
	}
}

// spoilOneRead changes the value of the first ok read in the second half.
func spoilOneRead(ops []history.Op) bool {
	for i := len(ops) / 2; i < len(ops); i++ {
		if ops[i].Kind == history.Read && ops[i].Result == history.OK {
			ops[i].Value = "never written"
			return true
		}
	}
	return false
}

// TestScaleChild is BenchmarkScale's child: it checks the file it is given
// under the command line's default budgets and prints the verdict.
func TestScaleChild(t *testing.T) {
	path := os.Getenv(scaleHistoryEnv)
	if path == "" {
		t.Skip("a child of BenchmarkScale only")
	}
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), ops, Options{Timeout: 5 * time.Minute, MaxHeap: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("verdict %s: %s / %s\n", r.Verdict, r.Of(contract.PropLease).Explanation, r.Of(contract.PropResource).Explanation)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			fmt.Printf("peak-rss-kib %s\n", f[1]) // since exec: this process alone
		}
	}
}
