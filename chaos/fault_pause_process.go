package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func pauseProcessFault() Fault {
	return Fault{Name: contract.FaultPauseProcess,
		NotSimulated: "a client run as a child process: the simulation runs every client in one process, in virtual time",
		Topologies:   both, Doc: "a client run as a child process frozen with SIGSTOP while it holds the lock, for 3 TTLs",
		Processes: 1, Linger: true,
		strike: func(s *striking) (armed, error) {
			// As pause-client's victim (strikePauseClient): waited for in
			// the scenario's context, paused for the full window. The
			// child freezes itself at its hold (FreezeAtHold), and Start's
			// SIGSTOP finds it frozen there.
			p := s.wl.Procs[s.rng.IntN(len(s.wl.Procs))]
			if err := bounded(s.outer, p.FreezeAtHold); err != nil {
				return armed{}, fmt.Errorf("pause-process: %w", err)
			}
			return armed{fault: &nemesis.PauseProcess{Client: p.Name, Pid: p.Pid}, window: 3 * s.sc.TTL, outer: true}, nil
		}}
}
