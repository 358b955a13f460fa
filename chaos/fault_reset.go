package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

func resetFault() Fault {
	// In the default matrix: a reset also drops the pub/sub connection a
	// waiter hears its hand-off on.
	return Fault{Name: contract.FaultReset,
		Simulate: simReset, SimDoc: "for 3 TTLs, 2–10% of requests lost before they run and of replies lost after (the connection reset: an unknown outcome)",
		Topologies: both, Doc: "half the clients' connections (pub/sub included) reset for 3 TTLs", Matrix: true,
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Reset(fmt.Sprintf("reset %v", s.names), s.proxies), s.names), window: 3 * s.sc.TTL}, nil
		}}
}

func simReset(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	p := 0.02 + 0.08*s.Rng.Float64()
	r := simnet.Rates{Drop: p, LoseReply: p}
	name := fmt.Sprintf("%s lost messages %.1f%%", contract.FaultReset, 100*p)
	return s.rates(name, r, func(b, a simnet.Counts) string {
		return fmt.Sprintf("%s: %d requests and %d replies lost, %d connections reset", name,
			a.Dropped-b.Dropped, a.LostReplies-b.LostReplies, a.Resets-b.Resets)
	})
}
