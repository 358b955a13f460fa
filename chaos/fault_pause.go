package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// ErrCannotPauseServers: a bring-your-own deployment's servers are not
// lockproof's processes, so it cannot freeze them.
var ErrCannotPauseServers = errors.New("lockproof does not run the servers of a bring-your-own deployment, so it cannot pause them")

func pauseClientFault() Fault {
	return Fault{Name: contract.FaultPauseClient, Topologies: both, Doc: "a holder frozen for 3 TTLs (or right after a named command's reply), then woken", Matrix: true,
		Takes: PointAfter, Linger: true,
		// Under pause-client the woken holder's flaws only show when
		// another client holds the lock at that moment (a DEL deleting the
		// next holder's lock) or took it meanwhile (a stale write): more
		// clients, longer holds and shorter thinking keep the lock held
		// nearly all the time, so that the fault bites in nearly every
		// seed. Operations time out after 3s, longer than the pause: a
		// client paused between two commands of one operation (get-del's
		// GET and DEL) still sends the second when it wakes, as a client
		// without a deadline would.
		Shape:  WorkloadShape{Clients: 5, Hold: 50 * time.Millisecond, Think: 5 * time.Millisecond, OpTimeout: 3 * time.Second},
		strike: strikePauseClient}
}

func strikePauseClient(s *striking) (armed, error) {
	window, victim := 3*s.sc.TTL, s.victim
	if s.sc.Point.After != "" {
		return strikeFirstAt(s, window)
	}
	// Pause the victim while it holds its lock, for longer than the TTL: it
	// wakes believing it holds a lock another client took meanwhile.
	if err := bounded(s.ctx, victim.WaitHolding); err != nil {
		return armed{}, fmt.Errorf("pause-client: %w", err)
	}
	return armed{fault: &nemesis.PauseClient{Client: victim.Name, Gate: victim.Gate}, window: window}, nil
}

// strikeFirstAt pauses, for window counted from the strike, the first
// client to reach the scenario's fault point. Every client is armed: any
// holder gets to a point of its hold within one hold, where a victim
// chosen beforehand must first win the lock, which on a loaded machine it
// may not do before the run ends (seen in CI: the ownlock example's
// pause-client never struck its victim, and nothing bit). The others are
// disarmed at once; one that struck in the same instant is resumed, held
// no longer than the scheduler took. The window counts from the strike: a
// window counted from the arming could leave too short a pause to outlive
// the TTL.
func strikeFirstAt(s *striking, window time.Duration) (armed, error) {
	pfs := make([]*nemesis.PauseClient, len(s.wl.Clients))
	first := make(chan int, len(pfs))
	done := make(chan struct{})
	for i, c := range s.wl.Clients {
		pfs[i] = &nemesis.PauseClient{Client: c.Name, Gate: c.Gate, Point: s.sc.Point}
		pfs[i].Arm()
		go func(struck <-chan struct{}) {
			select {
			case <-struck:
				first <- i
			case <-done:
			}
		}(c.Gate.Struck())
	}
	victim := -1
	err := bounded(s.ctx, func(c context.Context) error {
		select {
		case victim = <-first:
			return nil
		case <-c.Done():
			return c.Err()
		}
	})
	close(done)
	for i, c := range s.wl.Clients {
		if i == victim {
			continue
		}
		c.Gate.PauseAfter("")
		c.Gate.Resume() // in case it struck as the wait ended
	}
	if err != nil {
		return armed{fault: pfs[0]}, fmt.Errorf("pause-client: armed after %s, no client got there: %w", s.sc.Point.After, err)
	}
	return armed{fault: pfs[victim], window: window, outer: true}, nil
}

func pauseProcessFault() Fault {
	return Fault{Name: contract.FaultPauseProcess, Topologies: both, Doc: "a client run as a child process frozen with SIGSTOP while it holds the lock, for 3 TTLs",
		Processes: 1,
		strike: func(s *striking) (armed, error) {
			p := s.wl.Procs[s.rng.IntN(len(s.wl.Procs))]
			if err := bounded(s.ctx, p.WaitHolding); err != nil {
				return armed{}, fmt.Errorf("pause-process: %w", err)
			}
			return armed{fault: &nemesis.PauseProcess{Client: p.Name, Pid: p.Pid}, window: 3 * s.sc.TTL}, nil
		}}
}

// needsOwnServers is the Needs of a fault that stops or restarts servers:
// not on a bring-your-own deployment, whose servers lockproof does not run.
func needsOwnServers(k env.Kind) error {
	if k == env.BYO {
		return ErrCannotPauseServers
	}
	return nil
}

func pauseServerFault() Fault {
	return Fault{Name: contract.FaultPauseServer, Topologies: both, Doc: "the master frozen (SIGSTOP, docker pause) for 1.5 TTLs, shorter than Sentinel's down-after", Matrix: true,
		Scope: ScopeServers,
		Needs: needsOwnServers,
		strike: func(s *striking) (armed, error) {
			m, err := lockServer(s)
			if err != nil {
				return armed{}, fmt.Errorf("pause-server: %w", err)
			}
			return armed{fault: &nemesis.PauseServer{Env: s.env, NodeID: m.ID}, window: s.sc.TTL + s.sc.TTL/2}, nil
		}}
}
