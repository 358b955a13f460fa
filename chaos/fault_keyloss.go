package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// keyLossFault: Redis forgets a lock while its holder lives, the one case
// where the lock's loss notice is the holder's only warning. It is an
// operator's DEL of every key of the holder's lock, on the master and on
// Redlock's masters (a restart without persistence, or an eviction, leaves
// the same state behind). The window is the instant of the DEL: the holder
// runs on, unpaused and connected, so the loss-notice rule holds a lock
// with a watchdog to its bound from the next grant on.
func keyLossFault() Fault {
	return Fault{Name: contract.FaultKeyLoss, Topologies: both, Doc: "an operator's DEL of a holder's lock keys while it holds (Redis forgets the lock)", Matrix: true,
		// Holders work up to 2s between read and write (four TTLs,
		// renewed by a watchdog where the lock has one): a victim that
		// releases soon after the DEL learns of the loss from its release,
		// and the loss notice has nothing left to tell. A longer run
		// leaves room for the struck hold and what follows it.
		Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second, Admin: keyDeletion,
		strike: func(s *striking) (armed, error) {
			kl, _, err := holderKeys(s)
			if err != nil {
				return armed{}, fmt.Errorf("key-loss: %w", err)
			}
			return armed{fault: kl}, nil
		}}
}

// restartFault: Redis forgets every lock at once, the master crashed and
// restarted without persistence (same address, empty data set; on Docker,
// the container killed and started again), while a client works under its
// lock; for Redlock, the one of its masters found holding the lock. It
// acts on servers every scenario shares, so it runs alone; the window is
// the restart.
func restartFault() Fault {
	return Fault{Name: contract.FaultRestart, Topologies: everywhere, Doc: "the master (for redlock, one of its masters) crashes and restarts without persistence while a client holds (Redis forgets every lock); a consensus store's leader crashes and comes back with its data wiped",
		Scope: ScopeServers, Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second,
		Needs: needsOwnServers("crash and restart its master"),
		strike: func(s *striking) (armed, error) {
			if onStore(s) {
				// The leader, while a client holds: killed, and after 3
				// TTLs (the others elect meanwhile) back with no data, a
				// new member that syncs from the new leader.
				if _, err := s.firstHolder(s.outer); err != nil {
					return armed{}, fmt.Errorf("restart: %w", err)
				}
				return armed{fault: &nemesis.Leader{Env: s.env, Mode: nemesis.LeaderWipe, Label: contract.FaultRestart}, window: 3 * s.sc.TTL}, nil
			}
			for {
				kl, nodes, err := holderKeys(s)
				if err != nil {
					return armed{}, fmt.Errorf("restart: %w", err)
				}
				// The node to restart: the first that holds the lock's keys
				// (the master, or for Redlock one of its masters).
				for _, n := range nodes {
					one := &nemesis.KeyLoss{Client: kl.Client, Key: kl.Key, Nodes: []string{n.Upstream}, Auth: kl.Auth}
					if ok, err := one.Present(s.ctx); err != nil {
						return armed{}, fmt.Errorf("restart: %w", err)
					} else if ok {
						return armed{fault: &nemesis.Restart{Lock: one, Env: s.env, NodeID: n.ID}}, nil
					}
				}
				// The holder released between the two looks (a loaded
				// machine, a brief hold): find a holder again, until the
				// strike's time runs out (holderKeys then says so).
			}
		}}
}

