package workload

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/stallwatch"
)

// watchStalls watches this process's stalls (package internal/stallwatch)
// until stop is called and records each into rec as a window of the
// clients this process runs: a fault op named "stall" and their names
// (contract.FaultStall), its call and return the stall's window, as a
// pause-client fault's window is recorded. The judge reads it as a pause
// of those clients (docs/DESIGN.md, "Stalls"). Real time only: a
// simulation (Config.Replayable) runs on a virtual clock, which never
// stalls, and starts none.
func watchStalls(ctx context.Context, rec *history.Recorder, clients []string) (stop func()) {
	if len(clients) == 0 {
		return func() {}
	}
	name := contract.FaultStall + " " + strings.Join(clients, " ")
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		stallwatch.Watch(ctx, stallwatch.Every, stallwatch.Threshold, func(start, end time.Time) {
			now := rec.Now() // the history's clock, at this instant
			op := history.Op{Kind: history.Fault, Name: name,
				Call: now - int64(time.Since(start)), Return: now - int64(time.Since(end)), Completed: true,
				Evidence: "the process did not run for " + end.Sub(start).Round(time.Millisecond).String()}
			op.Call = max(op.Call, 0)
			_ = rec.Record(op) // a recorder closed meanwhile: the run is over
		})
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
