package checker

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/lockproof/lockproof/checker/internal/histgen"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// BenchmarkCheck checks generated correct histories of 10k, 100k and 1M ops
// over 64 keys and reports ops checked per second and the peak heap.
//
//	go test ./checker -run '^$' -bench Check -benchtime 1x
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for _, clients := range []int{8, 32} {
			b.Run(fmt.Sprintf("ops=%d/clients=%d", n, clients), func(b *testing.B) {
				if testing.Short() && n > 100_000 {
					b.Skip("1M ops: not in -short")
				}
				ops := histgen.Generate(histgen.Config{Seed: 42, Clients: clients, Keys: 64, Ops: n, Faults: true})
				benchCheck(b, ops)
			})
		}
	}
}

func benchCheck(b *testing.B, ops []history.Op) {
	b.Helper()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := newPeakSampler()
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Check(context.Background(), ops, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Verdict != contract.OK {
			b.Fatalf("verdict %s on a correct history: %s / %s / %s", r.Verdict, r.Of(contract.PropLease).Explanation, r.Of(contract.PropResource).Explanation, r.Of(contract.PropLiveness).Explanation)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	p := peak.stop()
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(p-min(p, before.HeapAlloc))/(1<<20), "peak-heap-MiB")
}
