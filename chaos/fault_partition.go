package chaos

import (
	"fmt"
	"slices"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

func partitionFault() Fault {
	return Fault{Name: contract.FaultPartition,
		Simulate: simPartition, SimDoc: "half the clients cut off (their messages dropped, a blackhole; connections stay open) for 3 TTLs",
		Topologies: everywhere, Doc: "half the clients cut off from Redis (their traffic held) for 3 TTLs", Matrix: true,
		strike: func(s *striking) (armed, error) {
			return armed{fault: cut(nemesis.Partition(fmt.Sprintf("partition %v", s.names), s.proxies), s.names), window: 3 * s.sc.TTL}, nil
		}}
}

func simPartition(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	var names []string
	for _, i := range s.Rng.Perm(len(s.Workload.Clients))[:max(1, len(s.Workload.Clients)/2)] {
		names = append(names, s.Workload.Clients[i].Name)
	}
	slices.Sort(names)
	name := fmt.Sprintf("%s %v", contract.FaultPartition, names)
	return s.onNet(name, func() { s.Net.Cut(names...) }, s.Net.Heal, func(b, a simnet.Counts) string {
		return fmt.Sprintf("%s: %d messages dropped", name, a.Blackholed-b.Blackholed)
	})
}
