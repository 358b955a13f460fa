package chaos

import (
	"context"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

func crashClientFault() Fault {
	// With five clients or more (--clients, TestFencedDrivesEveryPath),
	// the holder and two waiters die, and live waiters are left to be
	// served. The matrix keeps three: with five, a victim armed to crash
	// at a command of a one-shot lock may never get the lock to get there.
	return Fault{Name: contract.FaultCrashClient,
		Simulate: simAtPoint(simCrashClient), SimDoc: "a holder crashes for good while it holds",
		Topologies: everywhere, Doc: "a holder crashes for good (or right after, or before, a named command), then a waiter in line (two, one after the other, with five clients or more)", Matrix: true,
		Takes: PointAfterOrBefore, strike: strikeCrashClient}
}

func strikeCrashClient(s *striking) (armed, error) {
	victim := s.victim
	if !s.sc.Point.IsZero() {
		return armed{fault: &nemesis.CrashClient{Client: victim.Name, Gate: victim.Gate, Point: s.sc.Point}}, nil
	}
	// Crash a holder: the first client to hold (striking.firstHolder, so
	// that a polling lock's starved waiters do not leave the row without a
	// crash). For a lock that waits in line, then crash another client
	// while it waits there (behind the dead holder's lease): a dead waiter
	// first in line, which must not hold up the live ones for long once
	// the lease expires (waiter liveness); and, with two live clients left
	// to wait, a TTL later a second one: several clients die in line in
	// one scenario, one dead head at a time (the lock's wait bound allows
	// one dead waiter ahead).
	var live []*workload.Client
	f := &nemesis.CrashClients{}
	holdCrash := func(ctx context.Context) error {
		v, err := s.firstHolder(ctx)
		if err != nil {
			return err
		}
		v.Gate.Crash()
		live = without(s.wl.Clients, v)
		f.Noted(v.Name)
		return nil
	}
	steps, name := []func(context.Context) error{holdCrash}, "crash-client (the first holder)"
	if n := len(s.wl.Clients) - 1; victim.CanWait() && n > 1 {
		queuedCrash := func(ctx context.Context) error {
			var waiter *workload.Client
			err := bounded(ctx, func(ctx context.Context) (err error) {
				waiter, err = workload.FirstQueued(ctx, live)
				return err
			})
			if err != nil {
				return err
			}
			waiter.Gate.Crash()
			live = without(live, waiter)
			f.Noted(waiter.Name)
			return nil
		}
		steps = append(steps, queuedCrash)
		name = "crash-client (the first holder), then a waiter in line"
		if n >= 4 {
			later := func(ctx context.Context) error {
				t := time.NewTimer(s.sc.TTL)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return ctx.Err()
				}
				return queuedCrash(ctx)
			}
			steps = append(steps, later)
			name = "crash-client (the first holder), then two waiters in line, one after the other"
		}
	}
	f.Label, f.Steps = name, steps
	return armed{fault: f}, nil
}

func simCrashClient(s *SimStrike, v *workload.Client) error {
	return s.window(&nemesis.CrashClient{Client: v.Name, Gate: v.Gate, Point: s.Point}, 3*s.TTL)
}
