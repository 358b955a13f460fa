package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
)

// keyLossFault: Redis forgets a lock while its holder lives, the one case
// where the lock's loss notice is the holder's only warning. It is an
// operator's DEL of every key of the holder's lock, on the master and on
// Redlock's masters (a restart without persistence, or an eviction, leaves
// the same state behind). The window is the instant of the DEL: the holder
// runs on, unpaused and connected, so the loss-notice rule holds a lock
// with a watchdog to its bound from the next grant on.
func keyLossFault() Fault {
	return Fault{Name: FaultKeyLoss, Doc: "an operator's DEL of a holder's lock keys while it holds (Redis forgets the lock)", Matrix: true,
		// Holders work up to 2s between read and write (four TTLs,
		// renewed by a watchdog where the lock has one): a victim that
		// releases soon after the DEL learns of the loss from its release,
		// and the loss notice has nothing left to tell. A longer run
		// leaves room for the struck hold and what follows it.
		Shape: WorkloadShape{Hold: 2 * time.Second}, Duration: 6 * time.Second,
		strike: func(s *striking) (armed, error) {
			topo := s.env.Topology()
			m, err := env.Master(s.ctx, topo)
			if err != nil {
				return armed{}, fmt.Errorf("key-loss: %w", err)
			}
			nodes := []string{m.Upstream}
			for _, n := range topo.Redlock {
				nodes = append(nodes, n.Upstream)
			}
			// Strike the first client found working under its lock (before
			// its lease check), with its keys there
			// (a holder that worked briefly may be gone by the time we
			// look): waiting for one chosen client could outlast the run
			// when holds are long.
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				for _, c := range s.wl.Clients {
					if !c.Working() {
						continue
					}
					kl := &nemesis.KeyLoss{Client: c.Name, Key: c.Key, Nodes: nodes}
					ok, err := kl.Present(s.ctx)
					if err != nil {
						return armed{}, fmt.Errorf("key-loss: %w", err)
					}
					if ok && c.Working() {
						return armed{fault: kl}, nil
					}
				}
				select {
				case <-tick.C:
				case <-s.ctx.Done():
					return armed{}, fmt.Errorf("key-loss: no client held its lock: %w", s.ctx.Err())
				}
			}
		}}
}