// forceUnlockFault: an operator force-unlocks a lock while its holder
// works under it, through the lock's own API (locker.ForceUnlocker, run
// on another client's Locker, as an operator's tool would); a lock
// without one gets key-loss's DEL. It acts on one scenario's key only.
func forceUnlockFault() Fault {
	return Fault{Name: contract.FaultForceUnlock, Topologies: both, Doc: "an operator's force unlock, through the lock's own API, of a lock a client holds (a DEL for a lock without one)",
		Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second,
		Admin: func(topology string) []string {
			return append([]string{"the lock's own force unlock of the scenario's lock key, through another client's Locker; for a lock without one:"}, keyDeletion(topology)...)
		},
		strike: func(s *striking) (armed, error) {
			kl, _, err := holderKeys(s)
			if err != nil {
				return armed{}, fmt.Errorf("force-unlock: %w", err)
			}
			f := &nemesis.ForceUnlock{Lock: kl, Unlock: func(ctx context.Context, kl *nemesis.KeyLoss) (bool, error) {
				// The operator's tool: another client's Locker (any will do).
				for _, c := range s.wl.Clients {
					if fu, ok := c.Locker().(locker.ForceUnlocker); ok && c.Name != kl.Client {
						held, err := fu.ForceUnlock(ctx, kl.Key)
						if !errors.Is(err, locker.ErrUnsupported) {
							return held, err
						}
						break
					}
				}
				if err := kl.Start(ctx); err != nil { // no force unlock: the operator's DEL
					return false, err
				}
				return kl.Evidence().Bit, nil
			}, Again: func(context.Context) (*nemesis.KeyLoss, error) {
				// The holder released between the look and the unlock
				// (as restart's strike finds it): the next holder, until
				// the strike's time runs out.
				kl, _, err := holderKeys(s)
				return kl, err
			}}
			return armed{fault: f}, nil
		}}
}

// keyDeletion is the Admin of a fault that deletes a holder's lock keys
// (nemesis.KeyLoss).
func keyDeletion(string) []string {
	return []string{
		"SCAN 0 MATCH *<scenario lock key>* COUNT 1000, repeated until the cursor returns, on every master (and Redlock's), while a client works under its lock, until its keys are found (at most the run's duration); after each such look it rests nine times as long as the look took (at least 1ms), so SCANs fill at most a tenth of the search",
		"DEL of the keys that SCAN found (the scenario's lock's own), once per scenario, on the masters holding them",
	}
}

// holderKeys waits for the first client found working under its lock
// (before its lease check) with its keys on the lock's nodes, the master
// (a cluster's masters) and Redlock's masters (a holder that worked briefly may be gone by the
// time we look), and returns its lock's keys and those nodes: waiting for
// one chosen client could outlast the run when holds are long.
func holderKeys(s *striking) (*nemesis.KeyLoss, []env.Node, error) {
	nodes, err := lockNodes(s.ctx, s.env.Topology())
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Upstream
	}
	var found *nemesis.KeyLoss
	// present remembers the clients whose keys a look found: a lock's keys
	// outlive a hold (the fence counter lives on), so once found they need
	// no second SCAN, and the next time such a client works it is taken at
	// once. Before, every look SCANned again and asked the client to be
	// still working after it: with both cores loaded a SCAN of a
	// cluster's masters outlasted the brief holds, and the rest after it
	// (scanRest times as long) outlasted the next ones, so that a run of
	// TestFaultsOnBYOCluster found no holder in 15 s.
	present := map[string]*nemesis.KeyLoss{}
	err = paced(s.ctx, func() (bool, error) {
		for _, c := range s.wl.Clients {
			if kl := present[c.Name]; kl != nil && c.Working() {
				found = kl
				return true, nil
			}
		}
		for _, c := range s.wl.Clients {
			if !c.Working() || present[c.Name] != nil {
				continue
			}
			kl := &nemesis.KeyLoss{Client: c.Name, Key: c.Key, Nodes: addrs, Auth: s.env.Topology().Auth}
			ok, err := kl.Present(s.ctx)
			if err != nil {
				return false, err
			}
			if ok {
				present[c.Name] = kl
				if c.Working() {
					found = kl
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("no client held its lock: %w", err)
	}
	return found, nodes, nil
}

// scanRest is how much longer than a look took paced rests before the
// next: a look SCANs the whole keyspace of every node of the lock, which
// on a large database is heavy, so the search keeps the servers busy
// with it at most 1/(1+scanRest) of its time.
const scanRest = 9

// paced asks look until it says true (or fails, or ctx ends), resting
// after each look scanRest times as long as it took, and at least a
// millisecond (issue 47 item 5: a look every millisecond kept a large
// staging database SCANning back to back).
func paced(ctx context.Context, look func() (bool, error)) error {
	for {
		start := time.Now()
		ok, err := look()
		if ok || err != nil {
			return err
		}
		if err := env.Sleep(ctx, max(time.Millisecond, scanRest*time.Since(start))); err != nil {
			return err
		}
	}
}
