package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

// keyLossFault: Redis forgets a lock while its holder lives, the one case
// where the lock's loss notice is the holder's only warning. It is an
// operator's DEL of every key of the holder's lock, on the master and on
// Redlock's masters (a restart without persistence, or an eviction, leaves
// the same state behind). The window is the instant of the DEL: the holder
// runs on, unpaused and connected, so the loss-notice rule holds a lock
// with a watchdog to its bound from the next grant on.
func keyLossFault() Fault {
	return Fault{Name: contract.FaultKeyLoss,
		Simulate: simOnWorker(simKeyLoss), SimDoc: "an operator deletes the lock keys of a holder found working under its lock (before its lease check), as the real-time key-loss does",
		Topologies: both, Doc: "an operator's DEL of a holder's lock keys while it holds (Redis forgets the lock)", Matrix: true,
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

func simKeyLoss(s *SimStrike, v *workload.Client) error {
	var deleted []string
	name := contract.FaultKeyLoss + " " + v.Name
	return s.window(&simWindow{name: name,
		start: func() {
			// The victim's keys on the first of the lock's nodes that has
			// any (for Redlock, one of its masters found holding the lock,
			// as the real-time key-loss strikes).
			for _, a := range s.LockNodes {
				deleted = append(deleted, s.Net.DelKeys(a, v.Key)...)
				if len(deleted) > 0 {
					return
				}
			}
		},
		evidence: func() string { return fmt.Sprintf("%s: deleted %d keys %v", name, len(deleted), deleted) },
	}, s.TTL)
}
