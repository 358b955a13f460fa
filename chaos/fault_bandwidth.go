package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func bandwidthFault() Fault {
	return Fault{Name: contract.FaultBandwidth,
		NotSimulated: "a throttled link: the simulated network delays messages (latency, late-delivery) but has no byte rate",
		Topologies:   both, Doc: "half the clients' traffic throttled to 1 KB/s for 3 TTLs",
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Bandwidth(fmt.Sprintf("bandwidth %v", s.names), s.proxies, 1), s.names), window: 3 * s.sc.TTL}, nil
		}}
}
