package chaos

import (
	"context"
	"fmt"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func killProcessFault() Fault {
	return Fault{Name: contract.FaultKillProcess,
		NotSimulated: "a client run as a child process: the simulation runs every client in one process, in virtual time",
		Topologies:   both, Doc: "a client run as a child process SIGKILLed while it waits in line (or, for a lock without a blocking acquire, while it holds it)",
		Processes: 1,
		strike: func(s *striking) (armed, error) {
			p := s.wl.Procs[s.rng.IntN(len(s.wl.Procs))]
			where, wait := "holding", p.WaitHolding
			if s.victim.CanWait() { // the child runs the same lock as every client
				where, wait = "queued", p.WaitQueued
			}
			f := &nemesis.CrashClients{Label: fmt.Sprintf("kill-process %s (%s)", p.Name, where), Steps: []func(context.Context) error{
				func(ctx context.Context) error {
					if err := bounded(ctx, wait); err != nil {
						return err
					}
					return p.Kill()
				}}}
			return armed{fault: f}, nil
		}}
}
