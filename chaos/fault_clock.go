package chaos

import (
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func clockSkewFault() Fault {
	return Fault{Name: contract.FaultClockSkew, Topologies: both, Doc: "one client's clock set 4 TTLs ahead for half the run (for locks that read client clocks)", Matrix: true,
		strike: func(s *striking) (armed, error) {
			f := &nemesis.ClockSkew{Client: s.victim.Name, Clock: s.victim.Clock, Offset: 4 * s.sc.TTL}
			return armed{fault: f, window: s.sc.Duration / 2}, nil
		}}
}
