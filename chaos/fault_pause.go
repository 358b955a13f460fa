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

// ErrNotOurServers: a bring-your-own deployment's servers are not
// lockproof's processes, so it cannot freeze, kill, restart or reconfigure
// them (the fault's Needs says which).
var ErrNotOurServers = errors.New("lockproof does not run the servers of a bring-your-own deployment")

func pauseClientFault() Fault {
	return Fault{Name: contract.FaultPauseClient, Topologies: everywhere, Doc: "a holder frozen for 3 TTLs (or right after a named command's reply), then woken", Matrix: true,
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

// strikePauseClient pauses a victim once it holds or reaches its fault
// point. At its own moment, or at the lease check (the default point of a
// lock without fencing), the victim is the first client to hold once the
// fault's moment comes, the seed's choice first when several do: a fixed
// victim of a lock whose waiters poll may never win the lock again in a
// short run (redsync's and redis-py's waiters starve), and the row came
// out inconclusive. At a command's reply the victim is the seed's (a
// command is sent by holders and waiters alike). The wait is bounded by
// strikeWait in the scenario's own context, not by the run's Duration, and
// the window counts from the strike (armed.outer), so that a late strike
// still pauses the victim for the full 3 TTLs and the workload records
// what it does when it wakes (Linger).
func strikePauseClient(s *striking) (armed, error) {
	window, victim := 3*s.sc.TTL, s.victim
	if s.sc.Point.After == contract.LeaseCheckPoint {
		// A holder is right before its lease check (Holding): arm it there.
		var err error
		if victim, err = s.firstHolder(s.outer); err != nil {
			return armed{}, fmt.Errorf("pause-client: %w", err)
		}
	}
	if s.sc.Point.After != "" {
		// Arm the pause and count its window from the strike: the victim
		// may reach its fault point long after the arming (it must win the
		// lock first), and a window counted from the arming would leave too
		// short a pause to outlive the TTL.
		pf := &nemesis.PauseClient{Client: victim.Name, Gate: victim.Gate, Point: s.sc.Point}
		pf.Arm()
		struck := victim.Gate.Struck()
		if err := bounded(s.outer, func(c context.Context) error {
			select {
			case <-struck:
				return nil
			case <-c.Done():
				return c.Err()
			}
		}); err != nil {
			victim.Gate.PauseAfter("")
			victim.Gate.Resume() // in case it struck as the wait gave up
			return armed{fault: pf}, fmt.Errorf("pause-client: armed after %s, %s never got there: %w", s.sc.Point.After, victim.Name, err)
		}
		return armed{fault: pf, window: window, outer: true}, nil
	}
	// Pause the victim while it holds its lock, for longer than the TTL: it
	// wakes believing it holds a lock another client took meanwhile.
	victim, err := s.firstHolder(s.outer)
	if err != nil {
		return armed{}, fmt.Errorf("pause-client: %w", err)
	}
	return armed{fault: &nemesis.PauseClient{Client: victim.Name, Gate: victim.Gate}, window: window, outer: true}, nil
}

func pauseProcessFault() Fault {
	return Fault{Name: contract.FaultPauseProcess, Topologies: both, Doc: "a client run as a child process frozen with SIGSTOP while it holds the lock, for 3 TTLs",
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

// needsOwnServers is the Needs of a fault that does to servers what
// (pauses them, restarts them...): not on a bring-your-own deployment,
// whose servers lockproof does not run.
func needsOwnServers(what string) func(env.Kind) error {
	return func(k env.Kind) error {
		if k == env.BYO {
			return fmt.Errorf("%w, so it does not %s", ErrNotOurServers, what)
		}
		return nil
	}
}

func pauseServerFault() Fault {
	return Fault{Name: contract.FaultPauseServer, Topologies: everywhere, Doc: "the master frozen (SIGSTOP, docker pause) for 1.5 TTLs, shorter than Sentinel's down-after (a consensus store's leader: longer than its election timeout)", Matrix: true,
		Scope: ScopeServers,
		Needs: needsOwnServers("pause its master"),
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				// The store's leader, frozen past its election timeout:
				// the others elect a new one, and it wakes a follower.
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderPause, Label: contract.FaultPauseServer}, window: s.sc.TTL + s.sc.TTL/2}, nil
			}
			m, err := lockServer(s)
			if err != nil {
				return armed{}, fmt.Errorf("pause-server: %w", err)
			}
			return armed{fault: &nemesis.PauseServer{Env: s.env, NodeID: m.ID}, window: s.sc.TTL + s.sc.TTL/2}, nil
		}}
}
