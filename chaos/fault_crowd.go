package chaos

import (
	"time"

	"github.com/lockproof/lockproof/contract"
)

// crowdFault is no fault but a crowd: 32 clients churn on one key, with
// brief sections (holds ≤5 ms, no nested hold, long work or renewal) and
// hardly a pause between attempts, so that the line is never empty,
// every hand-off has waiters behind it, and hand-offs follow each other
// faster than a hand-off lease (starvation: a waiter whose refresh is
// put off by each hand-off to another drops from the line; waiters
// dropped from the line; every waiter woken per hand-off). Operations may
// take 5 s: a waiter stays in line past the lock's queue deadline (a
// line of 31 at ~50 ms a section is 1.5 s).
//
// Not in the default matrix: the checker's search on a key that 32
// clients share with unknown outcomes straddling every hand-off costs
// minutes where the other faults cost seconds; a run names it.
func crowdFault() Fault {
	return Fault{Name: contract.FaultCrowd,
		NotSimulated: "contention, not a fault: 32 clients on one key in brief sections; the simulation takes --clients (up to 64) and --mix, not the crowd's brief sections yet",
		Topologies:   both, Doc: "no fault: 32 clients churn on one key (brief sections, holds ≤5 ms, thinking ≤2 ms, waits up to 5 s)",
		Shape:    WorkloadShape{Clients: 32, Hold: 5 * time.Millisecond, Think: 2 * time.Millisecond, OpTimeout: 5 * time.Second, Brief: true},
		Duration: 6 * time.Second}
}
