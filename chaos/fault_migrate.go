package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// migrateFault: the lock's hash slot moves to another master while the
// workload runs: one key every TTL/5 for 3 TTLs, then the rest, and the
// slot changes hands. It changes servers every scenario uses (a slot of
// the shared cluster), so it runs alone.
func migrateFault() Fault {
	return Fault{Name: contract.FaultMigrate,
		NotSimulated: "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		Topologies:   clusterOnly, Matrix: true,
		Doc:   "the lock's hash slot migrated to another master under load (MIGRATE key by key for 3 TTLs: ASK, TRYAGAIN, then MOVED)",
		Scope: ScopeServers, Needs: needsOwnServers("move its slots (CLUSTER SETSLOT)"),
		strike: func(s *striking) (armed, error) {
			slot, err := lockSlot(s)
			if err != nil {
				return armed{}, fmt.Errorf("migrate: %w", err)
			}
			return armed{fault: &nemesis.Migrate{Env: s.env, Slot: slot, Pace: s.sc.TTL / 5}, window: 3 * s.sc.TTL}, nil
		}}
}
