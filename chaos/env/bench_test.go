package env_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redistest"
)

// BenchmarkProcessStartClose measures bringing the default topology up
// (3 data nodes, 3 Sentinels, fenced node, Toxiproxy, replication proxies)
// until Sentinels see everything, and tearing it down.
func BenchmarkProcessStartClose(b *testing.B) {
	redistest.Require(b, true)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		e, err := env.NewProcess(ctx, env.Spec{}, nil)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		if err := e.Close(ctx); err != nil {
			b.Error(err)
		}
		cancel()
	}
}

// BenchmarkFailoverPartition measures, with DownAfter 500ms, the time from
// isolating the master (its replication proxy blackholed) to a Sentinel
// majority reporting a promoted replica. Setup is not timed.
func BenchmarkFailoverPartition(b *testing.B) {
	redistest.Require(b, true)
	for b.Loop() {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		e, err := env.NewProcess(ctx, env.Spec{DownAfter: 500 * time.Millisecond}, nil)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		topo := e.Topology()
		p, err := e.Proxies().API.Proxy(topo.Data[0].ReplProxy)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, s := range []string{"upstream", "downstream"} {
			if _, err := p.AddToxic("cut-"+s, "timeout", s, 1, map[string]any{"timeout": 0}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := env.WaitMaster(ctx, topo, "data-0"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = e.Close(ctx)
		cancel()
		b.StartTimer()
	}
}
