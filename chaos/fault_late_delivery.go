package chaos

import (
	"cmp"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

// lateDeliveryFault is the simulation's late-delivery in real time: for
// 3 TTLs a share of every client's connections (5–20%, drawn by
// Toxiproxy per connection) holds what the client sends for the op
// timeout and a fifth to a half TTL more, so a request lands after its
// sender gave up, while the sender's cleanup or retry runs on another
// connection (go-redis drops a connection whose command timed out). The
// window lasts until the last held request has landed.
func lateDeliveryFault() Fault {
	return Fault{Name: contract.FaultLateDelivery,
		Simulate: simLateDelivery, SimDoc: "for 3 TTLs, 5–20% of requests held in transit for the op timeout and a fifth to a half TTL more: they land after their sender gave up, while its cleanup or retry runs",
		Topologies: both,
		Doc:        "for 3 TTLs, 5–20% of the clients' connections hold their requests for the op timeout and a fifth to a half TTL more: they land after their sender gave up, while its cleanup or retry runs",
		strike: func(s *striking) (armed, error) {
			share := 0.05 + 0.15*s.rng.Float64()
			ot := cmp.Or(s.sc.Workload.OpTimeout, defaultShape().OpTimeout)
			by := ot + s.sc.TTL/5 + time.Duration(s.rng.Int64N(int64(s.sc.TTL*3/10)+1))
			var names []string
			var links []*env.Links
			for _, c := range s.wl.Clients {
				names, links = append(names, c.Name), append(links, c.Links)
			}
			label := fmt.Sprintf("%s %.1f%% by %v", contract.FaultLateDelivery, 100*share, by.Round(time.Millisecond))
			f := cut(nemesis.Late(label, nemesis.ClientProxies(links...), float32(share), by), names)
			return armed{fault: f, window: 3 * s.sc.TTL}, nil
		}}
}

// simLateDelivery holds some requests in transit past their sender's
// deadline (simnet.Rates.Late): a request that lands after its sender
// gave up races the lock's cleanup of that unknown outcome, or its
// retry. It bites when some request landed after its connection closed.
// Its window closes when the last held request has landed: a lock must
// keep every promise once it has (a late request of a call that gave up
// takes nothing), and a waiter's hand-off held up by a late pickup is
// excused only within it.
func simLateDelivery(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	p := 0.05 + 0.15*s.Rng.Float64()
	by := s.OpTimeout + s.TTL/5 + time.Duration(s.Rng.Int64N(int64(s.TTL*3/10)+1))
	name := fmt.Sprintf("%s %.1f%% by %v", contract.FaultLateDelivery, 100*p, by.Round(time.Millisecond))
	// The window lasts until the last request it held has landed (or
	// was dropped): what it does goes on after the rates are put back.
	return s.onNet(name, func() { _ = s.Net.SetRates(simnet.Rates{Late: p, LateBy: by}) },
		func() { _ = s.Net.SetRates(simnet.Rates{}); <-s.Net.LateSettled() },
		func(b, a simnet.Counts) string {
			return fmt.Sprintf("%s: %d requests held in transit, %d of them landed after their sender gave up", name,
				a.Late-b.Late, a.Orphaned-b.Orphaned)
		})
}
