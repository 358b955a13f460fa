package chaos

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

func isolateFault() Fault {
	return Fault{Name: contract.FaultIsolate,
		NotSimulated: "one holder cut off from every Redis while its go-redis ignores contexts: the simulated clients always honour theirs",
		Topologies:   both,
		Doc:          "a holder with its write ahead cut off from every Redis (its traffic held) for 3 TTLs or three op timeouts: one whose go-redis ignores ctx deadlines, so that a call that does not honour its own ctx runs past it",
		// The holder may come late in the run: the window counts from the
		// strike and the workload lingers after it, so that the calls cut
		// off come back (or fail to) while the run still records.
		Linger: true, Duration: 6 * time.Second,
		strike: func(s *striking) (armed, error) {
			// A holder whose calls only their own ctx can bound: its lock's
			// and its resource's calls must return within their deadlines
			// (the calls property), and its write must not land late.
			var cs []*workload.Client
			for _, c := range s.wl.Clients {
				if !c.CtxTimeouts() {
					cs = append(cs, c)
				}
			}
			var victim *workload.Client
			if err := bounded(s.ctx, func(ctx context.Context) error {
				var err error
				victim, err = workload.FirstHolding(ctx, cs)
				return err
			}); err != nil {
				return armed{}, fmt.Errorf("isolate: %w", err)
			}
			names := []string{victim.Name}
			f := nemesis.Partition(fmt.Sprintf("isolate %v", names), nemesis.ClientProxies(victim.Links))
			// Three op timeouts: a call that does not honour its ctx
			// comes back when the cut heals or its client's read timeout
			// strikes (the workload's is three op timeouts), two op
			// timeouts past its deadline.
			window := max(3*s.sc.TTL, 3*cmp.Or(s.sc.Workload.OpTimeout, time.Second))
			return armed{fault: cut(f, names), window: window, outer: true}, nil
		}}
}
