package chaos

import (
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func clockSkewFault() Fault {
	return Fault{Name: contract.FaultClockSkew,
		Simulate: simClockSkew, SimDoc: "one client's clock set 4 TTLs ahead for half the run (for locks that read client clocks)",
		Topologies: both, Doc: "one client's clock set 4 TTLs ahead for half the run (for locks that read client clocks)", Matrix: true,
		strike: func(s *striking) (armed, error) {
			f := &nemesis.ClockSkew{Client: s.victim.Name, Clock: s.victim.Clock, Offset: 4 * s.sc.TTL}
			return armed{fault: f, window: s.sc.Duration / 2}, nil
		}}
}

// simClockSkew sets a client's clock 4 TTLs ahead for half the run, as
// the real-time clock-skew does: only locks that read their client's
// clock (locker.Deps.Clock) notice.
func simClockSkew(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	v := s.Workload.Clients[s.Rng.IntN(len(s.Workload.Clients))]
	return s.window(&nemesis.ClockSkew{Client: v.Name, Clock: v.Clock, Offset: 4 * s.TTL}, s.Run/2)
}
