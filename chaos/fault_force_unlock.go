package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// forceUnlockFault: an operator force-unlocks a lock while its holder
// works under it, through the lock's own API (locker.ForceUnlocker, run
// on another client's Locker, as an operator's tool would); a lock
// without one gets key-loss's DEL. It acts on one scenario's key only.
func forceUnlockFault() Fault {
	return Fault{Name: contract.FaultForceUnlock,
		NotSimulated: "an operator's force unlock through the lock's API: not simulated yet (key-loss deletes the keys the same way for a lock without one)",
		Topologies:   both, Doc: "an operator's force unlock, through the lock's own API, of a lock a client holds (a DEL for a lock without one)",
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
