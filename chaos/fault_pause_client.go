package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

func pauseClientFault() Fault {
	return Fault{Name: contract.FaultPauseClient,
		Simulate: simAtPoint(simPauseClient), SimDoc: "a holder frozen between its lease check and its write for 3 TTLs (its gate holds every command, its watchdog's too)",
		Topologies: everywhere, Doc: "a holder frozen for 3 TTLs (or right after a named command's reply), then woken", Matrix: true,
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

func simPauseClient(s *SimStrike, v *workload.Client) error {
	if s.Point.After == "" {
		return s.window(&nemesis.PauseClient{Client: v.Name, Gate: v.Gate}, 3*s.TTL)
	}
	// Armed now, its window counted from the strike, as the real-time
	// fault does: the victim may get to its point long after.
	pf := &nemesis.PauseClient{Client: v.Name, Gate: v.Gate, Point: s.Point}
	pf.Arm()
	select {
	case <-v.Gate.Struck():
	case <-s.Ctx.Done():
		v.Gate.PauseAfter("")
		v.Gate.Resume() // in case it struck as the run ended
		return nil
	}
	return s.window(pf, 3*s.TTL)
}
